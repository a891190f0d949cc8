"""The KeyValue checks of the nemesis run: each key a register with compare-and-set.

The model of one key is its last revision and its value (None: no value, never written
or deleted); a revision is the bucket stream's sequence, so it only grows:

* ``get`` returns the state: the revision and value, or the revision of a delete marker,
  or "absent" (never written: revision 0);
* ``create(v)`` succeeds, with a new revision, where the key holds no value, and fails
  (``KeyExistsError``) where it holds one;
* ``update(v, last=L)`` succeeds where the revision is ``L`` and fails elsewhere;
* ``delete`` always succeeds, with a new revision.

An operation of unknown outcome is resolved with the watch when the watch tells: a write
whose value the watch saw took effect, with the revision the watch saw, before the watch
saw it; a write (or delete) the watch would have seen and did not see never did, when
the watch saw every revision from before its call on. One the watch cannot tell about
may take effect at any point after its call, or never, and the state's revision is then
unknown (None) until a read shows it. A get of unknown outcome says nothing.

The history of a key is cut where no operation is open (its unknown ones resolved), and
each piece searched by ``linear.search`` from the state the previous piece left.

The watch: for each key its revisions in increasing order, each one once; every value
one that was written to that key, with the revision its write got; every key's last
revision (the read-back's) seen.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tests.nemesis.history import Line, Op
from tests.nemesis.linear import LinOp, search

__all__ = ["KvReport", "check_kv", "step"]

#: the search's steps per piece of a key's history before it counts as not checkable
BUDGET = 3_000_000
#: a revision not known (an unknown write took effect)
State = tuple[int | None, str | None]


@dataclass
class _K:
    """One operation as the model sees it."""

    f: str
    type: str
    value: str | None = None
    last: int | None = None
    rev: int | None = None
    deleted: bool = False
    absent: bool = False
    op: Op | None = None


def step(state: State, k: _K) -> State | None:
    """The state after ``k``, or None where ``k`` cannot happen in ``state``."""
    rev, value = state
    if k.f == "get":
        if k.absent:
            return state if rev == 0 else None
        if k.deleted:
            return (k.rev, None) if value is None and rev in (None, k.rev) else None
        return (k.rev, value) if value == k.value and rev in (None, k.rev) else None
    if k.type == "fail":
        if k.f == "create":
            return state if value is not None else None
        return state if rev is None or rev != k.last else None  # update
    if k.f == "create" and value is not None:
        return None
    if k.f == "update" and rev is not None and rev != k.last:
        return None
    if k.rev is not None and rev is not None and k.rev <= rev:
        return None
    return (k.rev, None if k.f == "delete" else k.value)


@dataclass
class KvReport:
    """What the KeyValue checks found: anomalies as (kind, what, evidence lines)."""

    anomalies: list[tuple[str, str, list[str]]] = field(default_factory=list)
    #: per key: operations searched, pieces, unknown writes resolved / left unknown
    stats: dict[str, dict[str, int]] = field(default_factory=dict)


def _model(op: Op) -> _K | None:
    v = op.value or {}
    res = op.result or {}
    if op.f == "get":
        if op.type != "ok":
            return None  # a read of unknown outcome says nothing
        return _K(
            "get",
            "ok",
            value=res.get("value"),
            rev=res.get("rev"),
            deleted=bool(res.get("deleted")),
            absent=bool(res.get("absent")),
            op=op,
        )
    return _K(op.f, op.type, value=v.get("value"), last=v.get("last"), rev=res.get("rev"), op=op)


def check_kv(
    ops: Sequence[Op],
    watch: Sequence[Line],
    final: dict[str, list[list[Any]]],
    keys: Sequence[str],
    t_end: float,
    last_rev: int,
) -> KvReport:
    """Every key's history linearizable, and the watch (see the module docstring)."""
    report = KvReport()
    by_key: dict[str, list[Op]] = defaultdict(list)
    for op in ops:
        by_key[op.value["key"]].append(op)
    seen = _Watch(watch, last_rev)
    report.anomalies += seen.check(by_key, final)
    for key in keys:
        report.stats[key] = stats = {"ops": 0, "pieces": 0, "resolved": 0, "unknown": 0}
        items: list[LinOp] = []
        for op in by_key.get(key, []):
            k = _model(op)
            if k is None:
                continue
            start, end = op.start, op.end
            if k.type == "info":
                found = seen.resolve(key, k, start)
                if found is False:
                    stats["resolved"] += 1
                    continue  # the watch says it never took effect
                if found is not None:
                    stats["resolved"] += 1
                    k.rev, end = found
                else:
                    stats["unknown"] += 1
                    end = None
            items.append(LinOp(start, end, k))
        revs = final.get(key) or []
        if revs:  # the read-back, a get after everything
            rev, kind, value = revs[-1]
            last = _K("get", "ok", value=value, rev=rev, deleted=kind != "PUT")
        else:
            last = _K("get", "ok", absent=True)
        items.append(LinOp(t_end, t_end, last))
        stats["ops"] = len(items)
        report.anomalies += _search_key(key, items, stats)
    return report


def _pieces(items: list[LinOp]) -> list[list[LinOp]]:
    """``items`` (sorted by start) cut where none is open; one never completed keeps
    everything after it in its piece."""
    items = sorted(items, key=lambda x: x.start)
    out: list[list[LinOp]] = []
    reach = float("-inf")
    for it in items:
        if not out or it.start > reach:
            out.append([])
        out[-1].append(it)
        reach = max(reach, float("inf") if it.end is None else it.end)
    return out


def _search_key(key: str, items: list[LinOp], stats: dict[str, int]) -> list[Any]:
    state: State = (0, None)
    pieces = _pieces(items)
    stats["pieces"] = len(pieces)
    for piece in pieces:
        res = search(piece, state, step, budget=BUDGET)
        if res.ok:
            assert res.state is not None
            state = res.state
            continue
        if res.ok is None:
            what = (
                f"key {key!r}: the linearizability search ran out of {BUDGET:,} steps on "
                f"{len(piece)} operations from t={piece[0].start:.3f}: not checkable"
            )
            return [("unchecked", what, _evidence(piece, res.stuck))]
        stuck = piece[res.stuck].data if res.stuck is not None else None
        where = f" at {stuck.f} {stuck.op.p}" if stuck is not None and stuck.op else ""
        what = (
            f"key {key!r}: not linearizable{where} (state before the piece {state}; "
            f"the longest order found took {res.depth} of {len(piece)} operations)"
        )
        return [("linearizability", what, _evidence(piece, res.stuck))]
    return []


def _evidence(piece: list[LinOp], stuck: int | None, around: int = 12) -> list[str]:
    """The operations of ``piece`` near the one the search could not pass."""
    at = stuck if stuck is not None else 0
    lo, hi = max(at - around, 0), min(at + around, len(piece))
    out = []
    for it in piece[lo:hi]:
        k: _K = it.data
        if k.op is None:
            out.append(f"(the read-back) {k}")
        else:
            mark = ">>> " if it is piece[at] else ""
            out += [mark + s for s in k.op.show().splitlines()]
    return out


class _Watch:
    """What the watch saw, by key and by revision."""

    def __init__(self, lines: Sequence[Line], last_rev: int) -> None:
        self.lines = list(lines)
        self.by_rev: dict[int, Line] = {}
        self.by_value: dict[tuple[str, str], Line] = {}
        self.dels: dict[str, list[Line]] = defaultdict(list)
        for line in self.lines:
            self.by_rev.setdefault(int(line["rev"]), line)
            if line.get("value") is not None:
                self.by_value.setdefault((line["key"], line["value"]), line)
            elif line.get("kvop") == "DEL":
                self.dels[line["key"]].append(line)
        #: the bucket's revisions the watch never saw
        self.gaps = sorted(set(range(1, last_rev + 1)) - set(self.by_rev))
        self._claimed: set[int] = set()
        self._ok_revs: list[tuple[float, int]] = []

    def check(self, by_key: dict[str, list[Op]], final: dict[str, list[list[Any]]]) -> list[Any]:
        out: list[Any] = []
        writes: dict[tuple[str, str], Op] = {}
        for key, ops in by_key.items():
            for op in ops:
                if op.f in ("create", "update"):
                    writes[(key, op.value["value"])] = op
                if op.type == "ok" and op.f != "get" and op.end is not None:
                    self._ok_revs.append((op.end, op.result["rev"]))
                    if op.f == "delete":
                        self._claimed.add(op.result["rev"])
        self._ok_revs.sort()
        last: dict[str, Line] = {}
        for line in self.lines:
            key = line["key"]
            prev = last.get(key)
            if prev is not None and int(line["rev"]) <= int(prev["rev"]):
                out.append(
                    (
                        "watch",
                        f"key {key!r}: revision {line['rev']} after {prev['rev']}",
                        [prev.show(), line.show()],
                    )
                )
            last[key] = line
            value = line.get("value")
            if value is None:
                continue
            op = writes.get((key, value))
            if op is None:
                out.append(("watch", f"key {key!r}: a value never written", [line.show()]))
            elif op.type == "ok" and op.result["rev"] != line["rev"]:
                out.append(
                    (
                        "watch",
                        f"key {key!r}: the write got revision {op.result['rev']}, "
                        f"the watch saw {line['rev']}",
                        [*op.show().splitlines(), line.show()],
                    )
                )
            elif op.type == "fail":
                out.append(
                    (
                        "watch",
                        f"key {key!r}: a failed write's value seen",
                        [*op.show().splitlines(), line.show()],
                    )
                )
        for key, revs in final.items():
            if revs and revs[-1][0] not in self.by_rev:
                out.append(
                    ("watch", f"key {key!r}: its last revision {revs[-1][0]} never seen", [])
                )
        return out

    def resolve(self, key: str, k: _K, start: float) -> tuple[int, float] | bool | None:
        """For an unknown write: (its revision, when the watch saw it) if it took
        effect, False if it cannot have, None when the watch cannot tell."""
        if k.f == "delete":
            for line in self.dels.get(key, []):
                rev = int(line["rev"])
                if rev not in self._claimed and float(line["t"]) >= start:
                    self._claimed.add(rev)
                    return rev, float(line["t"])
        else:
            line = self.by_value.get((key, k.value or ""))
            if line is not None:
                return int(line["rev"]), float(line["t"])
        # Committed before the call: every revision of an operation that had returned.
        i = bisect.bisect_left(self._ok_revs, (start, -1))
        floor = max((rev for _, rev in self._ok_revs[:i]), default=0)
        if not self.gaps or self.gaps[-1] <= floor:
            return False
        return None
