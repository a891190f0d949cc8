"""The verbs that start a server themselves: server and demo."""

from __future__ import annotations

import re
import signal

from .conftest import Cli


def test_server_then_verbs_against_it(cli: Cli) -> None:
    server = cli.spawn("server", server=False)
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
