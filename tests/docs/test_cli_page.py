"""docs/cli.md: every ``$ jetstream ...`` line of its console blocks, run in order against an
embedded server; each must exit 0, and the output lines the page shows under a command
must appear in what it printed (``...`` in a shown line stands for text that varies; the
pieces around it must appear in order on one line)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from jetstream.embedded import NatsServer

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "cli.md"


def _sessions() -> list[tuple[str, list[str]]]:
    """(command line, output lines shown under it) for each ``$ jetstream`` line."""
    out: list[tuple[str, list[str]]] = []
    in_console = False
    for line in PAGE.read_text().splitlines():
        if line.startswith("```"):
            in_console = line.strip() == "```console"
            continue
        if not in_console:
            continue
        if line.startswith("$ "):
            command = line[2:]
            out.append((command, []))
        elif out and line.strip():
            out[-1][1].append(line)
    return [(c, shown) for c, shown in out if c.startswith("jetstream ")]


def test_the_page_has_sessions() -> None:
    commands = [c for c, _ in _sessions()]
    assert len(commands) >= 20
    verbs = {c.split()[1] for c in commands}
    assert {"stream", "pub", "consumer", "kv", "obj", "bench"} <= verbs


def test_every_command_of_the_page_runs(module_nats_server: NatsServer) -> None:
    env = {**os.environ, "NATS_URL": module_nats_server.url, "JETSTREAM_CLI_PLAIN": "1"}
    for command, shown in _sessions():
        argv = [sys.executable, "-m", "jetstream", *shlex.split(command)[1:]]
        done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
        printed = done.stdout + done.stderr
        assert done.returncode == 0, f"$ {command}\n{printed}"
        for line in shown:
            pieces = [piece.strip() for piece in line.split("...")]
            assert re.search(r"\S", pieces[0]), f"$ {command}: an empty shown line"
            # every fixed piece, in order, on one printed line
            pattern = ".*?".join(re.escape(piece) for piece in pieces if piece)
            assert re.search(pattern, printed), f"$ {command}: {line!r} not in\n{printed}"
