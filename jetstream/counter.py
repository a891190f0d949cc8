"""Distributed counters (ADR-49): a stream with ``allow_msg_counter`` keeps a running
total on each of its subjects.

A publish to such a stream carries a ``Nats-Incr`` header (``+5``, ``-3``: any integer,
of any size) and no payload; the server loads the subject's last value, adds, and stores
``{"val":"<total>"}`` as the new message, keeping the header for audits. The ``PubAck``
carries the new total as ``val``. Totals are strings on the wire, so they have no limit:
here they are Python ``int`` s.

A counter stream that sources other counter streams adds up their totals: for each
message that comes over a source, the server replaces ``Nats-Incr`` with the change of
that source's total since the last one seen, and keeps each source's last total in the
``Nats-Counter-Sources`` header (``{"<stream>":{"<subject>":"<total>"}}``), which
``CounterEntry.sources`` reads. So the aggregate's total is its own increments plus every
source's total, whatever was lost or repeated on the way.

``c = await js.counter("HITS")``; ``await c.add("hits.home", 1)``; ``await c.get(...)``;
``await c.get_many("hits.>")`` (one batched direct get a page on a stream with
``allow_direct``, which the ADR asks of counter streams).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Protocol

import msgspec

from .errors import (
    BadSubjectError,
    CounterDisabledError,
    CounterError,
    CounterNotFoundError,
    MessageNotFoundError,
)
from .protocol.subjects import subject_matches, validate_subject

if TYPE_CHECKING:
    from ._lastmsgs import LastMsgs
    from .api import PubAck
    from .protocol.headers import HeadersLike
    from .stream import Stream, StreamMsg

__all__ = ["NATS_COUNTER_SOURCES", "NATS_INCR", "Counter", "CounterEntry", "CounterManager"]

NATS_INCR = "Nats-Incr"
NATS_COUNTER_SOURCES = "Nats-Counter-Sources"


class _Value(msgspec.Struct):
    val: str


_VALUE = msgspec.json.Decoder(_Value)
_SOURCES = msgspec.json.Decoder(dict[str, dict[str, str]])


class CounterEntry(msgspec.Struct, frozen=True, kw_only=True):
    """A counter's total as stored: ``value``; ``increment``, the ``Nats-Incr`` of the
    message that made it (for a sourced one, the change of its source's total);
    ``sources``, for a stream that sources counters, each source stream's last total per
    subject (``{"EU": {"hits": 10}}``); ``seq`` and ``time`` of the message."""

    subject: str
    value: int
    increment: int | None = None
    sources: dict[str, dict[str, int]] = msgspec.field(default_factory=dict)
    seq: int = 0
    time: _dt.datetime | None = None

    @classmethod
    def from_msg(cls, stream: str, msg: StreamMsg) -> CounterEntry:
        """Read the counter a stored message holds.

        Raises:
            CounterError: the message is not a counter value.
        """
        try:
            value = int(_VALUE.decode(msg.data).val)
        except (msgspec.DecodeError, ValueError):
            raise CounterError(
                f"stream {stream!r}, subject {msg.subject!r}, sequence {msg.seq}: not a "
                f"counter value: {bytes(msg.data[:80])!r}"
            ) from None
        h = msg.headers
        incr = h.get(NATS_INCR)
        sources: dict[str, dict[str, int]] = {}
        raw = h.get(NATS_COUNTER_SOURCES)
        if raw:
            try:
                decoded = _SOURCES.decode(raw.encode())
                sources = {s: {k: int(v) for k, v in d.items()} for s, d in decoded.items()}
            except (msgspec.DecodeError, ValueError):
                raise CounterError(
                    f"stream {stream!r}, subject {msg.subject!r}: a {NATS_COUNTER_SOURCES} "
                    f"header that is not a map of totals: {raw[:80]!r}"
                ) from None
        try:
            increment = int(incr) if incr is not None else None
        except ValueError:
            increment = None
        return cls(
            subject=msg.subject,
            value=value,
            increment=increment,
            sources=sources,
            seq=msg.seq,
            time=msg.time,
        )


class _Publisher(Protocol):
    async def publish(
        self,
        subject: str,
        data: bytes | bytearray | memoryview = b"",
        *,
        headers: HeadersLike | None = None,
        msg_id: str | None = None,
        timeout: float | None = None,
    ) -> PubAck: ...


class Counter:
    """The counters of one stream with ``allow_msg_counter`` (``await js.counter(name)``)."""

    def __init__(self, js: _Publisher, stream: Stream) -> None:
        self._js = js
        self.stream = stream

    def __repr__(self) -> str:
        return f"<Counter {self.name!r}>"

    @property
    def name(self) -> str:
        """The stream's name."""
        return self.stream.name

    async def _check_subject(self, subject: str) -> None:
        validate_subject(subject)
        for refreshed in (False, True):
            if refreshed:
                await self.stream.info()  # its subjects may have changed since
            subjects = self.stream.cached_info.config.subjects or []
            if any(subject_matches(p, subject) for p in subjects):
                return
        raise BadSubjectError(
            f"stream {self.name!r} does not store {subject!r} (its subjects: {subjects}); "
            "a counter stream that only sources others is read, not added to"
        )

    async def add(
        self,
        subject: str,
        value: int,
        *,
        msg_id: str | None = None,
        timeout: float | None = None,
    ) -> int:
        """Add ``value`` (negative to subtract, of any size) to the counter on ``subject``;
        returns the new total.

        With ``msg_id`` the increment is counted once however often it is sent (within
        the stream's duplicate window), and a repeat returns the total it made.

        Raises:
            TypeError: ``value`` is not an ``int``.
            BadSubjectError: ``subject`` is not a subject of this stream (nothing is sent).
            CounterRefusedError: the server refused the increment.
        """
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"a counter adds an int, not {type(value).__name__} {value!r}")
        await self._check_subject(subject)
        ack = await self._js.publish(
            subject, b"", headers={NATS_INCR: f"{value:+d}"}, msg_id=msg_id, timeout=timeout
        )
        if ack.val:
            return int(ack.val)
        # A duplicate of a msg_id: the server answers without the total; read the one
        # that increment made (or, when it is gone, the current one).
        try:
            msg = await self.stream.get_msg(ack.seq)
        except MessageNotFoundError:
            return await self.get(subject)
        return CounterEntry.from_msg(self.name, msg).value

    async def get_entry(self, subject: str) -> CounterEntry:
        """The counter on ``subject`` with its last increment and its sources' totals
        (within the context's timeout).

        Raises:
            CounterNotFoundError: the subject has no value (never added to, or purged).
        """
        try:
            msg = await self.stream.get_msg(last_by_subject=subject)
        except MessageNotFoundError:
            raise CounterNotFoundError(
                f"stream {self.name!r} holds no counter on {subject!r}"
            ) from None
        return CounterEntry.from_msg(self.name, msg)

    async def get(self, subject: str) -> int:
        """The total of the counter on ``subject`` (within the context's timeout).

        Raises:
            CounterNotFoundError: the subject has no value (never added to, or purged).
        """
        return (await self.get_entry(subject)).value

    def entries(self, *subjects: str, timeout: float | None = None) -> AsyncIterator[CounterEntry]:
        """Every counter on a subject matching one of ``subjects`` (filters, ``*`` and
        ``>`` allowed; default all), page by page, as one snapshot of the stream."""
        from ._lastmsgs import LastMsgs  # (the first listing: not every JetStream needs it)

        return _Entries(self.name, LastMsgs(self.stream, subjects or (">",), timeout))

    async def get_many(self, *subjects: str, timeout: float | None = None) -> dict[str, int]:
        """The totals of the counters on subjects matching ``subjects`` (filters; default
        all), by subject, in stream order."""
        return {e.subject: e.value async for e in self.entries(*subjects, timeout=timeout)}


class _Entries(AsyncIterator[CounterEntry]):
    def __init__(self, stream: str, reader: LastMsgs) -> None:
        self._stream = stream
        self._reader = reader
        self._buf: list[StreamMsg] = []

    def __aiter__(self) -> _Entries:
        return self

    async def __anext__(self) -> CounterEntry:
        if not self._buf:
            self._buf = (await self._reader.page())[::-1]
            if not self._buf:
                raise StopAsyncIteration
        return CounterEntry.from_msg(self._stream, self._buf.pop())


class CounterManager:
    """Mixed into ``JetStream``: ``counter(stream)``."""

    if TYPE_CHECKING:

        async def stream(self, name: str, *, timeout: float | None = None) -> Stream: ...

    async def counter(self, stream: str, *, timeout: float | None = None) -> Counter:
        """The counters of ``stream``, a stream made with ``allow_msg_counter=True`` (and,
        for ``get_many``'s batched reads, ``allow_direct=True``).

        Raises:
            StreamNotFoundError: there is no such stream.
            CounterDisabledError: the stream does not allow counters (nothing else is sent).
        """
        s = await self.stream(stream, timeout=timeout)
        if not s.cached_info.config.allow_msg_counter:
            raise CounterDisabledError(
                400,
                10168,
                f"stream {stream!r} is not a counter stream (it was not made with "
                "allow_msg_counter=True, which only a new stream can have)",
                stream=stream,
            )
        return Counter(self, s)  # type: ignore[arg-type]  # JetStream publishes
