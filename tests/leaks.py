"""The leaked-task check, for the tests' own event loops as for pytest-asyncio's.

``settle_and_describe()`` waits a short grace for tasks other than the current one to
finish and describes those still pending (cancelling them); the conftest's autouse fixture
uses it after each async test. ``run(coro)`` replaces ``asyncio.run`` in synchronous tests
(the Spark tests, the recovery matrix): it runs ``coro`` on a fresh loop and, before the
loop is closed, fails the test if a task other than the main one is still pending, where
``asyncio.run`` would cancel it silently.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

import pytest

__all__ = ["LEAK_GRACE", "LEAK_GRACE_TURNS", "leak_message", "run", "settle_and_describe"]

T = TypeVar("T")

# How long pending tasks get to finish after a test before they count as leaked, and how
# many turns of the loop at the least (a loaded machine may hold the process up meanwhile).
LEAK_GRACE = 0.1
LEAK_GRACE_TURNS = 10


def _describe(task: asyncio.Task[Any]) -> str:
    """The task's name and the coroutine it was created with, where that one waits."""
    coro = task.get_coro()
    frame = getattr(coro, "cr_frame", None)
    where = f" at {frame.f_code.co_filename}:{frame.f_lineno}" if frame is not None else ""
    return f"{task.get_name()}: {getattr(coro, '__qualname__', repr(coro))}(){where}"


async def settle_and_describe() -> list[str]:
    """Give the loop's other tasks ``LEAK_GRACE`` to finish; describe (and cancel) the
    ones still pending after it. An empty list: nothing leaked."""
    current = asyncio.current_task()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + LEAK_GRACE
    for _ in range(3):  # callbacks scheduled by the last close() run first
        await asyncio.sleep(0)
    turns = 0
    while True:
        pending = [t for t in asyncio.all_tasks() if t is not current and not t.done()]
        if not pending or (loop.time() >= deadline and turns >= LEAK_GRACE_TURNS):
            break
        await asyncio.sleep(0.01)
        turns += 1
    if not pending:
        return []
    described = [_describe(t) for t in pending]
    for task in pending:
        task.cancel()
    await asyncio.wait(pending, timeout=1.0)
    return described


def leak_message(described: list[str], where: str) -> str:
    return (
        f"{len(described)} task(s) still pending {LEAK_GRACE:g} s after {where} "
        "(cancelled now):\n  " + "\n  ".join(described)
    )


def run(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(coro)``, failing the test if ``coro`` leaves a task pending.

    The check runs on the same loop, after ``coro`` returned and before the loop is
    closed (``asyncio.run`` would cancel such tasks without a word). When ``coro``
    raises, its exception is raised and the tasks are only cancelled.
    """

    async def checked() -> tuple[T, list[str]]:
        value = await coro
        return value, await settle_and_describe()

    value, leaked = asyncio.run(checked())
    if leaked:
        pytest.fail(leak_message(leaked, "the coroutine returned"), pytrace=False)
    return value
