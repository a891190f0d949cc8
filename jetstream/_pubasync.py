"""Pipelined JetStream publishing: a bounded window of outstanding acks on one inbox.

Every ``publish_async`` is a PUB with a reply subject ``<inbox>.<token>`` on one
shared subscription; the ack resolves the future found by token. Timeouts are
checked by one periodic sweep, not a timer per message. Every future resolves on
every path: ack, API error, timeout, lost connection, close.

A bulk writer (the Spark sink) may instead register an ``AckTracker`` and a row of
its own per publish (``try_publish_rows``, many rows a call): no future per message;
the tracker hears of each ack or failure, on the same paths.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

import msgspec

from ._api_base import decode_response
from ._api_stream import PubAck
from .errors import JetStreamError, NoRespondersError, PublishWindowFullError
from .errors import TimeoutError as NatsTimeoutError
from .protocol.headers import HeadersLike, encode_headers
from .protocol.subjects import next_nuid

if TYPE_CHECKING:
    from .client import Client
    from .protocol.ops import Msg as MsgOp

__all__ = ["AckTracker", "AsyncPublisher"]

_PUBACK = msgspec.json.Decoder(PubAck)


class AckTracker(Protocol):
    """Told of the outcome of each publish made with ``try_publish_rows`` (from the
    read path: the methods must not raise)."""

    def acked(self, ack: PubAck) -> None: ...

    def failed(self, row: Any, exc: BaseException) -> None: ...


# (future, deadline, subject, None) or (tracker, deadline, subject, row)
_Entry = tuple[Any, float, str, Any]


def _fail(entry: _Entry, exc: BaseException) -> None:
    target, _, _, row = entry
    if row is None:
        if not target.done():
            target.set_exception(exc)
    else:
        target.failed(row, exc)


class AsyncPublisher:
    """The ack mux and window behind ``JetStream.publish_async``."""

    def __init__(self, nc: Client, max_pending: int, timeout: float) -> None:
        if max_pending < 1:
            raise ValueError("publish_async_max_pending must be at least 1")
        self._nc = nc
        self.max_pending = max_pending
        self.timeout = timeout
        self._prefix = ""
        self._reply_prefix = b""
        self._cut = 0
        self._now = 0.0
        self._pending: dict[str, _Entry] = {}
        self._seq = 0
        self._room: deque[asyncio.Future[None]] = deque()
        self._idle: list[asyncio.Future[None]] = []
        self._timer: asyncio.TimerHandle | None = None
        # Delivery protocol: what the client needs to re-make the subscription.
        self.subject = ""
        self.queue: str | None = None
        self.max_msgs: int | None = None
        self.received = 0

    @property
    def pending(self) -> int:
        return len(self._pending)

    def _ensure_sub(self) -> None:
        if self._prefix:
            return
        nc = self._nc
        self._prefix = f"{nc._opts.inbox_prefix}.{next_nuid()}."
        self._reply_prefix = self._prefix.encode()
        self._cut = len(self._prefix)
        self.subject = self._prefix + "*"
        sid = nc._new_sid()
        nc._register(sid, self)
        nc._send_sub(self.subject, sid, None)
        nc._loss_hooks.append(self._on_loss)

    def try_publish(
        self,
        subject: str,
        data: bytes | bytearray | memoryview,
        headers: HeadersLike | bytes | None,
        timeout: float | None,
    ) -> asyncio.Future[PubAck] | None:
        """Publish now if the window has room (the future of its ack), else None.

        ``headers`` may be an already encoded header block (bytes), from a caller that
        built and checked it itself.
        """
        if len(self._pending) >= self.max_pending:
            return None
        if isinstance(headers, bytes):
            hdr: bytes | None = headers  # already encoded (a trusted caller)
        else:
            hdr = encode_headers(headers) if headers else None
        fut: asyncio.Future[PubAck] = self._nc._loop.create_future()
        self._send(subject, data, hdr, fut, self.timeout if timeout is None else timeout)
        return fut

    def try_publish_rows(
        self,
        rows: Sequence[tuple[str, bytes | bytearray | memoryview, bytes | None, Any]],
        start: int,
        tracker: AckTracker,
    ) -> int:
        """Publish ``rows[start:]`` (each: subject, data, encoded header block or None,
        anything), as many as the window has room for, telling ``tracker`` of each ack
        or failure (the row tuple itself is what ``tracker.failed`` gets back).
        Returns the index of the first row not sent (``len(rows)`` when all were).

        Raises what the client's publish raises (an invalid subject, a payload too
        big); the rows before the one refused are sent and tracked.
        """
        stop = min(len(rows), start + self.max_pending - len(self._pending))
        if stop <= start:
            return start
        if not self._prefix:
            self._ensure_sub()
        if self._timer is None:
            self._now = self._nc._loop.time()
            self._arm()
        seq = self._seq
        sent, error = self._nc._publish_numbered(rows, start, stop, self._reply_prefix, seq)
        self._seq = seq + sent
        deadline = self._now + self.timeout
        pending = self._pending
        for i in range(start, start + sent):
            seq += 1
            row = rows[i]
            pending[str(seq)] = (tracker, deadline, row[0], row)
        if error is not None:
            raise error
        return start + sent

    def _send(
        self,
        subject: str,
        data: bytes | bytearray | memoryview,
        hdr: bytes | None,
        fut: asyncio.Future[PubAck],
        timeout: float,
    ) -> None:
        if not self._prefix:
            self._ensure_sub()
        seq = self._seq = self._seq + 1
        # The reply subject is ours (an inbox and a number): no validation needed.
        self._nc._publish_to_reply(subject, data, b"%b%d" % (self._reply_prefix, seq), hdr)
        if self._timer is None:
            self._now = self._nc._loop.time()
            self._arm()
        # Deadlines come from the sweep's clock (updated every sweep): a timeout is
        # honoured within one sweep interval, and no clock is read per message.
        self._pending[str(seq)] = (fut, self._now + timeout, subject, None)

    async def publish(
        self,
        subject: str,
        data: bytes | bytearray | memoryview,
        headers: HeadersLike | bytes | None,
        timeout: float | None,
    ) -> asyncio.Future[PubAck]:
        """Publish, waiting first for room in the window (see ``try_publish``)."""
        while True:
            fut = self.try_publish(subject, data, headers, timeout)
            if fut is not None:
                break
            await self._wait_room(self.timeout if timeout is None else timeout)
        nc = self._nc
        conn = nc._conn
        if conn is not None and conn.write_paused:
            await nc._wait_writable()
        return fut

    # -- acks ------------------------------------------------------------------------

    def _deliver(self, op: MsgOp) -> None:
        self.received += 1
        entry = self._pending.pop(op.subject[self._cut :], None)
        if entry is not None:
            self._settle(entry, op)
        if self._room or not self._pending:
            self._resolved()

    def _deliver_many(self, ops: list[MsgOp], size: int) -> bool:
        """``_deliver`` of a whole feed of acks: a plain PubAck for a tracked row goes
        straight to its tracker; anything else takes the general path."""
        self.received += len(ops)
        pending = self._pending
        pop = pending.pop
        cut = self._cut
        decode = _PUBACK.decode
        for op in ops:
            entry = pop(op.subject[cut:], None)
            if entry is None:
                continue
            row = entry[3]
            if row is not None and not op.status:
                try:
                    ack = decode(op.payload)
                except msgspec.DecodeError:
                    pass
                else:
                    if ack.error is None:
                        entry[0].acked(ack)
                        continue
            self._settle(entry, op)
        if self._room or not pending:
            self._resolved()
        return True

    def _settle(self, entry: _Entry, op: MsgOp) -> None:
        """Resolve ``entry`` (just taken from the window) with the reply ``op``."""
        target, _, subject, row = entry
        if row is None and target.done():
            return
        try:
            if op.status == 503:
                raise NoRespondersError(f"no stream answered a publish to {subject!r}")
            try:
                ack = _PUBACK.decode(op.payload)
                if ack.error is not None:
                    raise ack.error.exception(subject)
            except (msgspec.DecodeError, JetStreamError):
                # the slow path: error replies lack fields a PubAck needs
                ack = decode_response(op.payload, PubAck, subject)
        except (NoRespondersError, JetStreamError) as exc:
            _fail(entry, exc)
        else:
            if row is None:
                target.set_result(ack)
            else:
                target.acked(ack)

    def _resolved(self) -> None:
        room = self._room
        while room and len(self._pending) < self.max_pending:
            w = room.popleft()
            if not w.done():
                w.set_result(None)
                break
        if not self._pending:
            idle, self._idle = self._idle, []
            for w in idle:
                if not w.done():
                    w.set_result(None)

    # -- timeouts ------------------------------------------------------------------

    def _arm(self) -> None:
        interval = max(0.02, min(self.timeout / 4, 0.5))
        self._timer = self._nc._loop.call_later(interval, self._sweep)

    def _sweep(self) -> None:
        self._timer = None
        now = self._now = self._nc._loop.time()
        expired = [k for k, entry in self._pending.items() if entry[1] <= now]
        for k in expired:
            entry = self._pending.pop(k)
            _fail(entry, NatsTimeoutError(f"no ack for the publish to {entry[2]!r} in time"))
        if expired:
            self._resolved()
        if self._pending:
            self._arm()

    # -- loss and close ---------------------------------------------------------------

    def _on_loss(self, exc: BaseException) -> None:
        pending, self._pending = self._pending, {}
        for entry in pending.values():
            _fail(entry, exc)
        self._resolved()
        for w in self._room:
            if not w.done():
                w.set_exception(exc)
        self._room.clear()

    async def _close(self) -> None:
        """Called by the client when it closes (after the loss hooks ran)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    # -- waiting ----------------------------------------------------------------------

    async def _wait_room(self, timeout: float) -> None:
        loop = self._nc._loop
        try:
            async with asyncio.timeout(timeout):
                while len(self._pending) >= self.max_pending:
                    w: asyncio.Future[None] = loop.create_future()
                    self._room.append(w)
                    await w
        except TimeoutError as exc:
            if isinstance(exc, NatsTimeoutError):
                raise
            raise PublishWindowFullError(
                f"publish_async: {len(self._pending)} acks outstanding "
                f"(max {self.max_pending}) for {timeout}s"
            ) from None

    async def wait_all(self, timeout: float) -> None:
        if not self._pending:
            return
        w: asyncio.Future[None] = self._nc._loop.create_future()
        self._idle.append(w)
        try:
            async with asyncio.timeout(timeout):
                await w
        except TimeoutError as exc:
            if isinstance(exc, NatsTimeoutError):
                raise
            raise NatsTimeoutError(
                f"publish_async_complete: {len(self._pending)} acks still outstanding "
                f"after {timeout}s"
            ) from None
        finally:
            if w in self._idle:
                self._idle.remove(w)
