"""Console sessions of the docs: docs/cli.md and the README's quick start.

A session is a ```console block: ``$ jetstream ...`` (or ``$ .venv/bin/jetstream ...``)
lines, each followed by output lines the page shows. ``run_command`` runs one as
``python -m jetstream ...``: it must exit 0, and every output line shown under it must
appear in what it printed (``...`` in a shown line stands for text that varies; the pieces
around it must appear in order on one line). Other commands (``python -m jetstream
server``, which runs until Ctrl-C) are shown, not run.

The sessions run in ``tests/docs/test_sequence.py``, in the order of the site, against
one server, twice. The README's are checked whole: they show all a command prints.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "cli.md"
#: how a command of the CLI is spelt in a session (the installed script, or its path in .venv)
PROGRAMS = ("jetstream", ".venv/bin/jetstream")


def console_sessions(text: str) -> list[tuple[str, list[str]]]:
    """(command line, output lines shown under it) for each CLI command of the
    ```console blocks of ``text``."""
    out: list[tuple[str, list[str]]] = []
    in_console = False
    for line in text.splitlines():
        if line.startswith("```"):
            in_console = line.strip() == "```console"
            continue
        if not in_console:
            continue
        if line.startswith("$ "):
            out.append((line[2:], []))
        elif out and line.strip():
            out[-1][1].append(line)
    return [(c, shown) for c, shown in out if c.split(" ", 1)[0] in PROGRAMS]


def run_command(command: str, shown: list[str], url: str, *, whole: bool = False) -> None:
    """Run one command of a session against ``url``; check its exit status and output
    (``whole``: that the session shows all of it, ``check_whole``)."""
    env = {**os.environ, "NATS_URL": url, "JETSTREAM_CLI_PLAIN": "1"}
    argv = [sys.executable, "-m", "jetstream", *shlex.split(command)[1:]]
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    printed = done.stdout + done.stderr
    assert done.returncode == 0, f"$ {command}\n{printed}"
    check_shown(command, shown, printed)
    if whole:
        check_whole(command, shown, printed)


def check_whole(command: str, shown: list[str], printed: str) -> None:
    """The lines shown under ``command`` are all it ``printed`` (its blank lines aside),
    in order, each whole (``...`` standing for text that varies): the README's quick
    start shows what the commands really print."""
    lines = [line.strip() for line in printed.splitlines() if line.strip()]
    assert len(lines) == len(shown), f"$ {command}: shows {len(shown)} lines of\n{printed}"
    for want, got in zip(shown, lines, strict=True):
        pattern = ".*?".join(re.escape(piece.strip()) for piece in want.split("..."))
        assert re.fullmatch(pattern, got), f"$ {command}: shows {want!r} for {got!r}"


def check_shown(command: str, shown: list[str], printed: str) -> None:
    """Every line shown under ``command`` is in what it ``printed`` (see the module)."""
    for line in shown:
        pieces = [piece.strip() for piece in line.split("...")]
        assert re.search(r"\S", pieces[0]), f"$ {command}: an empty shown line"
        # every fixed piece, in order, on one printed line
        pattern = ".*?".join(re.escape(piece) for piece in pieces if piece)
        assert re.search(pattern, printed), f"$ {command}: {line!r} not in\n{printed}"


def test_the_page_has_sessions() -> None:
    commands = [c for c, _ in console_sessions(PAGE.read_text())]
    assert len(commands) >= 20
    verbs = {c.split()[1] for c in commands}
    assert {"stream", "pub", "consumer", "kv", "obj", "bench"} <= verbs


def test_the_readme_quick_start_is_a_session() -> None:
    commands = [c for c, _ in console_sessions((ROOT / "README.md").read_text())]
    assert commands[0].startswith(".venv/bin/jetstream stream add ")
    assert any(" consumer next " in c for c in commands)
    # it removes what it made, so that it runs again as it is
    assert commands[-1].startswith(".venv/bin/jetstream stream rm ")


def test_a_whole_output_is_every_line_in_order() -> None:
    printed = "Stream S (created 2026-01-01 UTC)\n\n  Messages: 0\nnote on stderr\n"
    check_whole("x", ["Stream S (created ...)", "Messages: 0", "note on stderr"], printed)
    for shown in (["Stream S (created ...)", "Messages: 0"], ["Messages: 0", "x", "y"]):
        with pytest.raises(AssertionError):
            check_whole("x", shown, printed)


def test_a_server_is_shown_not_run() -> None:
    text = "```console\n$ python -m jetstream server\nlistening\n$ jetstream stream ls\n```\n"
    assert console_sessions(text) == [("jetstream stream ls", [])]
