"""A linearizability search (Wing and Gong's, with Lowe's memo), for small histories.

``search(ops, init, step)`` says whether the operations ``ops`` (each an interval of
real time and an outcome) can be put in one order that respects real time (an
operation that returned before another was called comes first) and in which each one,
applied by ``step`` to the state its predecessors left, gives what it returned. An
operation whose outcome is unknown (``end`` is None) may take effect at any point after
its call, or never.

The search runs along the calls and returns in time order. At a call it tries to take
the operation as the next in the order (``step`` accepts it from the current state),
and starts again from the first entry left; at the return of an operation it has not
taken, it undoes the last choice and tries the next entry. Each (set of operations
taken, state) is tried once: the memo. ``budget`` bounds the steps; a search that runs
out says neither yes nor no.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

__all__ = ["LinOp", "Outcome", "search"]

S = TypeVar("S", bound=Hashable)


@dataclass
class LinOp:
    """An operation for the search: its interval and whatever ``step`` needs."""

    start: float
    #: None: it never completed (it may take effect at any later point, or never)
    end: float | None
    data: Any = None


@dataclass
class Outcome(Generic[S]):
    """The search's answer. ``ok`` is None when it ran out of ``budget``."""

    ok: bool | None
    #: the state after the order found (``ok``), else None
    state: S | None = None
    #: the order found (``ok``), as indexes into ``ops``
    order: list[int] = field(default_factory=list)
    #: when not ``ok``: the operation whose return the longest attempt could not pass
    stuck: int | None = None
    #: how many operations that attempt had put in order
    depth: int = 0
    steps: int = 0


def search(
    ops: Sequence[LinOp],
    init: S,
    step: Callable[[S, Any], S | None],
    *,
    budget: int = 2_000_000,
) -> Outcome[S]:
    """Whether ``ops`` is linearizable from ``init`` under ``step`` (see the module)."""
    events: list[tuple[float, int, int]] = []  # (time, 0 call / 1 return, op)
    for i, op in enumerate(ops):
        events.append((op.start, 0, i))
        if op.end is not None:
            events.append((max(op.end, op.start), 1, i))
    events.sort()
    m = len(events)
    head = m
    nxt = [*range(1, m), -1, 0 if m else -1]  # node k -> next; the head is node m
    prv = [head, *range(m - 1), -1]
    op_of = [e[2] for e in events]
    is_call = [e[1] == 0 for e in events]
    ret_of = [-1] * len(ops)
    for k, (_, kind, i) in enumerate(events):
        if kind == 1:
            ret_of[i] = k

    def unlink(k: int) -> None:
        nxt[prv[k]] = nxt[k]
        if nxt[k] != -1:
            prv[nxt[k]] = prv[k]

    def relink(k: int) -> None:
        nxt[prv[k]] = k
        if nxt[k] != -1:
            prv[nxt[k]] = k

    state: S = init
    taken = 0  # bit i: ops[i] is in the order
    stack: list[tuple[int, S]] = []  # (call node, state before)
    memo: set[tuple[int, S]] = set()
    best = Outcome[S](False)
    steps = 0
    e = nxt[head]
    while e != -1:
        steps += 1
        if steps > budget:
            return Outcome(None, steps=steps, stuck=best.stuck, depth=best.depth)
        if is_call[e]:
            i = op_of[e]
            new = step(state, ops[i].data)
            if new is not None:
                key = (taken | (1 << i), new)
                if key not in memo:
                    memo.add(key)
                    stack.append((e, state))
                    state, taken = new, taken | (1 << i)
                    unlink(e)
                    if ret_of[i] != -1:
                        unlink(ret_of[i])
                    e = nxt[head]
                    continue
            e = nxt[e]
            continue
        # the return of an operation not in the order yet: undo the last choice
        if len(stack) >= best.depth:
            best = Outcome(False, stuck=op_of[e], depth=len(stack))
        if not stack:
            best.steps = steps
            return best
        call, state = stack.pop()
        i = op_of[call]
        taken &= ~(1 << i)
        if ret_of[i] != -1:
            relink(ret_of[i])
        relink(call)
        e = nxt[call]
    return Outcome(True, state=state, order=[op_of[c] for c, _ in stack], steps=steps)
