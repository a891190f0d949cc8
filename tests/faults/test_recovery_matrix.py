"""The recovery matrix (issue 19, part 4): every consumption mode against every disruption.

One run per disruption (a module-scoped fixture: one server or one 3-node cluster, all
modes reading at once, the disruption applied once; see ``tests/faults/matrix.py``), then
one test per cell: nothing raised to the application, nothing acknowledged lost, no
duplicate and no disorder where the mode promises none, and the next message within
``STEP_BOUND`` seconds after each step. The recovery times are reported by ``make
faults-report`` against the 2 s target, never asserted here.

The read loops of issue 35 (``tests/faults/loops.py``) are cells too, with the moment the
loop makes its call as a parameter: every acknowledged message within ``LAG_BOUND`` of the
servers answering again, far below its consumer's 60 s ack_wait, and nothing left
pending on the consumer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from tests.faults.loops import CALLS, LAG_BOUND, LOOPS, loop_mode
from tests.faults.matrix import DISRUPTIONS, MODES, STEP_BOUND, Matrix, run_matrix


def _cells() -> list[object]:
    return [
        pytest.param(disruption, mode, id=f"{disruption}|{mode}")
        for disruption in DISRUPTIONS
        for mode in MODES
    ]


def _loop_cells() -> list[object]:
    return [
        pytest.param(disruption, call, moment, id=f"{disruption}|{call} loop|{moment}")
        for disruption in DISRUPTIONS
        for moment in LOOPS.get(disruption, ())
        for call in CALLS
    ]


@pytest.fixture(scope="module")
def matrix() -> Callable[[str], Matrix]:
    """Runs a disruption on first use and keeps its result for the module's other cells
    (the run raises again for each cell when it failed)."""
    runs: dict[str, Matrix | BaseException] = {}

    def get(disruption: str) -> Matrix:
        if disruption not in runs:
            try:
                runs[disruption] = asyncio.run(run_matrix(disruption))
            except Exception as exc:
                runs[disruption] = exc
        run = runs[disruption]
        if isinstance(run, BaseException):
            raise AssertionError(f"the {disruption} run failed: {run!r}") from run
        return run

    return get


@pytest.mark.timeout(600)
@pytest.mark.parametrize(("disruption", "mode"), _cells())
def test_cell(matrix: Callable[[str], Matrix], disruption: str, mode: str) -> None:
    run = matrix(disruption)
    problems = run.problems(mode)
    assert not problems, f"cell [{disruption} | {mode}]: " + "; ".join(problems)
    rec = run.recovery(mode)
    assert rec is not None and rec <= STEP_BOUND


@pytest.mark.timeout(600)
@pytest.mark.parametrize(("disruption", "call", "moment"), _loop_cells())
def test_loop(matrix: Callable[[str], Matrix], disruption: str, call: str, moment: str) -> None:
    """A ``next()`` or ``fetch(10)`` loop whose call is made at ``moment``."""
    run = matrix(disruption)
    mode = loop_mode(call, moment)
    problems = run.problems(mode)
    assert not problems, f"loop [{disruption} | {mode}]: " + "; ".join(problems)
    lag = run.lag(mode)
    assert lag is not None and lag <= LAG_BOUND


@pytest.mark.timeout(600)
@pytest.mark.parametrize("disruption", DISRUPTIONS)
def test_the_disruption_hit(matrix: Callable[[str], Matrix], disruption: str) -> None:
    """The run itself: every step measured, publishing went on across it, and the live
    cells read through it (a cell that read nothing after the first step is caught by
    the cells' own checks)."""
    run = matrix(disruption)
    assert run.steps and all(s.down <= s.answer for s in run.steps)
    expected_steps = 3 if disruption == "rolling lame duck" else 1
    assert len(run.steps) == expected_steps
    assert len(run.acked) > 50 and len(run.kv_acked) > 50
    last = max(s.answer for s in run.steps)
    assert max(run.cells["ordered messages"].at) > last
    assert not run.pending, f"tasks left pending after the run: {run.pending}"
