"""The verbs that start a server themselves: server and demo."""

from __future__ import annotations

import re
import shlex
import signal
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.docs.test_cli_page import check_shown, check_whole, console_sessions

from .conftest import Cli

README = Path(__file__).resolve().parents[2] / "README.md"


@pytest.fixture
def default_port() -> Iterator[int]:
    """A free port to stand in for 4222 (``JETSTREAM_DEFAULT_PORT``), so that the tests
    never depend on 4222 being free on the machine."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    yield port


def _quick_start() -> list[tuple[list[str], list[str]]]:
    """The README's quick start: the second terminal's commands (after terminal 1's
    ``jetstream server``), each with the output lines the README shows under it."""
    text = README.read_text()
    section = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    assert ".venv/bin/jetstream server\n" in section
    return [(shlex.split(c)[1:], shown) for c, shown in console_sessions(section)]


def test_the_readme_quick_start_as_written(cli: Cli, default_port: int) -> None:
    env = {"JETSTREAM_DEFAULT_PORT": str(default_port)}
    steps = _quick_start()
    assert len(steps) >= 4
    server = cli.spawn("server", server=False, env=env)
    assert server.proc.stdout is not None
    first = server.proc.stdout.readline()
    assert f"nats://127.0.0.1:{default_port}" in first, first  # the default port, no fallback
    while "Ctrl-C" not in (line := server.proc.stdout.readline()):
        assert "export NATS_URL" not in line  # nothing to paste on the default port
    for args, shown in steps:
        done = cli(*args, server=False, env=env)
        check_shown(shlex.join(args), shown, done.stdout + done.stderr)
        check_whole(shlex.join(args), shown, done.stdout + done.stderr)
    server.proc.send_signal(signal.SIGINT)
    assert "stopping" in server.wait().stdout


def test_a_taken_port_is_said_in_one_line_and_a_free_one_used(cli: Cli, default_port: int) -> None:
    env = {"JETSTREAM_DEFAULT_PORT": str(default_port)}
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", default_port))
        taken.listen()
        server = cli.spawn("server", server=False, env=env)
        assert server.proc.stdout is not None and server.proc.stderr is not None
        said = server.proc.stderr.readline()
        assert said.startswith(f"port {default_port} is in use"), said
        first = server.proc.stdout.readline()
        url = re.search(r"nats://127\.0\.0\.1:(\d+)", first)
        assert url and int(url.group(1)) != default_port, first
        export = server.proc.stdout.readline()
        assert export.strip() == f"export NATS_URL={url.group(0)}"
        # the line works as printed: the next command finds the server through it
        added = cli(
            "stream",
            "add",
            "FALLBACK",
            "--subjects",
            "fb.>",
            server=False,
            env={**env, "NATS_URL": url.group(0)},
        )
        assert "FALLBACK" in added.stdout
        server.proc.send_signal(signal.SIGINT)
        server.wait()


def test_server_then_verbs_against_it(cli: Cli) -> None:
    server = cli.spawn("server", "--port", "0", server=False)
    assert server.proc.stdout is not None
    first = server.proc.stdout.readline()
    match = re.search(r"nats://127\.0\.0\.1:\d+", first)
    assert match, first
    while "Ctrl-C" not in server.proc.stdout.readline():
        pass
    added = cli("--server", match.group(0), "kv", "add", "LOCAL", "--json", server=False)
    assert '"bucket": "LOCAL"' in added.stdout
    server.proc.send_signal(signal.SIGINT)
    assert "stopping" in server.wait().stdout


def test_demo(cli: Cli) -> None:
    proc = cli("demo", server=False)
    assert "JetStream enabled" in proc.stdout
    assert "Consumer 2" in proc.stdout and "# messages with ack pending: 0" in proc.stdout
