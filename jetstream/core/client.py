"""The core NATS client: connect, publish, subscribe, request, flush, drain, reconnect.

It knows nothing of JetStream: ``jetstream.client.Client``, the class ``connect()``
hands out, adds ``jetstream()`` on top of it.

A ``Client`` outlives its sockets. It owns the write buffer (publishes made
while disconnected wait there, bounded), the sid table of subscriptions (all
re-made after a reconnect, before the buffer is flushed) and the one muxed
inbox that every ``request`` shares.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from types import TracebackType
from typing import Self

from ..errors import (
    ConnectionClosedError,
    DisconnectedError,
    NatsError,
    NoRespondersError,
)
from ..errors import TimeoutError as NatsTimeoutError
from ..protocol.commands import PING, encode_pub, encode_sub, encode_unsub
from ..protocol.headers import HeadersLike, encode_headers
from ..protocol.ops import Info
from ..protocol.subjects import (
    next_nuid,
    validate_queue,
    validate_subscribe_subject,
)
from ._base import _SIZE_LINES, FLUSH_THRESHOLD, _size_line, _State
from ._contract import _not_bytes
from ._events import ConnectionEvent, EventKind, EventStream, Statistics
from ._mux import RequestMux, Waiter, gather_replies
from ._numbered import NumberedWrites
from .message import Msg
from .subscription import MsgHandler, Subscription

__all__ = ["Client"]


class Client(NumberedWrites):
    """A connection to a NATS system. Make one with ``await jetstream.connect(...)``."""

    # -- properties ---------------------------------------------------------

    @property
    def stats(self) -> Statistics:
        """Messages and bytes in and out, reconnects, and the messages of pulls nobody
        waited for any more (see ``Statistics``), since the client was made."""
        return self._statistics()

    @property
    def server_info(self) -> Info | None:
        """The INFO of the server we are (or were last) connected to."""
        return self._info

    @property
    def connected_url(self) -> str | None:
        """The server we are connected to, without credentials."""
        return str(self._current) if self._current is not None and self._conn else None

    @property
    def servers(self) -> list[str]:
        """The server pool (discovered servers included), without credentials."""
        return self._pool.urls()

    @property
    def max_payload(self) -> int:
        return self._max_payload

    @property
    def last_error(self) -> BaseException | None:
        return self._last_error

    def __repr__(self) -> str:
        return f"<jetstream.Client {self._state.value} {self.connected_url or ''}>".replace(
            " >", ">"
        )

    async def force_reconnect(self) -> None:
        """Drop the current socket and reconnect (to the next server of the pool)."""
        self.check_open()
        conn = self._conn
        if conn is not None:
            conn.fail(NatsError("reconnect forced"))

    def set_servers(self, urls: Sequence[str]) -> None:
        """Replace the server pool (reconnects use the new list)."""
        self._pool.replace(urls)

    # -- writing --------------------------------------------------------------------

    async def publish(
        self,
        subject: str,
        data: bytes | bytearray | memoryview = b"",
        *,
        reply: str | None = None,
        headers: HeadersLike | None = None,
    ) -> None:
        """Publish ``data`` on ``subject``; the bytes go out at the end of this loop iteration.

        Waits when the socket cannot take more (backpressure), and gives the loop one
        turn each time a full write buffer (512 KiB) goes out, so that a long burst
        does not keep every other task of the loop waiting. The message is buffered
        before the wait: a publish cancelled while it waits is still sent.

        Raises:
            BadSubjectError: the subject or reply subject is invalid (nothing is sent).
            BadHeaderError: a header cannot be encoded (nothing is sent).
            MaxPayloadError: headers + data exceed the server's max_payload (nothing is sent).
            ReconnectBufferFullError: disconnected and the reconnect buffer is full.
            ConnectionClosedError: the client is closed.
        """
        if reply is None and not headers:
            # The fast path, inline: the cached head ``PUB <subject> <size>\r\n`` of a
            # subject validated before (none are cached while tracing: see _pub_prefix).
            # _fast_limit is -1 while disconnected or closed.
            heads = self._pub_heads.get(subject)
            if heads is not None:
                size = len(data)
                if size <= self._fast_limit:
                    head = heads.get(size)
                    if head is None:
                        head = self._pub_head(heads, subject, size)
                    wbuf = self._wbuf
                    wbuf += head
                    try:
                        wbuf += data
                    except TypeError:
                        raise _not_bytes(wbuf, len(wbuf) - len(head), data) from None
                    wbuf += b"\r\n"
                    self._pub_sizes.append(size)  # counted when the buffer goes out
                    if len(wbuf) >= FLUSH_THRESHOLD:
                        self.flush_now()
                        conn = self._conn
                        if conn is not None and conn.write_paused:
                            await self.wait_writable()
                        else:
                            await self._give_a_turn()
                    elif not self._flush_scheduled:
                        self._flush_scheduled = True
                        self._loop.call_soon(self._flush_cb)
                    return
        if self._tracing is not None:
            return await self._tracing.publish(self, subject, data, reply, headers)
        self._publish_nowait(subject, data, reply, encode_headers(headers) if headers else None)
        conn = self._conn
        if conn is not None and conn.write_paused:
            await self.wait_writable()
        elif not self._wbuf:  # a full buffer was just written
            await self._give_a_turn()

    async def _give_a_turn(self) -> None:
        """Let the loop run once: a burst of publishes that the socket takes as fast as
        they come would otherwise keep it (every ``FLUSH_THRESHOLD`` written) until the
        burst ends, with the replies, heartbeats and PINGs of every connection left
        unread meanwhile. A subscriber in the same process then reads in step with
        the publisher instead of after the burst, with less of the burst buffered."""
        await asyncio.sleep(0)

    def _publish_nowait(
        self,
        subject: str,
        data: bytes | bytearray | memoryview,
        reply: str | None,
        hdr: bytes | None,
    ) -> None:
        """Validate and buffer one message (``hdr`` is an encoded header block or None)."""
        if self._closed:
            raise ConnectionClosedError(f"cannot publish to {subject!r}: the connection is closed")
        wbuf = self._wbuf
        pre = self._pub_prefixes.get(subject)
        if pre is None:
            pre = self._pub_prefix(subject)
        if reply is not None and reply not in self._pub_prefixes:
            self._pub_prefix(reply)
        size = len(data) if hdr is None else len(data) + len(hdr)
        self._check_room(subject, size, wbuf)
        mark = len(wbuf)
        try:
            if reply is None and hdr is None:
                # The fast path: the cached, validated "PUB <subject> " and a cached size line.
                line = _SIZE_LINES.get(size)
                if line is None:
                    line = _size_line(size)
                wbuf += pre
                wbuf += line
                wbuf += data
                wbuf += b"\r\n"
            else:
                encode_pub(wbuf, subject, data, reply, hdr)
        except TypeError:
            raise _not_bytes(wbuf, mark, data) from None
        self._written(1, size)

    def _pub_head(self, heads: dict[int, bytes], subject: str, size: int) -> bytes:
        """``PUB <subject> <size>\\r\\n`` of a subject validated before (its prefix is
        cached with its heads: ``_pub_prefix`` makes and empties both); kept in ``heads``
        (the subject's) for the first 64 sizes seen."""
        pre = self._pub_prefixes[subject]
        line = _SIZE_LINES.get(size)
        if line is None:
            line = _size_line(size)
        head = pre + line
        if len(heads) < 64:
            heads[size] = head
        return head

    async def flush(self, timeout: float = 10.0) -> None:
        """Send what is buffered and wait for the server's PONG (a full round trip).

        Raises:
            TimeoutError: no PONG within ``timeout`` seconds (also waiting for a reconnect).
            DisconnectedError: the connection was lost before the PONG came.
        """
        self.check_open()
        try:
            async with asyncio.timeout(timeout):
                if self._conn is None:
                    await self._connected_ev.wait()
                conn = self._conn
                if conn is None:
                    raise DisconnectedError("disconnected while flushing")
                w = self._loop.create_future()
                conn.pongs.append(w)
                self.flush_now()
                conn.write(PING)
                await w
        except TimeoutError as exc:
            if isinstance(exc, NatsError):
                raise
            raise NatsTimeoutError(f"flush: no PONG within {timeout}s") from None

    async def rtt(self, timeout: float = 10.0) -> float:
        """The round-trip time to the server, in seconds."""
        t0 = self._loop.time()
        await self.flush(timeout)
        return self._loop.time() - t0

    # -- subscribing ---------------------------------------------------------------

    async def subscribe(
        self,
        subject: str,
        queue: str | None = None,
        *,
        cb: MsgHandler | None = None,
        max_msgs: int | None = None,
        pending_msgs_limit: int | None = None,
        pending_bytes_limit: int | None = None,
    ) -> Subscription:
        """Subscribe to ``subject`` (wildcards allowed), optionally in a queue group.

        Returns a ``Subscription``: iterate it, or pass ``cb`` to have a callback run
        for each message in order. With ``max_msgs`` the server unsubscribes after that
        many messages. Past ``pending_msgs_limit`` / ``pending_bytes_limit`` queued
        messages (default 512k / 64 MiB), new ones are dropped: ``SlowConsumerError``.

        Raises:
            BadSubjectError: the subject or queue name is invalid (nothing is sent).
        """
        self.check_open()
        validate_subscribe_subject(subject)
        if queue is not None:
            validate_queue(queue)
        if max_msgs is not None and max_msgs <= 0:
            raise ValueError("max_msgs must be positive")
        sid = self.new_sid()
        msgs_limit = pending_msgs_limit or self._opts.pending_msgs_limit
        bytes_limit = pending_bytes_limit or self._opts.pending_bytes_limit
        tracing = self._tracing
        # traced: not the client's own inboxes nor the system's ($JS, $SYS...) subjects
        if tracing is not None and not subject.startswith(("$", self._opts.inbox_prefix)):
            sub = tracing.subscription(
                self, sid, subject, queue, cb, max_msgs, msgs_limit, bytes_limit
            )
        else:
            sub = Subscription(self, sid, subject, queue, cb, max_msgs, msgs_limit, bytes_limit)
        self._subs[sid] = sub
        encode_sub(self._wbuf, subject, sid, queue)
        if max_msgs is not None:
            encode_unsub(self._wbuf, sid, max_msgs)
        self._schedule_flush()
        return sub

    # -- request / reply -------------------------------------------------------------

    def new_inbox(self) -> str:
        """A fresh, unique inbox subject under this client's inbox prefix."""
        return f"{self._opts.inbox_prefix}.{next_nuid()}"

    def _request_mux(self) -> RequestMux:
        mux = self._mux
        if mux is None:
            sid = self.new_sid()
            mux = RequestMux(self, f"{self._opts.inbox_prefix}.{next_nuid()}.", sid)
            self._subs[sid] = mux
            self.send_sub(mux.subject, sid, None)
            self._mux = mux
        return mux

    async def request(
        self,
        subject: str,
        data: bytes | bytearray | memoryview = b"",
        *,
        timeout: float = 1.0,
        headers: HeadersLike | None = None,
    ) -> Msg:
        """Publish a request and wait for the first reply.

        Raises:
            NoRespondersError: nobody subscribes to ``subject`` (at once, not after the timeout).
            TimeoutError: no reply within ``timeout`` seconds.
            DisconnectedError: the connection was lost while waiting.
        """
        hdr = encode_headers(headers) if headers else None
        return await self.request_raw(subject, data, timeout, hdr, None)

    async def request_raw(
        self,
        subject: str,
        data: bytes | bytearray | memoryview,
        timeout: float,
        hdr: bytes | None,
        pre: bytes | None,
    ) -> Msg:
        """``request`` with an encoded header block; ``pre`` as in ``write_publish``."""
        self.check_open()
        mux = self._mux or self._request_mux()
        n = next(mux.tokens)
        token = str(n)
        loop = self._loop
        fut: asyncio.Future[Msg] = loop.create_future()
        deadline = loop.time() + timeout
        mux.waiters[token] = (fut, deadline, subject, timeout)
        if deadline < mux.due:
            mux.arm(deadline)  # else the mux's sweep is due first and will re-arm for it
        try:
            # A lone request is written now rather than at the end of this loop
            # iteration (no flush callback, so no extra loop iteration); concurrent ones
            # share one write at the end of the iteration. The reply subject is ours:
            # not validated, not cached.
            now = len(mux.waiters) == 1
            self.write_publish(subject, data, b"%b%d" % (mux.prefix_b, n), hdr, now, pre)
            conn = self._conn
            if conn is not None and conn.write_paused:
                await self.wait_writable()
            msg = await fut
        except BaseException:
            if fut.done() and not fut.cancelled():
                fut.exception()  # failed while we were cancelled: retrieved, not logged
            raise
        finally:
            mux.waiters.pop(token, None)
        if msg.status == 503:
            raise NoRespondersError(f"no responders on {subject!r}")
        return msg

    def request_nowait(self, subject: str, body: str, timeout: float, waiter: Waiter) -> str:
        """Write a request of the text ``body`` to ``subject`` (a subject the server
        gave us: not validated), its reply to complete ``waiter`` (``set_result`` with
        the reply, ``set_exception`` with ``TimeoutError`` after ``timeout`` seconds or
        with the error of a lost connection), and return its reply subject. A reply
        takes the request off the client's; a caller that gives up on it first (a
        timeout, a cancel) drops it with ``forget_requests``. No coroutine: a confirmed
        ack's request costs its waiter, its entry and its formatted write.

        Raises:
            ConnectionClosedError: the client is closed (nothing is written).
        """
        if self._state is _State.CLOSED:
            raise ConnectionClosedError("the connection is closed")
        mux = self._mux or self._request_mux()
        loop = self._loop
        token = str(next(mux.tokens))
        inbox = mux.prefix + token
        deadline = loop.time() + timeout
        waiters = mux.waiters
        waiters[token] = (waiter, deadline, subject, timeout)
        if deadline < mux.due:
            mux.arm(deadline)
        size = len(body)
        self._wbuf += f"PUB {subject} {inbox} {size}\r\n{body}\r\n".encode()
        # a lone request is written now (see request_raw): a threshold of 0 flushes
        self._written(1, size, 0 if len(waiters) == 1 else FLUSH_THRESHOLD)
        return inbox

    def request_each(
        self, subjects: Sequence[str], data: bytes, waiter: Waiter, timeout: float
    ) -> list[str]:
        """Write one request to each of ``subjects`` (subjects the server gave us: not
        validated), every reply going to ``waiter``, in one write; returns their reply
        subjects, dropped with ``forget_requests`` when done."""
        self.check_open()
        mux = self._mux or self._request_mux()
        inboxes = mux.add_each(subjects, waiter, timeout)
        size = len(data)
        for subject, reply in zip(subjects, inboxes, strict=True):
            message = b"PUB %b %b %d\r\n%b\r\n" % (subject.encode(), reply.encode(), size, data)
            self.write_formatted(subject, message, size)
        self.flush_now()
        return inboxes

    def forget_requests(self, inboxes: Sequence[str]) -> None:
        if self._mux is not None:
            self._mux.forget(inboxes)

    async def request_many(
        self,
        subject: str,
        data: bytes | bytearray | memoryview = b"",
        *,
        timeout: float = 1.0,
        max_msgs: int | None = None,
        stall: float | None = None,
        headers: HeadersLike | None = None,
    ) -> list[Msg]:
        """Publish a request and gather replies until ``max_msgs`` came, no reply came for
        ``stall`` seconds, or ``timeout`` passed. Returns what was gathered (maybe nothing).

        Raises:
            NoRespondersError: nobody subscribes to ``subject``.
        """
        return await gather_replies(self, subject, data, timeout, max_msgs, stall, headers)

    # -- errors, events, callbacks -------------------------------------------------------

    def events(self) -> EventStream:
        """An async iterator of ``ConnectionEvent``s, from now until the client closes.

        Use it as ``async with nc.events() as events: async for ev in events: ...`` or
        iterate it directly and call ``close()`` when done.
        """
        stream = EventStream(self)
        self._event_streams.append(stream)
        if self._state is _State.CLOSED:
            stream._push(ConnectionEvent(EventKind.CLOSED))
        return stream

    # -- drain and close -------------------------------------------------------------

    async def drain(self, timeout: float = 30.0) -> None:
        """Unsubscribe everything, let handlers finish what they already got, flush, close."""
        if self._state is _State.CLOSED:
            return
        deadline = self._loop.time() + timeout
        subs = [s for s in self._subs.values() if isinstance(s, Subscription)]
        for s in subs:
            self.send_unsub(s.sid, None)
        try:
            if self._conn is not None:
                await self.flush(timeout=max(deadline - self._loop.time(), 0.001))
        except NatsError:
            pass
        for s in subs:
            self.remove_delivery(s.sid)
            s._finish(None)
        for s in subs:
            await s._wait_handled(max(deadline - self._loop.time(), 0.001))
        mux = self._mux
        while mux is not None and mux.waiters and self._loop.time() < deadline:
            await asyncio.sleep(0.01)
        self._state = _State.DRAINING
        try:
            if self._conn is not None:
                await self.flush(timeout=max(deadline - self._loop.time(), 0.001))
        except NatsError:
            pass
        await self.close()

    async def close(self) -> None:
        """Close the connection: buffered publishes are written, every waiter fails with
        ``ConnectionClosedError``, subscriptions end, and no task is left behind."""
        await self._shutdown(None)

    async def wait_closed(self) -> None:
        """Wait until the client is closed (by close(), drain() or giving up reconnecting)."""
        await self._closed_ev.wait()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()
