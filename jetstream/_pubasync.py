"""Pipelined JetStream publishing: a bounded window of outstanding acks on one inbox.

Every ``publish_async`` is a PUB with a reply subject ``<inbox>.<token>`` on one
shared subscription; the ack resolves the future found by token. Timeouts are
checked by one periodic sweep, not a timer per message. Every future resolves on
every path: ack, API error, timeout, lost connection, close.

A future's ``timeout`` is its deadline. No responders (nothing was stored) is sent
again with backoff until then, under the same token, so an ack of any attempt
resolves it; at once when the new leader of the stream that stores the subject is
announced, and not at all when no stream stores it (``SubjectStreams``: the future
fails with ``NoStreamError``). A message with an id (``keyed``) is also sent again
when an attempt goes unanswered or the connection is lost: the stream deduplicates
the id.

A bulk writer (the Spark sink) may instead register an ``AckTracker`` and a row of
its own per publish (``try_publish_rows``, many rows a call): no future per message;
the tracker hears of each ack or failure, on the same paths.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import msgspec

from ._leaders import NO_STREAM, SubjectStreams, no_stream_error
from ._retry import attempt_timeout, retry_delay
from .api import PubAck, decode_response
from .errors import (
    ConnectionClosedError,
    DuplicateMessageConflictError,
    JetStreamError,
    NatsError,
    NoRespondersError,
    PublishWindowFullError,
)
from .errors import TimeoutError as NatsTimeoutError
from .protocol.headers import HeadersLike, encode_headers
from .protocol.subjects import next_nuid

if TYPE_CHECKING:
    from .core.client import Client
    from .protocol.ops import Msg as MsgOp

__all__ = ["AckTracker", "AsyncPublisher"]

_PUBACK = msgspec.json.Decoder(PubAck)


class AckTracker(Protocol):
    """Told of the outcome of each publish made with ``try_publish_rows`` (from the
    read path: the methods must not raise)."""

    def acked(self, ack: PubAck) -> None: ...

    def failed(self, row: Any, exc: BaseException) -> None: ...


# (tracker, deadline, subject, row), or for a future
# (future, attempt deadline, subject, None, data, header block, deadline, keyed)
_Entry = tuple[Any, ...]


def _fail(entry: _Entry, exc: BaseException) -> None:
    target, _, _, row = entry[:4]
    if row is None:
        if not target.done():
            target.set_exception(exc)
    else:
        target.failed(row, exc)


class AsyncPublisher:
    """The ack mux and window behind ``JetStream.publish_async``."""

    def __init__(
        self, nc: Client, max_pending: int, timeout: float, streams: SubjectStreams
    ) -> None:
        if max_pending < 1:
            raise ValueError("publish_async_max_pending must be at least 1")
        self._nc = nc
        self._streams = streams
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
        #: token -> (attempts made, last cause, attempts made when the stream's new
        #: leader was last announced) of futures sent more than once
        self._tries: dict[str, tuple[int, NatsError, int]] = {}
        #: subject -> (its SubjectStreams listener, token -> the timer of its next send)
        #: of the futures waiting out a 503
        self._held: dict[str, tuple[Callable[[bool], None], dict[str, asyncio.TimerHandle]]] = {}
        self._held_subject: dict[str, str] = {}  # token -> subject, of the held
        #: futures sent again at once on their stream's leader election
        self.woken = 0
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
        self._prefix = f"{nc.inbox_prefix}.{next_nuid()}."
        self._reply_prefix = self._prefix.encode()
        self._cut = len(self._prefix)
        self.subject = self._prefix + "*"
        sid = nc.new_sid()
        nc.add_delivery(sid, self)
        nc.send_sub(self.subject, sid, None)
        nc.add_loss_hook(self._on_loss)
        nc.add_reconnect_hook(self._on_reconnect)

    def try_publish(
        self,
        subject: str,
        data: bytes | bytearray | memoryview,
        headers: HeadersLike | bytes | None,
        timeout: float | None,
        keyed: bool = False,
    ) -> asyncio.Future[PubAck] | None:
        """Publish now if the window has room (the future of its ack), else None.

        ``headers`` may be an already encoded header block (bytes), from a caller that
        built and checked it itself. ``keyed``: the message has an id, so a lost or
        unanswered attempt may be sent again.
        """
        pending = self._pending
        if len(pending) >= self.max_pending:
            return None
        if headers is None:
            hdr: bytes | None = None
        elif isinstance(headers, bytes):
            hdr = headers  # already encoded (a trusted caller)
        else:
            hdr = encode_headers(headers) if headers else None
        nc = self._nc
        if keyed or not self._prefix or self._timer is None:
            fut: asyncio.Future[PubAck] = nc.loop.create_future()
            self._send(subject, data, hdr, fut, self.timeout if timeout is None else timeout, keyed)
            return fut
        # The common case inline (see _send): subscribed, the sweep armed, no id.
        seq = self._seq + 1
        nc.publish_seq(subject, data, self._reply_prefix, seq, hdr)
        self._seq = seq
        fut = nc.loop.create_future()
        deadline = self._now + (self.timeout if timeout is None else timeout)
        pending[str(seq)] = (fut, deadline, subject, None, data, hdr, deadline, False)
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
            self._now = self._nc.loop.time()
            self._arm()
        seq = self._seq
        sent, error = self._nc.publish_numbered(rows, start, stop, self._reply_prefix, seq)
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
        keyed: bool,
    ) -> None:
        if not self._prefix:
            self._ensure_sub()
        seq = self._seq + 1
        # The reply subject is ours (an inbox and a number): no validation needed.
        self._nc.publish_seq(subject, data, self._reply_prefix, seq, hdr)
        self._seq = seq
        if self._timer is None:
            self._now = self._nc.loop.time()
            self._arm()
        # Deadlines come from the sweep's clock (updated every sweep): a timeout is
        # honoured within one sweep interval, and no clock is read per message.
        deadline = self._now + timeout
        if keyed:
            first = self._now + attempt_timeout(timeout)
            self._pending[str(seq)] = (fut, first, subject, None, data, hdr, deadline, True)
        else:
            self._pending[str(seq)] = (fut, deadline, subject, None, data, hdr, deadline, False)

    async def publish(
        self,
        subject: str,
        data: bytes | bytearray | memoryview,
        headers: HeadersLike | bytes | None,
        timeout: float | None,
        keyed: bool = False,
    ) -> asyncio.Future[PubAck]:
        """Publish, waiting first for room in the window (see ``try_publish``)."""
        while True:
            fut = self.try_publish(subject, data, headers, timeout, keyed)
            if fut is not None:
                break
            await self._wait_room(self.timeout if timeout is None else timeout)
        nc = self._nc
        if nc.write_paused:
            await nc.wait_writable()
        return fut

    # -- acks ------------------------------------------------------------------------

    def _deliver(self, op: MsgOp) -> None:
        self.received += 1
        token = op.subject[self._cut :]
        entry = self._pending.pop(token, None)
        if entry is not None:
            self._settle(token, entry, op)
        if self._room or not self._pending:
            self._resolved()

    def _deliver_many(self, ops: list[MsgOp], size: int) -> bool:
        """``_deliver`` of a whole feed of acks: a plain PubAck resolves its future or
        goes to its row's tracker inline; anything else takes the general path."""
        self.received += len(ops)
        pending = self._pending
        pop = pending.pop
        cut = self._cut
        decode = _PUBACK.decode
        tries = self._tries
        for op in ops:
            token = op.subject[cut:]
            entry = pop(token, None)
            if entry is None:
                continue
            if not op.status:
                try:
                    ack = decode(op.payload)
                except msgspec.DecodeError:
                    pass
                else:
                    if ack.error is None:  # as _settle, without the call
                        target = entry[0]
                        if entry[3] is not None:
                            target.acked(ack)
                            continue
                        if not target.done():
                            target.set_result(ack)
                        if tries:
                            tries.pop(token, None)
                        continue
            self._settle(token, entry, op)
        if self._room or not pending:
            self._resolved()
        return True

    def _settle(self, token: str, entry: _Entry, op: MsgOp) -> None:
        """Resolve ``entry`` (just taken from the window) with the reply ``op``."""
        target = entry[0]
        subject = entry[2]
        row = entry[3]
        if row is None and target.done():
            if self._tries:
                self._tries.pop(token, None)
            return
        try:
            if op.status == 503:
                cause = NoRespondersError(f"no stream answered a publish to {subject!r}")
                if row is None:
                    if self._streams.stream_of(subject) == NO_STREAM:
                        self._fail_no_stream(token, entry)
                        return
                    if self._again(token, entry, cause):
                        return
                raise cause
            try:
                ack = _PUBACK.decode(op.payload)
                if ack.error is not None:
                    raise ack.error.exception(subject)
            except (msgspec.DecodeError, JetStreamError):
                # the slow path: error replies lack fields a PubAck needs
                ack = decode_response(op.payload, PubAck, subject)
        except (NoRespondersError, JetStreamError) as exc:
            # An id still being stored by an earlier attempt (10158): asked again, the
            # stream answers with its ack.
            again = row is None and isinstance(exc, DuplicateMessageConflictError)
            if not (again and self._again(token, entry, exc)):
                self._fail_entry(token, entry, exc)
        else:
            if row is None:
                target.set_result(ack)
                if self._tries:
                    self._tries.pop(token, None)
            else:
                target.acked(ack)

    # -- sending again ----------------------------------------------------------------

    def _failed_attempt(self, token: str, cause: NatsError) -> int:
        """Record that the latest attempt of ``token`` failed; the step of its backoff
        (the attempts since its stream's new leader was last announced)."""
        n, _, since = self._tries.get(token, (1, cause, 0))
        self._tries[token] = (n, cause, since)
        return n - since

    def _again(self, token: str, entry: _Entry, cause: NatsError) -> bool:
        """Send ``entry`` (a future's, taken from the window) again after a backoff if
        its deadline allows; False if it does not (then the caller fails it)."""
        loop = self._nc.loop
        delay = retry_delay(self._failed_attempt(token, cause))
        if loop.time() + delay >= entry[6] or self._nc.is_closed:
            return False
        # Back in the window until then (an ack of the earlier attempt resolves it too).
        self._pending[token] = (entry[0], entry[6], *entry[2:])
        if isinstance(cause, NoRespondersError):  # waiting for a leader: hold it
            self._hold(entry[2], token, loop.call_later(delay, self._held_resend, token))
        else:
            loop.call_later(delay, self._resend, token)
        if self._timer is None:
            self._now = loop.time()
            self._arm()
        return True

    # -- waiting out a 503 ------------------------------------------------------------

    def _hold(self, subject: str, token: str, timer: asyncio.TimerHandle) -> None:
        held = self._held.get(subject)
        if held is None:

            def heard(elected: bool) -> None:
                self._heard(subject, elected)

            held = self._held[subject] = (heard, {})
            self._streams.listen(subject, heard)
        old = held[1].get(token)
        if old is not None:  # sent again meanwhile (a reconnect) and answered 503 again
            old.cancel()
        held[1][token] = timer
        self._held_subject[token] = subject

    def _release(self, subject: str) -> dict[str, asyncio.TimerHandle]:
        """Stop holding the futures of ``subject``; their tokens and timers."""
        heard, timers = self._held.pop(subject)
        self._streams.unlisten(subject, heard)
        for token, timer in timers.items():
            timer.cancel()
            self._held_subject.pop(token, None)
        return timers

    def _held_resend(self, token: str) -> None:
        """The backoff of a held future passed: send it again."""
        subject = self._held_subject.pop(token, None)
        if subject is not None:
            timers = self._held[subject][1]
            del timers[token]
            if not timers:
                self._release(subject)
        self._resend(token)

    def _heard(self, subject: str, elected: bool) -> None:
        """The leader of the stream that stores ``subject`` was elected (send its held
        futures now, their backoff started again), or no stream stores it (fail them)."""
        if subject not in self._held:
            return
        timers = self._release(subject)
        tries = self._tries
        for token in timers:
            entry = self._pending.get(token)
            if entry is None or entry[0].done():
                continue
            if not elected:
                del self._pending[token]
                self._fail_no_stream(token, entry)
                continue
            if token in tries:
                n, cause, _ = tries[token]
                tries[token] = (n, cause, n)
            self.woken += 1
            self._resend(token)
        if not elected:
            self._resolved()

    def _fail_no_stream(self, token: str, entry: _Entry) -> None:
        tries = self._tries.pop(token, None) if self._tries else None
        _fail(entry, no_stream_error(entry[2], 1 if tries is None else tries[0]))

    def _resend(self, token: str) -> None:
        """Send the message of ``token`` again (under the same token)."""
        entry = self._pending.get(token)
        nc = self._nc
        if entry is None or entry[0].done() or nc.is_closed:
            return
        if not nc.is_connected:
            return  # the reconnect hook sends it
        subject, data, hdr, deadline, keyed = entry[2], entry[4], entry[5], entry[6], entry[7]
        try:
            nc.write_publish(subject, data, self._reply_prefix + token.encode(), hdr)
        except NatsError as exc:
            del self._pending[token]
            self._fail_entry(token, entry, exc)
            self._resolved()
            return
        if token in self._tries:
            n, cause, since = self._tries[token]
            self._tries[token] = (n + 1, cause, since)
        now = nc.loop.time()
        first = min(now + attempt_timeout(deadline - now), deadline) if keyed else deadline
        self._pending[token] = (entry[0], first, *entry[2:])

    def _fail_entry(self, token: str, entry: _Entry, exc: BaseException) -> None:
        """Fail ``entry``; a future that was sent more than once is told how often."""
        tries = self._tries.pop(token, None) if self._tries else None
        if tries is not None and isinstance(exc, NatsError):
            exc.attempts = tries[0]
            exc.args = (f"{exc} ({tries[0]} attempts)",)
        _fail(entry, exc)

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
        self._timer = self._nc.loop.call_later(interval, self._sweep)

    def _sweep(self) -> None:
        self._timer = None
        now = self._now = self._nc.loop.time()
        expired = [k for k, entry in self._pending.items() if entry[1] <= now]
        failed = False
        for k in expired:
            entry = self._pending[k]
            if len(entry) > 4 and entry[7] and entry[6] > now and not entry[0].done():
                # a keyed attempt went unanswered: ask again (the id is deduplicated)
                cause = NatsTimeoutError(f"no ack for the publish to {entry[2]!r} in time")
                self._failed_attempt(k, cause)
                self._resend(k)
                continue
            del self._pending[k]
            failed = True
            self._fail_entry(
                k, entry, NatsTimeoutError(f"no ack for the publish to {entry[2]!r} in time")
            )
        if failed:
            self._resolved()
        if self._pending:
            self._arm()

    # -- loss and close ---------------------------------------------------------------

    def _on_loss(self, exc: BaseException) -> None:
        pending, self._pending = self._pending, {}
        now = self._nc.loop.time()
        closing = self._nc.is_closed
        for token, entry in pending.items():
            if (
                not closing
                and len(entry) > 4
                and entry[7]
                and entry[6] > now
                and not entry[0].done()
                and isinstance(exc, NatsError)
            ):
                # keyed: kept, and sent again once reconnected (until its deadline)
                self._failed_attempt(token, exc)
                self._pending[token] = (entry[0], entry[6], *entry[2:])
                continue
            self._fail_entry(token, entry, exc)
        self._resolved()
        for w in self._room:
            if not w.done():
                w.set_exception(exc)
        self._room.clear()

    def _on_reconnect(self) -> None:
        """Send again what a lost connection left unanswered (keyed messages only)."""
        for k in [k for k, entry in self._pending.items() if len(entry) > 4 and entry[7]]:
            self._resend(k)

    async def _close(self) -> None:
        """Called by the client when it closes (after the loss hooks ran)."""
        pending, self._pending = self._pending, {}
        for token, entry in pending.items():
            self._fail_entry(token, entry, ConnectionClosedError("the connection closed"))
        self._tries.clear()
        for subject in list(self._held):
            self._release(subject)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    # -- waiting ----------------------------------------------------------------------

    async def _wait_room(self, timeout: float) -> None:
        loop = self._nc.loop
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
        w: asyncio.Future[None] = self._nc.loop.create_future()
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
