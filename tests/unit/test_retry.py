"""``Backoff``, the one retry-until-deadline helper of the package's retry loops."""

from __future__ import annotations

import asyncio

import pytest

from jetstream._retry import RETRY_BASE, RETRY_CAP, Backoff

pytestmark = pytest.mark.asyncio


async def test_pauses_grow_and_stay_within_the_deadline() -> None:
    backoff = Backoff.within(10.0)
    pauses = [backoff.next_pause() for _ in range(8)]
    assert all(p is not None for p in pauses)
    assert RETRY_BASE / 2 <= pauses[0] <= RETRY_BASE  # type: ignore[operator]
    assert max(p for p in pauses if p is not None) <= RETRY_CAP
    assert backoff.failed == 8
    short = Backoff.within(0.2)
    for _ in range(10):
        pause = short.next_pause(share=0.5)
        assert pause is not None and pause <= 0.1


async def test_the_deadline_ends_the_attempts() -> None:
    done = Backoff.within(0.01, floor=0.05)
    assert done.next_pause() is None
    assert await done.pause() is False
    assert done.failed == 0
    unbounded = Backoff(None)
    assert unbounded.left() == float("inf") and unbounded.next_pause() is not None


async def test_restart_starts_from_the_shortest_pause() -> None:
    backoff = Backoff.within(60.0, base=0.5, cap=4.0)
    for _ in range(5):
        backoff.next_pause()
    backoff.restart()
    assert backoff.failed == 0
    pause = backoff.next_pause()
    assert pause is not None and pause <= RETRY_BASE


async def test_pause_sleeps_the_pause() -> None:
    loop = asyncio.get_running_loop()
    backoff = Backoff.within(5.0, base=0.02, cap=0.02)
    t0 = loop.time()
    assert await backoff.pause() is True
    assert 0.005 <= loop.time() - t0 < 1.0
