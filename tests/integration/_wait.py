"""Waiting, in a test, for something the client or another connection does a moment
later: polled, with a bound, and the assertion names what did not happen."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

__all__ = ["until"]


async def until(cond: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    """Return once ``cond()`` holds; an ``AssertionError`` (``not <what> within <timeout>
    s``) if it does not within ``timeout`` seconds."""
    try:
        async with asyncio.timeout(timeout):
            while not cond():
                await asyncio.sleep(0.01)
    except TimeoutError:
        raise AssertionError(f"not {what} within {timeout:g} s") from None
