"""The connection lifecycle under ``Client``: handshake, pings, loss, reconnect, close.

``Client`` (client.py) adds the public calls on top. A client outlives its
sockets: it owns the write buffer (publishes made while disconnected wait there,
bounded), the sid table of subscriptions (all re-made after a reconnect, before
the buffer is flushed) and the one muxed inbox that every ``request`` shares.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import ssl
from collections.abc import Awaitable, Callable
from enum import StrEnum
from typing import TYPE_CHECKING, Any, TypeVar, cast

from ..errors import (
    AuthorizationError,
    ConnectionClosedError,
    DisconnectedError,
    NatsError,
    NoServersError,
    PermissionsError,
    StaleConnectionError,
    TlsError,
)
from ..protocol.commands import PING, encode_sub, encode_unsub
from ..protocol.ops import BulkParse, Info
from ._connection import (
    Delivery,
    _Connection,
    classify_server_error,
    denied_subscription,
    open_connection,
)
from ._events import CallbackRunner, ConnectionEvent, EventKind, EventStream, Statistics
from ._mux import RequestMux
from ._options import Callback, _Options
from ._servers import Server, ServerPool
from .message import Msg
from .subscription import Subscription

M = TypeVar("M", bound=Msg)

if TYPE_CHECKING:
    from ._otel import Tracing

__all__ = ["FLUSH_THRESHOLD", "_ClientBase"]

log = logging.getLogger("jetstream")

#: Pending bytes past which a publish writes at once instead of at the end of the loop
#: iteration. Large, so that a burst goes out in few sends: each send is a system call
#: here and wakes the server's reader there, and both costs are paid per send, not per
#: byte (docs/performance.md has the figures).
FLUSH_THRESHOLD = 512 * 1024
_PAYLOAD_SLACK = 64 * 1024  # servers add headers to some deliveries (direct get, republish)
_TICK_EARLY = 0.002  # seconds a keepalive tick is aimed ahead of its grid point
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


class _ClientBase:
    """State and connection lifecycle shared by every ``Client`` method (see client.py)."""

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
        #: subject -> payload size -> ``PUB <subject> <size>\r\n``, for ``publish``'s
        #: fast path (one bytearray append and one lookup less than prefix + size line)
        self._pub_heads: dict[str, dict[int, bytes]] = {}
        self._closed = False
        self._mux: RequestMux | None = None
        self._ping_timer: asyncio.TimerHandle | None = None
        self._next_ping = 0.0
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
        self._in_msgs = 0
        self._in_bytes = 0
        self._out_msgs = 0
        self._out_bytes = 0
        #: the payload sizes of the fast path's publishes not counted yet: one append a
        #: message costs half of two counters' sums (each a new int); ``flush_now`` and
        #: the statistics take them in
        self._pub_sizes: list[int] = []
        self._reconnects = 0
        #: counted by the JetStream pulls (``Statistics.stranded_naks``)
        self._stranded_naks = 0
        #: the largest payload the fast publish path takes: max_payload while
        #: connected, -1 while not (then every publish checks the reconnect buffer)
        self._fast_limit = -1
        #: the message class this client's parsers make (bound to this client)
        self._msg_type = Msg.for_client(self)  # type: ignore[arg-type]
        #: the class made for the messages of some sids instead (see ``add_delivery``),
        #: shared with every connection's parser; and the classes of ``msg_class``
        self._sid_types: dict[int, type[Msg]] = {}
        self._msg_classes: dict[type[Msg], type[Msg]] = {}
        #: the bulk parser of this client's connections (``use_bulk_parse``)
        self._bulk_parse: BulkParse | None = None
        #: OpenTelemetry spans (``connect(tracing=...)``); None (off) costs one test
        #: per publish or subscribe call, nothing per received message
        self._tracing: Tracing | None = options.tracing

    def _statistics(self) -> Statistics:
        self._count_pub_sizes()
        return Statistics(
            self._in_msgs,
            self._out_msgs,
            self._in_bytes,
            self._out_bytes,
            self._reconnects,
            self._stranded_naks,
        )

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
    def subscription_count(self) -> int:
        """The subscriptions the client holds now: the application's and the client's
        own inboxes (the one of ``request``, those of pulls, push consumers and the
        ``publish_async`` window). Each is made again after a reconnect; one that ended
        (unsubscribed, its ``max_msgs`` reached, a fetch that returned) is no longer
        counted. nats.go's ``NumSubscriptions``."""
        return len(self._subs)

    @property
    def pending_requests(self) -> int:
        """The requests sent on the client's request inbox and waiting for their reply:
        ``request`` calls, the JetStream API calls and acknowledged publishes made with
        it, ``ack_sync`` (one for each message of an ``ack_sync_all``). A request leaves
        this count when it is answered, times out, fails or is cancelled."""
        mux = self._mux
        return len(mux.waiters) if mux is not None else 0

    @property
    def buffered_bytes(self) -> int:
        """Bytes published and not yet taken by the socket: the client's write buffer
        (written at the end of the loop iteration; kept while disconnected, up to
        ``reconnect_buf_size``) and the transport's (a server that reads slower than the
        client writes; ``publish`` then waits). nats.go's ``Buffered``."""
        conn = self._conn
        transport = conn.transport if conn is not None else None
        size = transport.get_write_buffer_size() if transport is not None else 0
        return len(self._wbuf) + size

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
        self._fast_limit = info.max_payload
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

    def _on_connection_lost(self, conn: _Connection, cause: BaseException | None) -> None:
        if conn is not self._conn:
            return
        self._conn = None
        self._fast_limit = -1
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
            self.report_error(cause)
        self._emit(EventKind.DISCONNECTED, cause)
        self._fire(self._opts.disconnected_cb)
        if self._state is _State.DRAINING:
            self.spawn(self._shutdown(None))
            return
        if self._opts.allow_reconnect:
            self._state = _State.RECONNECTING
            self._reconnect_task = self._loop.create_task(self._reconnect_loop())
        else:
            self.spawn(self._shutdown(None))

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
                self.report_error(exc)
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
            self._reconnects += 1
            for hook in list(self._reconnect_hooks):
                hook()
            self._emit(EventKind.RECONNECTED, str(server))
            self._fire(self._opts.reconnected_cb)
            return

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
        self.report_error(exc)

    def _arm_ping(self, after: float | None = None) -> None:
        """Schedule the next keepalive PING one interval after ``after`` (default: now).

        Ticks are laid on a fixed grid from the connect time, so they do not drift: a dead
        link is declared (max_outstanding_pings + 1) intervals after the last answered tick.
        """
        self._cancel_ping()
        interval = self._opts.ping_interval
        if interval > 0:
            now = self._loop.time()
            if after is None or after + interval < now:
                # First tick, or the loop was held up for longer than an interval: start
                # the grid again from now rather than firing ticks back to back.
                after = now
            self._next_ping = after + interval
            # The loop polls with a whole-millisecond timeout, rounded up, and then runs
            # the callbacks ahead of the timer: aim a little early so that the tick (and
            # a dead-link verdict) lands on the grid rather than a few ms past it.
            self._ping_timer = self._loop.call_at(self._next_ping - _TICK_EARLY, self._ping_tick)

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
            exc = StaleConnectionError(f"server {self._current} stopped answering PINGs")
            conn.fail(exc)
            # The socket reports its loss an iteration later; the verdict is known now.
            self._on_connection_lost(conn, exc)
            return
        conn.pings_outstanding += 1
        conn.pongs.append(None)
        self.flush_now()
        conn.write(PING)
        self._arm_ping(after=self._next_ping)

    def msg_class(self, base: type[M]) -> type[M]:
        """``base`` (``Msg`` or a subclass with the same positional fields) bound to this
        client (``base.for_client``), made once; a subscriber registers it for its sid
        (``add_delivery``) to have the parser make its messages of that class."""
        cls = self._msg_classes.get(base)
        if cls is None:
            cls = self._msg_classes[base] = base.for_client(self)  # type: ignore[arg-type]
        return cast("type[M]", cls)

    def _schedule_flush(self) -> None:
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush_cb)

    def use_bulk_parse(self, bulk: BulkParse | None) -> None:
        """Parse this client's feeds with ``bulk`` first (``Parser.bulk``, a
        ``protocol.ops.BulkParse``): now, and on every connection after a reconnect.

        For a connection read in bulk (the Spark source's; applications call it as
        ``jetstream.bulk.use_bulk_parse``): where ``bulk`` cuts a run of MSG ops out of
        a feed, the run goes whole to its subscription, read with
        ``jetstream.bulk.take_runs``. None goes back to the parser's own ops."""
        self._bulk_parse = bulk
        conn = self._conn
        if conn is not None:
            conn.parser.bulk = bulk

    def _flush_cb(self) -> None:
        self._flush_scheduled = False
        self.flush_now()

    def _count_pub_sizes(self) -> None:
        sizes = self._pub_sizes
        self._out_msgs += len(sizes)
        self._out_bytes += sum(sizes)
        sizes.clear()

    def flush_now(self) -> None:
        if self._pub_sizes:
            self._count_pub_sizes()
        conn = self._conn
        if conn is None or not self._wbuf or not conn.writable:
            return  # kept for the next connection when this one is going away
        buf = self._wbuf
        self._wbuf = bytearray()
        conn.write(buf)

    def _on_pause_writing(self, conn: _Connection) -> None:
        # The socket takes nothing more: every publish takes the checked path, which
        # waits for it (the fast path looks only when a full buffer goes out, and a
        # publisher whose loop turns between publishes never fills one).
        self._fast_limit = -1

    def _on_resume_writing(self, conn: _Connection) -> None:
        if conn is self._conn and self._state is _State.CONNECTED:
            self._fast_limit = self._max_payload
        self._release_writers()

    def _release_writers(self) -> None:
        waiters, self._write_waiters = self._write_waiters, []
        for w in waiters:
            if not w.done():
                w.set_result(None)

    async def wait_writable(self) -> None:
        conn = self._conn
        while conn is not None and conn.write_paused and self._conn is conn:
            w = self._loop.create_future()
            self._write_waiters.append(w)
            try:
                await w
            except BaseException:  # cancelled: not kept until the socket drains
                if w in self._write_waiters:
                    self._write_waiters.remove(w)
                raise

    def check_open(self) -> None:
        if self._state is _State.CLOSED:
            raise ConnectionClosedError("the connection is closed")

    def report_error(self, exc: BaseException) -> None:
        """Report an error no caller can be raised to (a slow consumer, a missed
        heartbeat): to ``error_cb``, else the log; and as an ``ERROR`` event."""
        self._last_error = exc
        self._emit(EventKind.ERROR, exc)
        cb = self._opts.error_cb
        if cb is None:
            log.warning("jetstream: %s", exc)
        else:
            self._fire(cb, exc)

    def _fire(self, cb: Callback | None, *args: Any) -> None:
        self._runner.fire(cb, *args)

    def spawn(self, aw: Awaitable[Any]) -> None:
        """Run ``aw`` in the background on this client's loop, for clean-up that must not
        be awaited where it starts (a cancelled task cannot await). Its errors are
        logged; ``close()`` waits for it (a few seconds at most)."""
        self._runner.spawn(aw)

    def _emit(self, kind: EventKind, detail: Any) -> None:
        if self._event_streams:
            ev = ConnectionEvent(kind, detail)
            for s in self._event_streams:
                s._push(ev)

    async def _shutdown(self, error: BaseException | None, *, fire: bool = True) -> None:
        if self._state is _State.CLOSED:
            return
        self._state = _State.CLOSED
        self._closed = True
        self._fast_limit = -1
        if error is not None:
            self.report_error(error)
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
        self._sid_types.clear()
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
