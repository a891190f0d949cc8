"""A minute of the nemesis run (issue 50) with a fixed seed, checked from its history.

The seed's schedule has fifteen faults, every kind among its first seven (by 31 s): a
client blackholed, a stream leader step-down, a lame-duck restart, added latency, a
kill -9 and restart, a SIGSTOP, a cut. The checker's verdicts are asserted as they are
(nothing lost, duplicated, out of order or not linearizable; nothing leaked); its
timing bounds are generous ones here, for a shared, loaded machine, where the issue's
own (a deadline outlived by 1 s at most, the loop blocked 100 ms at most, 20 MB of
memory) are ``make nemesis``'s. The report, printed, gives the exact figures.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.leaks import run
from tests.nemesis.checker import Bounds, check
from tests.nemesis.report import report
from tests.nemesis.run import nemesis_run
from tests.nemesis.schedule import KINDS

SEED = 21
SECONDS = 60.0
#: the timing and memory bounds asserted here (see the module docstring)
GENEROUS = Bounds(overrun=10.0, block=2.0, rss_mb=60.0)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_minute_of_faults(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    run(nemesis_run(SECONDS, SEED, path))
    result = check(path, GENEROUS)
    text = report(result, str(path))
    print(text)
    assert result.ok, text
    assert set(result.faults) == set(KINDS), text
    assert result.figures["acked"] > 1000, text
    assert result.ops[("update", "ok")] and result.ops[("create", "ok")], text
