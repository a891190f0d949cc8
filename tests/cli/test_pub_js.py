"""pub --js to a subject that no stream stores: one line that says so, at once."""

from __future__ import annotations

import time

from .conftest import Cli


def test_pub_js_without_a_stream_says_so_in_one_line_at_once(cli: Cli) -> None:
    t0 = time.monotonic()
    # a deadline of 60 s: waited out, the command would outlive the runner's limit
    done = cli("--timeout", "60s", "pub", "cli.nostream.here", "x", "--js", status=1)
    took = time.monotonic() - t0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: no stream stores subject 'cli.nostream.here'")
    assert "jetstream stream ls" in lines[0]
    assert took < 30, took  # a Python start and a round trip, not the 60 s deadline
    assert done.stdout == ""
