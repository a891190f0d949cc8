"""Errors of the Spark adapter reach the user as themselves: an error raised through
``run_sync`` carries no stray context."""

from __future__ import annotations

import asyncio
import traceback

import pytest

from jetstream.spark import SparkConfigError
from jetstream.spark._common import run_sync


async def _fail() -> None:
    raise SparkConfigError("the real cause")


def _no_context(exc: BaseException) -> None:
    assert exc.__context__ is None
    assert exc.__cause__ is None
    text = "".join(traceback.format_exception(exc))
    assert "no running event loop" not in text
    assert "During handling" not in text
    assert text.rstrip().splitlines()[-1].endswith("SparkConfigError: the real cause")


def test_a_run_sync_error_carries_no_context() -> None:
    with pytest.raises(SparkConfigError) as info:
        run_sync(_fail())
    _no_context(info.value)


def test_a_run_sync_error_from_a_running_loop_carries_no_context() -> None:
    async def inside() -> None:
        run_sync(_fail())  # on a thread of its own: this thread's loop is running

    with pytest.raises(SparkConfigError) as info:
        asyncio.run(inside())
    _no_context(info.value)
