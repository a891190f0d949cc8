"""Backoff for calls that end at a deadline rather than after a count of tries.

A publish answered by no responders (nothing was stored: a leader election, a
restart, a stream not yet made), a pull refused while a consumer has no leader,
a direct get no replica answers yet, an ordered consumer being made again: each waits
``retry_delay(n)`` before try ``n + 1``. The delays start near 50 ms and double up to
about 1 s, with jitter so that many clients retrying at once do not hit the new leader
in step.

``Backoff`` is the one retry-until-deadline helper every retry loop of the package
uses: it counts the failed attempts, gives the pause before the next one cut to what
is left of the call's deadline, and says when the deadline has come. The loops differ
in what they try and what ends a pause early (an election announced); not in that.
"""

from __future__ import annotations

import asyncio
import math
import random

# a generator of its own: the jitter neither moves nor follows the global `random`
# state that an application (or a test framework) seeds
_rng = random.Random()

__all__ = [
    "ATTEMPT_CAP",
    "RETRY_BASE",
    "RETRY_CAP",
    "Backoff",
    "attempt_timeout",
    "retry_delay",
]

RETRY_BASE = 0.05
RETRY_CAP = 1.0
ATTEMPT_CAP = 2.0


def retry_delay(attempt: int, base: float = RETRY_BASE, cap: float = RETRY_CAP) -> float:
    """Seconds to wait after failed attempt number ``attempt`` (1 for the first)."""
    top = min(cap, base * (1 << min(max(attempt - 1, 0), 16)))
    return _rng.uniform(top / 2, top)


def attempt_timeout(total: float) -> float:
    """How long one attempt of a call with a ``total`` deadline waits for its answer
    when a lost answer may be asked again (a publish with a message id): a third of
    the whole, from 1 s up to ``ATTEMPT_CAP``. A request taken by a leader that then
    died (kill -9) is never answered: sent again within 2 s, it meets the election
    (no responders until a new leader is chosen, which takes seconds) and is sent
    once more as soon as that leader is announced, rather than only when a long
    deadline's third ran out."""
    return min(total, max(1.0, min(total / 3, ATTEMPT_CAP)))


class Backoff:
    """The pauses between the attempts of one call that ends at ``deadline`` (loop
    time; none: no end), each ``retry_delay`` of the attempts failed so far, cut to
    what is left. ``floor``: seconds left under which no attempt is worth making."""

    def __init__(
        self,
        deadline: float | None,
        *,
        base: float = RETRY_BASE,
        cap: float = RETRY_CAP,
        floor: float = 0.05,
    ) -> None:
        self._loop = asyncio.get_running_loop()
        self.deadline = math.inf if deadline is None else deadline
        self.base, self.cap, self.floor = base, cap, floor
        #: attempts failed so far (the pause grows with them)
        self.failed = 0

    @classmethod
    def within(cls, timeout: float, **kw: float) -> Backoff:
        """A ``Backoff`` for a call of ``timeout`` seconds from now."""
        return cls(asyncio.get_running_loop().time() + timeout, **kw)

    def left(self) -> float:
        """Seconds to the deadline (maybe negative)."""
        return self.deadline - self._loop.time()

    def next_pause(self, share: float = 1.0) -> float | None:
        """An attempt failed: the pause before the next one (at most ``share`` of what
        is left), or None when less than ``floor`` is left."""
        left = self.left()
        if left < self.floor:
            return None
        self.failed += 1
        return min(retry_delay(self.failed, self.base, self.cap), left * share)

    async def pause(self) -> bool:
        """An attempt failed: sleep the pause before the next one; False (at once)
        when the deadline has come."""
        delay = self.next_pause()
        if delay is None:
            return False
        await asyncio.sleep(delay)
        return True

    def restart(self, base: float = RETRY_BASE, cap: float = RETRY_CAP) -> None:
        """Start the pauses again from the shortest (a new leader was announced: what
        fails now fails for a moment only)."""
        self.failed = 0
        self.base, self.cap = base, cap
