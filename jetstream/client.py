"""The core NATS client: connect, publish, subscribe, request, flush, drain, reconnect.

A ``Client`` outlives its sockets. It owns the write buffer (publishes made
while disconnected wait there, bounded), the sid table of subscriptions (all
re-made after a reconnect, before the buffer is flushed) and the one muxed
inbox that every ``request`` shares.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import ssl
from collections.abc import Awaitable, Callable, Sequence
from enum import StrEnum
from types import TracebackType
from typing import TYPE_CHECKING, Any, NoReturn, Self

from ._connection import (
    Delivery,
    _Connection,
    classify_server_error,
    denied_subscription,
    open_connection,
)
from ._events import CallbackRunner, ConnectionEvent, EventKind, EventStream, Statistics
from ._mux import RequestMux, gather_replies
from ._servers import Server, ServerPool
from .errors import (
    AuthorizationError,
    ConnectionClosedError,
    DisconnectedError,
    MaxPayloadError,
    NatsError,
    NoRespondersError,
    NoServersError,
    PermissionsError,
    ReconnectBufferFullError,
    StaleConnectionError,
    TlsError,
)
from .errors import TimeoutError as NatsTimeoutError
from .message import Msg
from .protocol.commands import PING, encode_pub, encode_sub, encode_unsub
from .protocol.headers import HeadersLike, encode_headers
from .protocol.ops import Info
from .protocol.subjects import (
    next_nuid,
    validate_queue,
    validate_subject,
    validate_subscribe_subject,
)
from .subscription import MsgHandler, Subscription

if TYPE_CHECKING:
    from ._connect import Callback, _Options
    from .js import JetStream

__all__ = ["Client"]

log = logging.getLogger("jetstream")

FLUSH_THRESHOLD = 64 * 1024
_PAYLOAD_SLACK = 64 * 1024  # servers add headers to some deliveries (direct get, republish)
_SIZE_LINES: dict[int, bytes] = {}


def _size_line(size: int) -> bytes:
    line = b"%d\r\n" % size
    if len(_SIZE_LINES) < 8192:
        _SIZE_LINES[size] = line
    return line


class _State(StrEnum):
    CONNECTING = "connecting"
    CONNECTED = "connected"
    RECONNECTING = "reconnecting"
    DRAINING = "draining"
    CLOSED = "closed"


class Client:
    """A connection to a NATS system. Make one with ``await jetstream.connect(...)``."""

    def __init__(self, pool: ServerPool, options: _Options) -> None:
        self._loop = asyncio.get_running_loop()
        self._pool = pool
        self._opts = options
        self._state = _State.CONNECTING
        self._conn: _Connection | None = None
        self._current: Server | None = None
        self._info: Info | None = None
        self._max_payload = 1024 * 1024
        self._wbuf = bytearray()
        self._flush_scheduled = False
        self._write_waiters: list[asyncio.Future[None]] = []
        self._subs: dict[int, Delivery] = {}
        self._sids = itertools.count(1)
        self._pub_prefixes: dict[str, bytes] = {}
        self._closed = False
        self._mux: RequestMux | None = None
        self._ping_timer: asyncio.TimerHandle | None = None
        self._reconnect_task: asyncio.Task[None] | None = None
        self._runner = CallbackRunner(self._loop)
        #: called with the error when the connection is lost or closed (pending waiters fail)
        self._loss_hooks: list[Callable[[BaseException], None]] = []
        #: called after every reconnect (subscriptions are re-made by then)
        self._reconnect_hooks: list[Callable[[], None]] = []
        self._connected_ev = asyncio.Event()
        self._closed_ev = asyncio.Event()
        self._event_streams: list[EventStream] = []
        self._last_error: BaseException | None = None
        self.stats = Statistics()

    # -- properties ---------------------------------------------------------

    @property
    def is_connected(self) -> bool:
        return self._state is _State.CONNECTED and self._conn is not None

    @property
    def is_closed(self) -> bool:
        return self._state is _State.CLOSED

    @property
    def is_reconnecting(self) -> bool:
        return self._state is _State.RECONNECTING

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

    # -- connecting -----------------------------------------------------------

    async def _start(self) -> None:
        last: BaseException | None = None
        only_tls = True  # every server failed the TLS handshake: raise that, not NoServersError
        for server in list(self._pool.servers):
            server.last_attempt = self._loop.time()
            try:
                await self._connect_to(server)
            except AuthorizationError:
                await self._shutdown(None, fire=False)
                raise
            except (OSError, NatsError, TimeoutError) as exc:
                server.attempts += 1
                last = exc
                only_tls = only_tls and isinstance(exc, TlsError)
                continue
            self._emit(EventKind.CONNECTED, None)
            return
        if self._opts.retry_on_failed_connect and self._opts.allow_reconnect:
            self._state = _State.RECONNECTING
            self._reconnect_task = self._loop.create_task(self._reconnect_loop())
            return
        await self._shutdown(None, fire=False)
        if only_tls and last is not None:
            raise last
        raise NoServersError(
            f"could not connect to any server of {self._pool.urls()}: {last}"
        ) from last

    def _tls_for(self, server: Server) -> ssl.SSLContext | None:
        if self._opts.tls is not None:
            return self._opts.tls
        if server.tls:
            return ssl.create_default_context()
        return None

    async def _connect_to(self, server: Server) -> None:
        conn, info = await open_connection(self, server, self._opts, self._tls_for(server))
        # Established: re-make the subscriptions, then send what was buffered.
        self._info = info
        self._max_payload = info.max_payload
        conn.parser.max_payload = info.max_payload + _PAYLOAD_SLACK
        conn.established = True
        server.did_connect = True
        server.attempts = 0
        self._current = server
        self._conn = conn
        self._state = _State.CONNECTED
        out = bytearray()
        for sid, sub in self._subs.items():
            s: Any = sub
            encode_sub(out, s.subject, sid, s.queue)
            if s.max_msgs is not None:
                encode_unsub(out, sid, max(s.max_msgs - s.received, 1))
        out += self._wbuf
        self._wbuf = bytearray()
        self._flush_scheduled = False
        conn.write(out)
        self._arm_ping()
        self._connected_ev.set()
        self._discover(info, server)

    def _discover(self, info: Info, server: Server) -> None:
        if not info.connect_urls:
            return
        added = self._pool.add_discovered(info.connect_urls, template=server)
        if added and self._info is not None:
            urls = [str(s) for s in added]
            self._emit(EventKind.DISCOVERED_SERVERS, urls)
            self._fire(self._opts.discovered_server_cb)

    # -- connection loss and reconnect ------------------------------------------

    def _on_connection_lost(self, conn: _Connection, cause: BaseException | None) -> None:
        if conn is not self._conn:
            return
        self._conn = None
        self._cancel_ping()
        self._connected_ev.clear()
        lost = DisconnectedError(f"connection to {self._current} lost: {cause or 'closed'}")
        for w in conn.pongs:
            if w is not None and not w.done():
                w.set_exception(lost)
        conn.pongs.clear()
        if self._mux is not None:
            self._mux.fail_all(lost)
        for hook in self._loss_hooks:
            hook(lost)
        self._release_writers()
        if self._state in (_State.CLOSED,):
            return
        if cause is not None and isinstance(cause, NatsError):
            self._report_error(cause)
        self._emit(EventKind.DISCONNECTED, cause)
        self._fire(self._opts.disconnected_cb)
        if self._state is _State.DRAINING:
            self._spawn(self._shutdown(None))
            return
        if self._opts.allow_reconnect:
            self._state = _State.RECONNECTING
            self._reconnect_task = self._loop.create_task(self._reconnect_loop())
        else:
            self._spawn(self._shutdown(None))

    def _pick(self) -> tuple[Server | None, float]:
        o = self._opts
        return self._pool.pick(
            max_attempts=o.max_reconnect_attempts,
            wait=o.reconnect_time_wait,
            jitter=lambda s: o.reconnect_jitter_tls if self._tls_for(s) else o.reconnect_jitter,
            now=self._loop.time(),
            chooser=o.reconnect_to_server_cb,
            info=self._info,
        )

    async def _reconnect_loop(self) -> None:
        last_auth: str | None = None
        last: BaseException | None = None
        while self._state is _State.RECONNECTING:
            server, delay = self._pick()
            if server is None:
                await self._shutdown(
                    NoServersError(f"reconnect gave up on {self._pool.urls()}: {last}")
                )
                return
            if delay:
                await asyncio.sleep(delay)
            if not self.is_reconnecting:
                return
            server.last_attempt = self._loop.time()
            try:
                await self._connect_to(server)
            except AuthorizationError as exc:
                server.attempts += 1
                self._report_error(exc)
                if last_auth == str(exc):
                    await self._shutdown(exc)
                    return
                last_auth = str(exc)
                last = exc
                continue
            except (OSError, NatsError, TimeoutError) as exc:
                server.attempts += 1
                last = exc
                last_auth = None
                continue
            self.stats.reconnects += 1
            for hook in list(self._reconnect_hooks):
                hook()
            self._emit(EventKind.RECONNECTED, str(server))
            self._fire(self._opts.reconnected_cb)
            return

    async def force_reconnect(self) -> None:
        """Drop the current socket and reconnect (to the next server of the pool)."""
        self._check_open()
        conn = self._conn
        if conn is not None:
            conn.fail(NatsError("reconnect forced"))

    def set_servers(self, urls: Sequence[str]) -> None:
        """Replace the server pool (reconnects use the new list)."""
        self._pool.replace(urls)

    # -- INFO, -ERR, PING ---------------------------------------------------------

    def _on_async_info(self, conn: _Connection, info: Info) -> None:
        if conn is not self._conn or self._current is None:
            return
        self._discover(info, self._current)
        if info.ldm:
            self._emit(EventKind.LAME_DUCK, str(self._current))
            self._fire(self._opts.lame_duck_cb)
            if any(s is not self._current for s in self._pool.servers):
                # Move before the server goes: the next pick is another server.
                conn.fail(NatsError(f"server {self._current} entered lame duck mode"))

    def _on_err(self, conn: _Connection, message: str) -> None:
        exc = classify_server_error(message, str(self._current))
        if isinstance(exc, PermissionsError):
            denied = denied_subscription(message)
            if denied is not None:
                subject, queue = denied
                for sid, sub in list(self._subs.items()):
                    if (
                        isinstance(sub, Subscription)
                        and sub.subject == subject
                        and (queue is None or sub.queue == queue)
                    ):
                        del self._subs[sid]
                        sub._finish(exc)
        elif not conn.handshake.done():
            conn.handshake.set_exception(exc)
            return
        self._report_error(exc)

    def _arm_ping(self) -> None:
        self._cancel_ping()
        if self._opts.ping_interval > 0:
            self._ping_timer = self._loop.call_later(self._opts.ping_interval, self._ping_tick)

    def _cancel_ping(self) -> None:
        if self._ping_timer is not None:
            self._ping_timer.cancel()
            self._ping_timer = None

    def _ping_tick(self) -> None:
        self._ping_timer = None
        conn = self._conn
        if conn is None:
            return
        if conn.pings_outstanding >= self._opts.max_outstanding_pings:
            conn.fail(StaleConnectionError(f"server {self._current} stopped answering PINGs"))
            return
        conn.pings_outstanding += 1
        conn.pongs.append(None)
        self._flush_now()
        conn.write(PING)
        self._arm_ping()

    # -- writing --------------------------------------------------------------------

    def _schedule_flush(self) -> None:
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush_cb)

    def _flush_cb(self) -> None:
        self._flush_scheduled = False
        self._flush_now()

    def _flush_now(self) -> None:
        conn = self._conn
        if conn is None or not self._wbuf:
            return
        buf = self._wbuf
        self._wbuf = bytearray()
        conn.write(buf)

    def _on_pause_writing(self, conn: _Connection) -> None:
        pass

    def _on_resume_writing(self, conn: _Connection) -> None:
        self._release_writers()

    def _release_writers(self) -> None:
        waiters, self._write_waiters = self._write_waiters, []
        for w in waiters:
            if not w.done():
                w.set_result(None)

    async def _wait_writable(self) -> None:
        conn = self._conn
        while conn is not None and conn.write_paused and self._conn is conn:
            w = self._loop.create_future()
            self._write_waiters.append(w)
            await w

    def _check_open(self) -> None:
        if self._state is _State.CLOSED:
            raise ConnectionClosedError("the connection is closed")

    async def publish(
        self,
        subject: str,
        data: bytes | bytearray | memoryview = b"",
        *,
        reply: str | None = None,
        headers: HeadersLike | None = None,
    ) -> None:
        """Publish ``data`` on ``subject``; the bytes go out at the end of this loop iteration.

        Waits only when the socket cannot take more (backpressure).

        Raises:
            BadSubjectError: the subject or reply subject is invalid (nothing is sent).
            BadHeaderError: a header cannot be encoded (nothing is sent).
            MaxPayloadError: headers + data exceed the server's max_payload (nothing is sent).
            ReconnectBufferFullError: disconnected and the reconnect buffer is full.
            ConnectionClosedError: the client is closed.
        """
        self._publish_nowait(subject, data, reply, encode_headers(headers) if headers else None)
        conn = self._conn
        if conn is not None and conn.write_paused:
            await self._wait_writable()

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
        if size > self._max_payload or (
            self._conn is None and len(wbuf) + size > self._opts.reconnect_buf_size
        ):
            self._refuse(subject, size)
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
        stats = self.stats
        stats.out_msgs += 1
        stats.out_bytes += size
        if len(wbuf) >= FLUSH_THRESHOLD:
            self._flush_now()
        elif not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush_cb)

    def _publish_reply(self, reply: str, body: bytes) -> None:
        """Buffer a small message to a subject the server gave us (an ack subject).

        No validation: the parser splits control lines on whitespace, so a reply
        subject cannot carry the characters validation guards against.
        """
        if self._closed:
            raise ConnectionClosedError(f"cannot publish to {reply!r}: the connection is closed")
        wbuf = self._wbuf
        wbuf += b"PUB %b %d\r\n%b\r\n" % (reply.encode(), len(body), body)
        self.stats.out_msgs += 1
        self.stats.out_bytes += len(body)
        if len(wbuf) >= FLUSH_THRESHOLD:
            self._flush_now()
        elif not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush_cb)

    def _pub_prefix(self, subject: str) -> bytes:
        """Validate a publish subject and cache its ``PUB <subject> `` prefix."""
        validate_subject(subject)
        cache = self._pub_prefixes
        if len(cache) >= 4096:
            cache.clear()
        pre = cache[subject] = b"PUB " + subject.encode() + b" "
        return pre

    def _refuse(self, subject: str, size: int) -> NoReturn:
        if size > self._max_payload:
            raise MaxPayloadError(
                f"message to {subject!r} is {size} bytes; the server's max_payload is "
                f"{self._max_payload}"
            )
        raise ReconnectBufferFullError(
            f"disconnected, and the reconnect buffer ({self._opts.reconnect_buf_size} "
            f"bytes) cannot take {size} more for {subject!r}"
        )

    async def flush(self, timeout: float = 10.0) -> None:
        """Send what is buffered and wait for the server's PONG (a full round trip).

        Raises:
            TimeoutError: no PONG within ``timeout`` seconds (also waiting for a reconnect).
            DisconnectedError: the connection was lost before the PONG came.
        """
        self._check_open()
        try:
            async with asyncio.timeout(timeout):
                if self._conn is None:
                    await self._connected_ev.wait()
                conn = self._conn
                if conn is None:
                    raise DisconnectedError("disconnected while flushing")
                w = self._loop.create_future()
                conn.pongs.append(w)
                self._flush_now()
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

    def _new_sid(self) -> int:
        return next(self._sids)

    def _register(self, sid: int, target: Delivery) -> None:
        self._subs[sid] = target

    def _forget_sub(self, sid: int) -> None:
        self._subs.pop(sid, None)

    def _send_sub(self, subject: str, sid: int, queue: str | None) -> None:
        encode_sub(self._wbuf, subject, sid, queue)
        self._schedule_flush()

    def _send_unsub(self, sid: int, max_msgs: int | None) -> None:
        if self._state is _State.CLOSED:
            return
        encode_unsub(self._wbuf, sid, max_msgs)
        self._schedule_flush()

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
        messages, new ones are dropped and a ``SlowConsumerError`` is reported.

        Raises:
            BadSubjectError: the subject or queue name is invalid (nothing is sent).
        """
        self._check_open()
        validate_subscribe_subject(subject)
        if queue is not None:
            validate_queue(queue)
        if max_msgs is not None and max_msgs <= 0:
            raise ValueError("max_msgs must be positive")
        sid = self._new_sid()
        sub = Subscription(
            self,
            sid,
            subject,
            queue,
            cb,
            max_msgs,
            pending_msgs_limit or self._opts.pending_msgs_limit,
            pending_bytes_limit or self._opts.pending_bytes_limit,
        )
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
            sid = self._new_sid()
            mux = RequestMux(self, f"{self._opts.inbox_prefix}.{next_nuid()}.", sid)
            self._subs[sid] = mux
            self._send_sub(mux.subject, sid, None)
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
        self._check_open()
        mux = self._mux or self._request_mux()
        token = str(next(mux.tokens))
        fut: asyncio.Future[Msg] = self._loop.create_future()
        mux.waiters[token] = fut
        try:
            await self.publish(subject, data, reply=mux.prefix + token, headers=headers)
            async with asyncio.timeout(timeout):
                msg = await fut
        except TimeoutError as exc:
            if isinstance(exc, NatsError):
                raise
            raise NatsTimeoutError(f"request to {subject!r}: no reply within {timeout}s") from None
        finally:
            mux.waiters.pop(token, None)
        if msg.status == 503:
            raise NoRespondersError(f"no responders on {subject!r}")
        return msg

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

    def _report_error(self, exc: BaseException) -> None:
        self._last_error = exc
        self._emit(EventKind.ERROR, exc)
        cb = self._opts.error_cb
        if cb is None:
            log.warning("jetstream: %s", exc)
        else:
            self._fire(cb, exc)

    def _fire(self, cb: Callback | None, *args: Any) -> None:
        self._runner.fire(cb, *args)

    def _spawn(self, aw: Awaitable[Any]) -> None:
        self._runner.spawn(aw)

    def _emit(self, kind: EventKind, detail: Any) -> None:
        if self._event_streams:
            ev = ConnectionEvent(kind, detail)
            for s in self._event_streams:
                s._push(ev)

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
            self._send_unsub(s.sid, None)
        try:
            if self._conn is not None:
                await self.flush(timeout=max(deadline - self._loop.time(), 0.001))
        except NatsError:
            pass
        for s in subs:
            self._forget_sub(s.sid)
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

    async def _shutdown(self, error: BaseException | None, *, fire: bool = True) -> None:
        if self._state is _State.CLOSED:
            return
        self._state = _State.CLOSED
        self._closed = True
        if error is not None:
            self._report_error(error)
        self._cancel_ping()
        task = self._reconnect_task
        self._reconnect_task = None
        if task is not None and task is not asyncio.current_task():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        conn = self._conn
        self._conn = None
        closed = ConnectionClosedError("the connection was closed")
        if conn is not None:
            if self._wbuf:
                conn.write(self._wbuf)
            self._wbuf = bytearray()
            for w in conn.pongs:
                if w is not None and not w.done():
                    w.set_exception(closed)
            conn.pongs.clear()
            if conn.transport is not None:
                conn.transport.close()
                try:
                    async with asyncio.timeout(2.0):
                        await asyncio.shield(conn.lost)
                except TimeoutError:
                    conn.transport.abort()
        if self._mux is not None:
            self._mux.fail_all(closed)
        for hook in self._loss_hooks:
            hook(closed)
        self._release_writers()
        self._connected_ev.clear()
        subs = list(self._subs.values())
        self._subs.clear()
        for s in subs:
            closer = getattr(s, "_close", None)
            if closer is not None:
                await closer()
        if fire:
            self._emit(EventKind.CLOSED, error)
            self._fire(self._opts.closed_cb)
        for stream in self._event_streams:
            stream._end()
        self._closed_ev.set()
        await self._runner.wait(5.0)

    async def wait_closed(self) -> None:
        """Wait until the client is closed (by close(), drain() or giving up reconnecting)."""
        await self._closed_ev.wait()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    def jetstream(
        self,
        *,
        domain: str | None = None,
        api_prefix: str | None = None,
        timeout: float = 5.0,
        publish_async_max_pending: int = 4000,
    ) -> JetStream:
        """The JetStream context of this connection (see ``jetstream.js.JetStream``)."""
        from .js import JetStream

        return JetStream(
            self,
            domain=domain,
            api_prefix=api_prefix,
            timeout=timeout,
            publish_async_max_pending=publish_async_max_pending,
        )
