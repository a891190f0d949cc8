"""The nemesis checker against made-up histories: it finds what it must find.

Each test writes a small whole history with ``Fake`` (a clock of its own, so that the
intervals of the operations are chosen), breaks one thing, and checks that the checker
names that anomaly and nothing else; the linearizability search and the schedule are
tested on their own too.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from tests.nemesis.checker import Result, check
from tests.nemesis.history import History
from tests.nemesis.linear import LinOp, search
from tests.nemesis.report import report
from tests.nemesis.schedule import KINDS, make_schedule

READERS = ("pull", "push", "ordered", "ordered-push")


class Fake:
    """A whole, clean history to which a test adds operations and events."""

    def __init__(self, path: Path) -> None:
        self.now = 0.0
        self.h = History(path, clock=lambda: self.now)
        self.h.meta(seed=3, seconds=60.0, quiet=5.0, schedule=[], clients=[], keys=["k"])
        self.stored: list[list[Any]] = []
        self.kv: list[list[Any]] = []
        self.watch_revs: list[tuple[int, str | None]] = []

    def at(self, t: float) -> Fake:
        self.now = t
        return self

    def op(
        self, p: str, f: str, value: Any, t0: float, t1: float | None, kind: str, result: Any = None
    ) -> None:
        self.now = t0
        op = self.h.invoke(p, f, value, timeout=5.0)
        if t1 is not None:
            self.now = t1
            self.h.complete(op, p, f, kind, result, error=None if kind == "ok" else "Error: x")

    def publish(self, mid: str, seq: int | None, *, stored: bool = True, kind: str = "ok") -> None:
        self.op("pub-0", "publish", mid, self.now, self.now + 0.01, kind, {"seq": seq})
        if stored:
            self.stored.append([seq, mid])
        self.now += 0.1

    def finish(
        self, *, readers: tuple[str, ...] = READERS, leaks: dict[str, Any] | None = None
    ) -> None:
        """The rest of a whole history: every reader in ``readers`` got every message."""
        self.now += 1.0
        h = self.h
        for p in readers:
            for seq, mid in self.stored:
                h.event(p, "recv", seq=seq, id=mid, n=1)
        for rev, value in self.watch_revs:
            kvop = "PUT" if value is not None else "DEL"
            h.event("watch", "watch", key="k", rev=rev, value=value, kvop=kvop)
        h.event("monitor", "loop", lag=0.01, block=0.002)
        h.event("run", "healed", ok=True)
        h.event("run", "finished", ok=True, unfinished=[])
        h.event("run", "drained", ok=True)
        last = max((s for s, _ in self.stored), default=0)
        h.event("final", "stream-info", last_seq=last, messages=len(self.stored))
        h.event("final", "stream", msgs=self.stored)
        h.event("final", "kv-info", last_seq=max((r for r, _ in self.watch_revs), default=0))
        h.event("final", "kv", key="k", revs=self.kv)
        h.event("final", "done")
        base = {"subs": [], "requests": 0, "async_pending": 0, "rss_base": 40, "rss_end": 41}
        h.event("run", "leaks", **{**base, "tasks": [], **(leaks or {})})
        h.end()
        h.close()


def _check(fake: Fake, **finish: Any) -> Result:
    fake.finish(**finish)
    r = check(fake.h.path)
    assert report(r)  # the report of any result can be made
    return r


def test_a_clean_history_passes(tmp_path: Path) -> None:
    f = Fake(tmp_path / "h")
    for i in range(1, 4):
        f.publish(f"p-{i}", i)
    r = _check(f)
    assert r.ok, report(r)
    assert r.ops[("publish", "ok")] == 3


def test_lost_duplicate_and_phantom_publishes(tmp_path: Path) -> None:
    f = Fake(tmp_path / "h")
    f.publish("p-1", 1)
    f.publish("p-2", 2, stored=False)  # acknowledged, not there: between found ones
    f.publish("p-3", 3)
    f.publish("p-4", 4, kind="info")  # unknown, stored twice
    f.stored.append([5, "p-4"])
    f.stored.append([6, "ghost"])  # never published
    f.publish("p-5", 9, stored=False)  # after every found one
    r = _check(f, readers=())
    kinds = r.kinds()
    assert kinds["lost"] == 2 and kinds["duplicate"] == 1 and kinds["phantom"] == 1
    assert r.figures["lost"] == {"middle": 1, "postfix": 1}
    assert kinds["missed"] == 4  # the readers delivered nothing


def test_an_ordered_reader_with_a_gap(tmp_path: Path) -> None:
    f = Fake(tmp_path / "h")
    for i in range(1, 4):
        f.publish(f"p-{i}", i)
    f.h.event("ordered", "recv", seq=1, id="p-1", n=1)
    f.h.event("ordered", "recv", seq=3, id="p-3", n=1)
    r = _check(f, readers=("pull", "push", "ordered-push"))
    assert r.kinds() == {"order": 1, "missed": 1}, report(r)
    assert any("a gap (2..2)" in a.what for a in r.anomalies)


def _kv(f: Fake, writes: list[tuple[str, Any, float, float | None, str, Any]]) -> None:
    for f_, value, t0, t1, kind, result in writes:
        f.op("kv-0", f_, {"key": "k", **value}, t0, t1, kind, result)


def test_a_stale_read_is_not_linearizable(tmp_path: Path) -> None:
    f = Fake(tmp_path / "h")
    _kv(
        f,
        [
            ("create", {"value": "a"}, 1.0, 1.1, "ok", {"rev": 1}),
            ("update", {"value": "b", "last": 1}, 2.0, 2.1, "ok", {"rev": 2}),
            ("get", {}, 3.0, 3.1, "ok", {"rev": 1, "value": "a"}),  # b was there already
        ],
    )
    f.kv = [[2, "PUT", "b"]]
    f.watch_revs = [(1, "a"), (2, "b")]
    r = _check(f)
    assert [a.kind for a in r.anomalies] == ["linearizability"], report(r)
    assert any(">>>" in line for line in r.anomalies[0].lines)


def test_a_read_concurrent_with_a_write_may_see_either(tmp_path: Path) -> None:
    f = Fake(tmp_path / "h")
    _kv(
        f,
        [
            ("create", {"value": "a"}, 1.0, 1.1, "ok", {"rev": 1}),
            ("update", {"value": "b", "last": 1}, 2.0, 2.5, "ok", {"rev": 2}),
            ("get", {}, 2.1, 2.2, "ok", {"rev": 2, "value": "b"}),
            ("get", {}, 2.3, 2.4, "ok", {"rev": 2, "value": "b"}),
            ("create", {"value": "c"}, 2.6, 2.7, "fail", None),  # b is there
        ],
    )
    f.kv = [[2, "PUT", "b"]]
    f.watch_revs = [(1, "a"), (2, "b")]
    r = _check(f)
    assert r.ok, report(r)


def test_a_create_refused_while_the_key_holds_no_value(tmp_path: Path) -> None:
    f = Fake(tmp_path / "h")
    _kv(
        f,
        [
            ("create", {"value": "a"}, 1.0, 1.1, "ok", {"rev": 1}),
            ("delete", {}, 2.0, 2.1, "ok", {"rev": 2}),
            ("create", {"value": "b"}, 3.0, 3.5, "fail", None),  # nothing there: wrong
        ],
    )
    f.kv = [[2, "DEL", None]]
    f.watch_revs = [(1, "a"), (2, None)]
    r = _check(f)
    assert [a.kind for a in r.anomalies] == ["linearizability"], report(r)


def test_an_unknown_write_is_resolved_by_the_watch(tmp_path: Path) -> None:
    f = Fake(tmp_path / "h")
    _kv(
        f,
        [
            ("create", {"value": "a"}, 1.0, 1.1, "ok", {"rev": 1}),
            ("update", {"value": "b", "last": 1}, 2.0, 7.0, "info", None),  # it happened
            ("update", {"value": "c", "last": 1}, 8.0, 8.1, "fail", None),  # so this fails
            ("update", {"value": "d", "last": 2}, 9.0, 14.0, "info", None),  # this did not
            ("get", {}, 15.0, 15.1, "ok", {"rev": 2, "value": "b"}),
        ],
    )
    f.kv = [[2, "PUT", "b"]]
    f.watch_revs = [(1, "a"), (2, "b")]
    r = _check(f)
    assert r.ok, report(r)
    assert r.figures["kv"]["k"]["resolved"] == 2


def test_the_client_figures(tmp_path: Path) -> None:
    f = Fake(tmp_path / "h")
    f.op("req-0", "request", "r-0", 1.0, 8.5, "info")  # a 5 s deadline, 2.5 s past it
    f.h.event("monitor", "loop", lag=0.5, block=0.3)
    r = _check(f, leaks={"tasks": ["t: x()"], "rss_end": 90})
    assert r.kinds() == {"deadline": 1, "loop": 1, "leak": 1, "memory": 1}, report(r)
    assert r.figures["overrun"] == 2.5


def test_a_history_cut_off_cannot_be_checked(tmp_path: Path) -> None:
    f = Fake(tmp_path / "h")
    f.publish("p-1", 1)
    f.h.close()
    with (tmp_path / "h").open("a") as out:
        out.write('{"type":"event","t":3.0,"p":"pu')  # killed while writing
    r = check(tmp_path / "h")
    assert [a.kind for a in r.anomalies] == ["unchecked"]
    assert not r.ok


def test_the_search_alone() -> None:
    def step(state: int, op: tuple[str, int]) -> int | None:
        kind, v = op
        if kind == "w":
            return v
        return state if state == v else None

    # w(1) then r(1) overlapping w(2): fine; r(1) after w(2) returned: not.
    ok = [LinOp(0, 1, ("w", 1)), LinOp(2, 5, ("w", 2)), LinOp(3, 4, ("r", 1))]
    assert search(ok, 0, step).ok
    bad = [LinOp(0, 1, ("w", 1)), LinOp(2, 3, ("w", 2)), LinOp(4, 5, ("r", 1))]
    res = search(bad, 0, step)
    assert res.ok is False and res.stuck == 2
    # an unknown write may take effect late, or never
    late = [LinOp(0, None, ("w", 7)), LinOp(1, 2, ("r", 0)), LinOp(3, 4, ("r", 7))]
    assert search(late, 0, step).ok
    assert search(late[:2], 0, step).ok
    assert search(bad, 0, step, budget=2).ok is None


def test_the_schedule_is_the_seeds() -> None:
    args: dict[str, Any] = {
        "quiet": 5.0,
        "nodes": ["n1", "n2", "n3"],
        "clients": ["a", "b"],
        "groups": ["stream:S"],
    }
    one = make_schedule(11, 600, **args)
    assert one == make_schedule(11, 600, **args)
    assert one != make_schedule(12, 600, **args)
    assert one[0].at >= 5.0 + 2.0 and one[-1].at < 600
    assert all(2.0 <= b.at - a.at <= 8.0 for a, b in itertools.pairwise(one))
    for i in range(0, len(one) - 6, 7):  # every kind once in each run of seven
        assert sorted(f.kind for f in one[i : i + 7]) == sorted(KINDS)
