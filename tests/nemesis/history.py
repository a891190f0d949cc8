"""The nemesis run's history: one JSON line per event, written as it happens.

Every operation of the workload is two lines, its invocation and its completion, tied
by the operation's number ``op``:

    {"op":17,"type":"invoke","t":12.3051,"p":"pub-0","f":"publish","value":"pub-0-42","timeout":5.0}
    {"op":17,"type":"ok","t":12.3119,"p":"pub-0","f":"publish","result":{"seq":901,"dup":false}}

``type`` of a completion is ``ok``, ``fail`` (it certainly did not happen: a refused
compare-and-set, a key not there) or ``info`` (unknown: a timeout, a lost connection;
it may have happened, now or later). What is observed rather than called (a delivery
to a consumer, an entry of a watch, a request served, a fault's start and end, the
loop monitor's figures, the final read-back) is one ``"type": "event"`` line. The first
line (``"type": "meta"``) holds the seed and the schedule; the last (``"type": "end"``)
says the run finished: a history without it was cut off and cannot be checked.

Each line is flushed when written, so a run killed half-way leaves its history up to
that moment. ``t`` is seconds since the run began (monotonic clock).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

__all__ = ["History", "Line", "Op", "pair_ops", "read_history"]


class History:
    """Writes the history file, one flushed JSON line per call."""

    def __init__(self, path: str | Path, clock: Callable[[], float] = time.monotonic) -> None:
        self.path = Path(path)
        self._f: IO[str] = self.path.open("w", encoding="utf-8")
        self._clock = clock
        self._t0 = clock()
        self._ops = 0
        self.lines = 0

    def now(self) -> float:
        """Seconds since the run began."""
        return self._clock() - self._t0

    def _write(self, record: dict[str, Any]) -> None:
        self._f.write(json.dumps(record, separators=(",", ":")) + "\n")
        self._f.flush()
        self.lines += 1

    def meta(self, **fields: Any) -> None:
        self._write({"type": "meta", **fields})

    def invoke(self, p: str, f: str, value: Any = None, *, timeout: float | None = None) -> int:
        """Record an invocation; returns its operation number, for ``complete``."""
        self._ops += 1
        record: dict[str, Any] = {"op": self._ops, "type": "invoke", "t": round(self.now(), 6)}
        record.update(p=p, f=f, value=value)
        if timeout is not None:
            record["timeout"] = timeout
        self._write(record)
        return self._ops

    def complete(
        self,
        op: int,
        p: str,
        f: str,
        type_: str,
        result: Any = None,
        *,
        error: BaseException | str | None = None,
    ) -> None:
        """Record the completion of ``op``: ``type_`` is ``ok``, ``fail`` or ``info``."""
        assert type_ in ("ok", "fail", "info"), type_
        record: dict[str, Any] = {"op": op, "type": type_, "t": round(self.now(), 6), "p": p}
        record["f"] = f
        if result is not None:
            record["result"] = result
        if error is not None:
            record["error"] = error if isinstance(error, str) else describe(error)
        self._write(record)

    def event(self, p: str, f: str, **fields: Any) -> None:
        """Record something observed (a delivery, a fault, a figure)."""
        self._write({"type": "event", "t": round(self.now(), 6), "p": p, "f": f, **fields})

    def end(self, **fields: Any) -> None:
        """The last line: the run finished."""
        self._write({"type": "end", "t": round(self.now(), 6), **fields})

    def close(self) -> None:
        self._f.close()


def describe(exc: BaseException) -> str:
    """``TypeName: message``, shortened to one line of at most 300 characters."""
    text = f"{type(exc).__name__}: {exc}".replace("\n", " ")
    return text if len(text) <= 300 else text[:297] + "..."


@dataclass
class Line:
    """One line of a history, with its line number (1-based) for reports."""

    n: int
    rec: dict[str, Any]

    def __getitem__(self, key: str) -> Any:
        return self.rec[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.rec.get(key, default)

    def show(self) -> str:
        """The line as it is in the file, with its number."""
        return f"{self.n}: {json.dumps(self.rec, separators=(',', ':'))}"


@dataclass
class Op:
    """An operation: its invocation and its completion (None: it never completed)."""

    invoke: Line
    done: Line | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> int:
        return int(self.invoke["op"])

    @property
    def p(self) -> str:
        return str(self.invoke["p"])

    @property
    def f(self) -> str:
        return str(self.invoke["f"])

    @property
    def value(self) -> Any:
        return self.invoke.get("value")

    @property
    def type(self) -> str:
        """``ok``, ``fail`` or ``info`` (``info`` too when it never completed)."""
        return "info" if self.done is None else str(self.done["type"])

    @property
    def result(self) -> Any:
        return None if self.done is None else self.done.get("result")

    @property
    def start(self) -> float:
        return float(self.invoke["t"])

    @property
    def end(self) -> float | None:
        return None if self.done is None else float(self.done["t"])

    def show(self) -> str:
        return self.invoke.show() + ("" if self.done is None else "\n" + self.done.show())


def read_history(path: str | Path) -> Iterator[Line]:
    """The lines of a history file. A last line cut in the middle (a run killed while
    writing it) is left out; the missing ``end`` line tells the checker."""
    with Path(path).open(encoding="utf-8") as f:
        for n, text in enumerate(f, 1):
            try:
                rec = json.loads(text)
            except json.JSONDecodeError:
                if not text.endswith("\n"):
                    return  # the last line, cut off
                raise ValueError(f"history line {n} is not JSON: {text[:200]!r}") from None
            yield Line(n, rec)


def pair_ops(lines: list[Line]) -> list[Op]:
    """The operations of ``lines``, in the order of their invocation."""
    ops: dict[int, Op] = {}
    for line in lines:
        kind = line.get("type")
        if kind == "invoke":
            ops[int(line["op"])] = Op(line)
        elif kind in ("ok", "fail", "info"):
            op = ops.get(int(line["op"]))
            if op is None:
                raise ValueError(f"history line {line.n}: a completion without invocation")
            op.done = line
    return list(ops.values())
