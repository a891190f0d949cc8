"""Where a micro-batch of the ``jetstream`` source ends: the read limits, the
``availableNow`` target, and what counts as data loss.

Offsets are ``{"seq": n}``: the next stream sequence to read. Two keys may follow:
``"from"``, where the batch that ends at this offset starts reading when that is not
the previous batch's end (a gap was skipped with ``fail_on_data_loss=false``), and
``"lost"``, the sequences skipped so far by the query (kept in the checkpoint's offset
log, and shown in the query progress). Planning is a pure function of the start offset,
the stream's state and the options (``plan``), so it is tested without Spark or a
server; the stream reader only feeds it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..api import DeliverPolicy
from ..errors import TimeoutError as NatsTimeoutError
from ._common import SparkConfigError, SparkDataLossError, number_option

__all__ = [
    "Limits",
    "bytes_end",
    "stored_size",
    "Offset",
    "Plan",
    "bool_option",
    "duration_option",
    "lost_range",
    "plan",
    "removed",
    "span",
]

if TYPE_CHECKING:
    from jetstream.stream import Stream

log = logging.getLogger("jetstream.spark")

Offset = dict[str, int]

# Kafka's maxTriggerDelay default
_DEFAULT_DELAY = 15 * 60.0
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "": 1.0}
_DURATION = re.compile(r"\s*(\d+(?:\.\d*)?)\s*(ms|s|min|m|h|)\s*")


def bool_option(o: Mapping[str, str], key: str, default: bool) -> bool:
    """A ``true``/``false`` option (any case)."""
    raw = o.get(key)
    if raw is None or raw == "":
        return default
    text = str(raw).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise SparkConfigError(f"option {key}={raw!r} is not a boolean: say true or false")


def duration_option(o: Mapping[str, str], key: str, default: float) -> float:
    """A positive duration in seconds: ``30``, ``30s``, ``500ms``, ``15m``, ``1h``."""
    raw = o.get(key)
    if raw is None or raw == "":
        return default
    m = _DURATION.fullmatch(str(raw))
    value = float(m.group(1)) * _UNITS[m.group(2)] if m else 0.0
    if value <= 0:
        raise SparkConfigError(
            f"option {key}={raw!r} is not a positive duration (seconds, or a number "
            "with ms, s, m or h)"
        )
    return value


@dataclass(frozen=True)
class Limits:
    """The source's read limits (all optional) and its answer to lost messages."""

    max_rows: int | None = None
    max_bytes: int | None = None
    min_rows: int | None = None
    max_trigger_delay: float = _DEFAULT_DELAY
    fail_on_data_loss: bool = True

    @classmethod
    def parse(cls, o: Mapping[str, str]) -> Limits:
        return cls(
            number_option(o, "max_rows_per_batch", 1),
            number_option(o, "max_bytes_per_batch", 1),
            number_option(o, "min_rows_per_batch", 1),
            duration_option(o, "max_trigger_delay", _DEFAULT_DELAY),
            bool_option(o, "fail_on_data_loss", True),
        )


@dataclass(frozen=True)
class Plan:
    """What ``latestOffset`` decided: where the batch reads from and up to (``first``
    and ``end``, end exclusive, capped by the row limit, the target and the stream),
    the sequences skipped before it (``lost``, the query's running total) and whether
    the batch must wait for more rows (``wait``: then the end offset is the start)."""

    first: int
    end: int
    lost: int
    wait: bool = False

    def offset(self, start: Mapping[str, Any]) -> Offset:
        """The end offset to hand to Spark."""
        if self.wait or (self.end <= start["seq"] and self.first == start["seq"]):
            return dict(start)
        out: Offset = {"seq": self.end}
        if self.first != start["seq"]:
            out["from"] = self.first
        if self.lost:
            out["lost"] = self.lost
        return out


def lost_range(stream: str, what: str, fail: bool) -> None:
    """Report sequences that the query will never read (``what`` says which and why):
    raise ``SparkDataLossError`` when ``fail``, else log one warning."""
    text = f"stream {stream!r}: {what}"
    if fail:
        raise SparkDataLossError(
            f"{text}; the query stops rather than skip rows silently (set option "
            "fail_on_data_loss=false to skip them with a warning)"
        )
    log.warning("%s; skipped (fail_on_data_loss=false)", text)


def span(first: int, last: int) -> str:
    """``sequence 5`` or ``sequences 5-9``."""
    return f"sequence {first}" if first == last else f"sequences {first}-{last}"


def removed(first: int, last: int) -> str:
    """What ``lost_range`` says of sequences that the stream no longer holds."""
    return f"{span(first, last)} were removed (limits or a purge) before this query read them"


def plan(
    stream: str,
    start: Mapping[str, Any],
    first_seq: int,
    last_seq: int,
    limits: Limits,
    *,
    read_all: bool = False,
    target: int | None = None,
    waited: float = 0.0,
) -> Plan:
    """Plan the batch that starts at ``start`` on a stream whose state is
    ``first_seq`` / ``last_seq``.

    ``read_all`` (Spark's ``ReadAllAvailable``) ignores the row limits; ``target`` is
    the ``availableNow`` end, fixed when the query started, and turns
    ``min_rows_per_batch`` off; ``waited`` is how long since the last batch (for
    ``min_rows_per_batch`` and ``max_trigger_delay``). A gap below the stream's first
    sequence, or a stream whose sequences went back (deleted and made again), is data
    loss (``lost_range``). Row counts are counts of sequences.
    """
    seq = int(start["seq"])
    lost = int(start.get("lost", 0))
    latest = last_seq + 1
    first = seq
    fail = limits.fail_on_data_loss
    if latest < seq:
        # behind where this query has read up to: the stream was made again
        lost_range(
            stream,
            f"its last sequence is {last_seq}, below {seq - 1} where this query had read "
            "up to: the stream was deleted and made again, and what it held after "
            f"sequence {seq - 1} was lost; reading goes on from its first sequence",
            fail,
        )
        first = max(first_seq, 1)
    elif first_seq > seq:
        # removed by the stream's limits, or a purge
        lost_range(
            stream,
            removed(seq, first_seq - 1),
            fail,
        )
        lost += first_seq - seq
        first = first_seq
    end = latest if target is None else min(latest, max(target, first))
    if not read_all:
        if limits.max_rows:
            end = min(end, first + limits.max_rows)
        if (
            target is None
            and first == seq
            and limits.min_rows
            and end - first < limits.min_rows
            and waited < limits.max_trigger_delay
        ):
            return Plan(first, first, lost, wait=True)
    return Plan(first, max(end, first), lost)


_EMPTY_HEADERS = len(b"NATS/1.0\r\n\r\n")


def stored_size(subject: str, raw_headers: bytes | None, headers: Any) -> int:
    """What one message of a headers-only read counts toward ``max_bytes_per_batch``:
    its payload (the server's ``Nats-Msg-Size``), subject and own headers."""
    size = int(headers.get("Nats-Msg-Size") or 0) if raw_headers else 0
    own = len(raw_headers or b"") - len(f"Nats-Msg-Size: {size}\r\n")
    return size + len(subject) + (own if own > _EMPTY_HEADERS else 0)


async def bytes_end(
    stream: Stream, subjects: Sequence[str], first: int, end: int, budget: int
) -> int:
    """Where a batch from ``first`` (at most up to ``end``) ends so that its messages
    hold at most ``budget`` bytes (``stored_size``); at least one message, as a larger
    one could never be read otherwise. The messages' sizes come from a headers-only
    ordered read, so their payloads do not travel."""
    oc = await stream.ordered_consumer(
        filter_subjects=list(subjects),
        deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
        opt_start_seq=first,
        headers_only=True,
        inactive_threshold=30.0,
    )
    total = 0
    try:
        while True:
            msgs = await oc.fetch(min(end - first, 1000), expires=5.0)
            if not msgs:
                if not (await oc.info()).num_pending:
                    return end  # nothing more at all: the rest is deleted or filtered out
                # the consumer has messages to deliver and none came: no answer, which
                # is not "nothing there" (the planning is done again, see _source)
                raise NatsTimeoutError(
                    f"no size of sequences {first}-{end - 1} came within 5s, though the "
                    "stream holds some"
                )
            for m in msgs:
                meta = m.metadata
                seq = meta.sequence.stream
                if seq >= end:
                    return end
                total += stored_size(m.subject, m.raw_headers, m.headers)
                if total > budget and seq > first:
                    return seq
                if total >= budget or meta.num_pending == 0:
                    return min(seq + 1, end)
            first = seq + 1
            if first >= end:
                return end
    finally:
        await oc.delete()
