"""The nemesis run's checker: reads a history (``history.py``), says what is wrong.

It reads nothing but the history file. What it checks:

* the run: the history is whole (its ``end`` line), the cluster healed, the processes
  finished, the readers drained and the read-back completed; a run that cannot be
  checked is a failure, not a pass;
* the stream: every acknowledged publish is in the stream exactly once (by its id) at
  the sequence its ack gave; an unknown one at most once; nothing is there that was
  never published. Lost acknowledged publishes are classified as Jepsen does:
  ``prefix`` (before every one that was found, in the order their acks came),
  ``postfix`` (after every one), ``middle``;
* the readers: the durable pull and push consumers delivered every stored message
  (at least once; redeliveries counted), the ordered pull and push consumers delivered
  the stream in order with no gap and no duplicate; every delivery is the stored
  message of its sequence; nothing raised into a reader;
* the KeyValue bucket (``kvcheck.py``): each key linearizable as a register with
  compare-and-set, and the watch in order, complete at the end, true to the writes;
* request/reply: every reply is the echo of its own request, from a request served;
* the client: no call outlived its deadline by more than ``Bounds.overrun``, the loop
  never blocked for more than ``Bounds.block``, memory grew less than ``Bounds.rss_mb``
  from the warm-up to the end, and nothing leaked (tasks, subscriptions beyond each
  client's own, pending requests, publish_async acks).

``check(path)`` returns a ``Result``: operations by kind and outcome, faults, figures,
and each anomaly with the history lines that show it.
"""

from __future__ import annotations

import dataclasses
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.nemesis.history import Line, Op, pair_ops, read_history
from tests.nemesis.kvcheck import check_kv

__all__ = ["Anomaly", "Bounds", "Result", "bounds_from", "check"]

PUBLISH = ("publish", "publish_async")
KV_OPS = ("get", "create", "update", "delete")
DURABLE = ("pull", "push")
ORDERED = ("ordered", "ordered-push")
#: anomalies shown in full per kind; the rest are counted
SHOW = 5


@dataclass(frozen=True)
class Bounds:
    """The client's figures' bounds: the issue's by default."""

    #: seconds a call may outlive its deadline
    overrun: float = 1.0
    #: seconds the event loop may be blocked at once
    block: float = 0.1
    #: MB the RSS may grow from the warm-up to the end
    rss_mb: float = 20.0


@dataclass
class Anomaly:
    kind: str
    what: str
    lines: list[str] = field(default_factory=list)


@dataclass
class Result:
    """What the checker found in one history."""

    seed: int | None = None
    seconds: float = 0.0
    #: the bucket answered direct gets (``--direct-gets``)
    direct_gets: bool = False
    #: (operation, outcome) -> count
    ops: Counter[tuple[str, str]] = field(default_factory=Counter)
    #: fault kind -> (applied, failed to apply)
    faults: dict[str, list[int]] = field(default_factory=dict)
    anomalies: list[Anomaly] = field(default_factory=list)
    #: figures: seconds, MB, counts (see ``report.py``)
    figures: dict[str, Any] = field(default_factory=dict)
    bounds: Bounds = field(default_factory=Bounds)

    @property
    def ok(self) -> bool:
        return not self.anomalies

    def add(self, kind: str, what: str, lines: list[str] | None = None) -> None:
        self.anomalies.append(Anomaly(kind, what, lines or []))

    def kinds(self) -> Counter[str]:
        return Counter(a.kind for a in self.anomalies)


class _H:
    """A history, read once and indexed."""

    def __init__(self, path: str | Path) -> None:
        self.lines = list(read_history(path))
        self.meta = next((ln for ln in self.lines if ln.get("type") == "meta"), None)
        self.ended = bool(self.lines) and self.lines[-1].get("type") == "end"
        self.ops = pair_ops(self.lines)
        self.events: dict[tuple[str, str], list[Line]] = defaultdict(list)
        self.by_f: dict[str, list[Line]] = defaultdict(list)
        for line in self.lines:
            if line.get("type") == "event":
                self.events[(line["p"], line["f"])].append(line)
                self.by_f[line["f"]].append(line)

    def one(self, p: str, f: str) -> Line | None:
        found = self.events.get((p, f))
        return found[-1] if found else None


def check(path: str | Path, bounds: Bounds | None = None) -> Result:
    """Check the history at ``path`` (see the module docstring)."""
    h = _H(path)
    r = Result(bounds=bounds or Bounds())
    if h.meta is not None:
        r.seed, r.seconds = h.meta.get("seed"), float(h.meta.get("seconds", 0))
        r.direct_gets = bool(h.meta.get("direct_gets"))
    for op in h.ops:
        if op.p != "nemesis":
            r.ops[(op.f, op.type)] += 1
        else:
            r.faults.setdefault(op.f, [0, 0])[0 if op.type == "ok" else 1] += 1
    if not _whole(h, r):
        return r
    stored = _stream(h, r)
    _readers(h, r, stored)
    _kv(h, r)
    _requests(h, r)
    _client(h, r)
    return r


def _whole(h: _H, r: Result) -> bool:
    """The run can be checked: False (with the anomaly) when it cannot."""
    if h.meta is None:
        r.add("unchecked", "the history has no meta line")
        return False
    if not h.ended:
        last = h.lines[-1].show() if h.lines else "(empty)"
        r.add("unchecked", "the history was cut off (no end line)", [last])
        return False
    for f, what in (("healed", "the cluster never healed"), ("finished", "processes hung")):
        line = h.one("run", f)
        if line is None or not line.get("ok"):
            r.add("unchecked", what, [line.show()] if line else [])
    if h.one("final", "done") is None:
        failed = h.one("final", "failed")
        r.add("unchecked", "no read-back of the stream", [failed.show()] if failed else [])
    return not r.anomalies


def _stream(h: _H, r: Result) -> dict[int, str]:
    """The publish checks; the stored messages by sequence."""
    info = h.one("final", "stream-info")
    assert info is not None
    stored: dict[int, str] = {}
    where: dict[str, list[int]] = defaultdict(list)
    for line in h.events[("final", "stream")]:
        for seq, mid in line["msgs"]:
            stored[seq] = mid
            where[mid].append(seq)
    r.figures["stored"] = len(stored)
    if len(stored) != info["messages"] or (stored and max(stored) != info["last_seq"]):
        r.add("unchecked", f"read back {len(stored)} messages of {info['messages']}", [info.show()])
    pubs = [op for op in h.ops if op.f in PUBLISH]
    attempted = {op.value: op for op in pubs}
    for mid, seqs in where.items():
        op = attempted.get(mid)
        if op is None:
            r.add("phantom", f"{mid!r} is in the stream (seq {seqs}) and was never published")
        elif len(seqs) > 1:
            r.add("duplicate", f"{mid!r} is in the stream {len(seqs)} times: {seqs}", _show(op))
    acked = sorted((op for op in pubs if op.type == "ok"), key=lambda o: o.end or 0.0)
    found = [bool(where.get(op.value)) for op in acked]
    first = found.index(True) if True in found else len(found)
    last = len(found) - 1 - found[::-1].index(True) if True in found else -1
    lost: Counter[str] = Counter()
    for i, op in enumerate(acked):
        seqs = where.get(op.value)
        if not seqs:
            where_lost = "prefix" if i < first else "postfix" if i > last else "middle"
            lost[where_lost] += 1
            r.add(
                "lost", f"acknowledged {op.value!r} is not in the stream ({where_lost})", _show(op)
            )
        elif op.result["seq"] != seqs[0]:
            r.add(
                "ack",
                f"{op.value!r} acked at seq {op.result['seq']}, stored at {seqs[0]}",
                _show(op),
            )
    for op in pubs:
        if op.type == "fail" and where.get(op.value):
            r.add("failed-stored", f"failed {op.value!r} is in the stream", _show(op))
    unknown = [op for op in pubs if op.type == "info"]
    r.figures["acked"] = len(acked)
    r.figures["lost"] = dict(lost)
    r.figures["unknown stored"] = sum(1 for op in unknown if where.get(op.value))
    r.figures["unknown"] = len(unknown)
    return stored


def _readers(h: _H, r: Result, stored: dict[int, str]) -> None:
    last = max(stored, default=0)
    drained = h.one("run", "drained")
    for p in (*DURABLE, *ORDERED):
        recv = h.events.get((p, "recv"), [])
        for line in h.events.get((p, "raised"), []):
            r.add("raised", f"{p}: an error reached the application's iteration", [line.show()])
        wrong = [ln for ln in recv if stored.get(ln["seq"]) != ln["id"]]
        for line in wrong[:SHOW]:
            r.add("delivery", f"{p}: delivered {line['id']!r} as seq {line['seq']}", [line.show()])
        seqs = [int(ln["seq"]) for ln in recv]
        got = set(seqs)
        missing = sorted(set(stored) - got)
        r.figures[f"{p} deliveries"] = len(seqs)
        r.figures[f"{p} redelivered"] = len(seqs) - len(got)
        if missing:
            r.add(
                "missed",
                f"{p}: {len(missing)} stored message(s) never delivered, first seqs {missing[:10]}",
                [drained.show()] if drained else [],
            )
        if p in ORDERED:
            expect = 1
            for line in recv:
                seq = int(line["seq"])
                if seq != expect:
                    what = "a duplicate" if seq < expect else f"a gap ({expect}..{seq - 1})"
                    r.add("order", f"{p}: seq {seq} where {expect} was next: {what}", [line.show()])
                    break
                expect += 1
            if expect - 1 != last and not missing:
                r.add("order", f"{p}: ended at seq {expect - 1} of {last}")


def _kv(h: _H, r: Result) -> None:
    assert h.meta is not None
    ops = [op for op in h.ops if op.f in KV_OPS]
    final = {ln["key"]: ln["revs"] for ln in h.events[("final", "kv")]}
    info = h.one("final", "kv-info")
    last_rev = int(info["last_seq"]) if info is not None else 0
    end = h.lines[-1]["t"]
    rep = check_kv(ops, h.events[("watch", "watch")], final, h.meta["keys"], end, last_rev)
    for kind, what, lines in rep.anomalies:
        r.add(kind, what, lines)
    r.figures["kv"] = rep.stats
    r.figures["watch entries"] = len(h.events[("watch", "watch")])
    for line in h.events.get(("watch", "raised"), []):
        r.add("raised", "watch: an error reached the application's iteration", [line.show()])


def _requests(h: _H, r: Result) -> None:
    served = {ln["value"] for ln in h.by_f["serve"]}
    for op in h.ops:
        if op.f != "request" or op.type != "ok":
            continue
        if op.result["reply"] != op.value:
            r.add("reply", f"{op.value!r} answered with {op.result['reply']!r}", _show(op))
        elif op.value not in served:
            r.add("reply", f"{op.value!r} answered, never served", _show(op))


def _client(h: _H, r: Result) -> None:
    b = r.bounds
    end = h.lines[-1]["t"]
    worst: tuple[float, Op | None] = (0.0, None)
    for op in h.ops:
        timeout = op.invoke.get("timeout")
        if timeout is None:
            continue
        took = (op.end if op.end is not None else end) - op.start
        over = took - float(timeout)
        if over > worst[0]:
            worst = (over, op)
        if over > b.overrun:
            state = "took" if op.end is not None else "never returned in"
            r.add(
                "deadline",
                f"{op.p} {op.f} {state} {took:.3f} s, deadline {timeout} s",
                _show(op),
            )
    r.figures["overrun"] = round(worst[0], 3)
    loops = h.events[("monitor", "loop")]
    lag = max(loops, key=lambda ln: ln["lag"], default=None)
    block = max(loops, key=lambda ln: ln["block"], default=None)
    r.figures["loop lag"] = lag["lag"] if lag else 0.0
    r.figures["loop block"] = block["block"] if block else 0.0
    over = [ln for ln in loops if ln["block"] > b.block]
    if over:
        assert block is not None
        r.add(
            "loop",
            f"the event loop blocked more than {b.block * 1000:g} ms in {len(over)} second(s)"
            f" of the run, {block['block'] * 1000:.0f} ms at the most",
            [ln.show() for ln in sorted(over, key=lambda ln: -ln["block"])[:SHOW]],
        )
    leaks = h.one("run", "leaks")
    if leaks is None:
        r.add("unchecked", "no leak check")
        return
    growth = leaks["rss_end"] - leaks["rss_base"]
    r.figures["rss"] = (leaks["rss_base"], leaks["rss_end"])
    if growth > b.rss_mb:
        r.add("memory", f"RSS grew {growth:.1f} MB (bound {b.rss_mb:g})", [leaks.show()])
    for what in ("tasks", "subs"):
        if leaks[what]:
            r.add("leak", f"{what} left: {leaks[what]}", [leaks.show()])
    for what in ("requests", "async_pending"):
        if leaks[what]:
            r.add("leak", f"{leaks[what]} {what} pending at the end", [leaks.show()])


def _show(op: Op) -> list[str]:
    return op.show().splitlines()


def bounds_from(**kw: float | None) -> Bounds:
    """``Bounds`` with the given fields (None: the default)."""
    return dataclasses.replace(Bounds(), **{k: v for k, v in kw.items() if v is not None})
