"""``counter add|get``: the distributed counters of a stream made with ``--allow-counter``.

Totals have no size limit; in ``--json`` they are strings (``"value":"42"``), as the
server stores them, so that no JSON reader rounds a large one.
"""

from __future__ import annotations

from typing import Any

from ..counter import CounterEntry
from ._session import Session
from ._util import bounded

__all__ = ["cmd_counter_add", "cmd_counter_get"]


def _entry_doc(stream: str, e: CounterEntry) -> dict[str, Any]:
    doc: dict[str, Any] = {"stream": stream, "subject": e.subject, "value": str(e.value)}
    if e.increment is not None:
        doc["increment"] = str(e.increment)
    if e.sources:
        doc["sources"] = {s: {k: str(v) for k, v in d.items()} for s, d in e.sources.items()}
    return doc


async def cmd_counter_add(s: Session) -> int:
    a = s.args
    counter = await s.js.counter(a.stream)
    total = await counter.add(a.subject, a.value, msg_id=a.msg_id, timeout=s.timeout)
    if s.out.json:
        s.out.json_doc({"stream": a.stream, "subject": a.subject, "value": str(total)})
    else:
        s.out.line(f"{a.stream} > {a.subject} = {total}")
    return 0


def _literal(subject: str) -> bool:
    return "*" not in subject.split(".") and ">" not in subject.split(".")


async def cmd_counter_get(s: Session) -> int:
    a, out = s.args, s.out
    counter = await s.js.counter(a.stream)
    subjects: list[str] = a.subjects or [">"]
    if len(subjects) == 1 and _literal(subjects[0]):
        entry = await counter.get_entry(subjects[0])
        if out.json:
            out.json_doc(_entry_doc(a.stream, entry))
        elif a.raw:
            out.line(str(entry.value))
        else:
            out.line(f"{a.stream} > {entry.subject} = {entry.value}")
            for source, totals in entry.sources.items():
                for subject, value in totals.items():
                    out.line(f"  from {source} > {subject} = {value}")
        return 0
    entries = await bounded(
        _all(counter.entries(*subjects, timeout=s.timeout)),
        s.timeout * 3,
        f"counters of {a.stream} matching {' '.join(subjects)}",
    )
    if out.json:
        out.json_doc([_entry_doc(a.stream, e) for e in entries])
    elif a.raw:
        for e in entries:
            out.line(f"{e.subject} {e.value}")
    elif not entries:
        out.info(f"No counters in {a.stream} match {' '.join(subjects)}")
    else:
        rows = [(e.subject, str(e.value)) for e in entries]
        out.table(
            f"Counters of {a.stream} ({len(entries)})", ("Subject", "Value"), rows, right=(1,)
        )
    return 0


async def _all(entries: Any) -> list[CounterEntry]:
    return [e async for e in entries]
