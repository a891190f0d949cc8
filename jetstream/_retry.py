"""Backoff for calls that end at a deadline rather than after a count of tries.

A publish answered by no responders (nothing was stored: a leader election, a
restart, a stream not yet made), a pull refused while a consumer has no leader,
an ordered consumer being made again: each waits ``retry_delay(n)`` before try
``n + 1``. The delays start near 50 ms and double up to about 1 s, with jitter so
that many clients retrying at once do not hit the new leader in step.
"""

from __future__ import annotations

import random

__all__ = ["ATTEMPT_CAP", "RETRY_BASE", "RETRY_CAP", "attempt_timeout", "retry_delay"]

RETRY_BASE = 0.05
RETRY_CAP = 1.0
ATTEMPT_CAP = 2.0


def retry_delay(attempt: int, base: float = RETRY_BASE, cap: float = RETRY_CAP) -> float:
    """Seconds to wait after failed attempt number ``attempt`` (1 for the first)."""
    top = min(cap, base * (1 << min(max(attempt - 1, 0), 16)))
    return random.uniform(top / 2, top)


def attempt_timeout(total: float) -> float:
    """How long one attempt of a call with a ``total`` deadline waits for its answer
    when a lost answer may be asked again (a publish with a message id): a third of
    the whole, from 1 s up to ``ATTEMPT_CAP``. A request taken by a leader that then
    died (kill -9) is never answered: sent again within 2 s, it meets the election
    (no responders until a new leader is chosen, which takes seconds) and is sent
    once more as soon as that leader is announced, rather than only when a long
    deadline's third ran out."""
    return min(total, max(1.0, min(total / 3, ATTEMPT_CAP)))
