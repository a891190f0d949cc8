"""One socket's protocol: bytes in, ops dispatched; nothing here outlives the socket.

``data_received`` feeds the parser and hands each ``MSG``/``HMSG`` straight to
the subscription registered for its sid (one dict lookup, no task, no
future); a feed that is all messages for one sid (the usual case: a busy
subscription) is handed over in one call when the subscription takes lists.
Control ops go to the client. The client owns the write buffer and
the subscriptions, so both survive a reconnect; a ``_Connection`` is made anew
for every socket.
"""

from __future__ import annotations

import asyncio
import dataclasses
import ssl
from collections import deque
from operator import attrgetter
from typing import Any, Protocol, cast

from .._version import __version__
from ..errors import (
    AuthorizationError,
    NatsError,
    PermissionsError,
    ProtocolError,
    StaleConnectionError,
    TlsError,
)
from ..errors import TimeoutError as NatsTimeoutError
from ..protocol.commands import PING, PONG, encode_connect
from ..protocol.ops import BulkParse, Err, Info, MsgRun, Ok, Op, Ping, Pong
from ..protocol.parser import Parser
from ._options import _Options
from ._servers import Server
from .message import Msg

__all__ = [
    "ConnectionOwner",
    "Delivery",
    "_Connection",
    "classify_server_error",
    "denied_subscription",
    "open_connection",
]


class Delivery(Protocol):
    """Anything registered in the client's sid table: it receives MSG ops for its sid.

    One may also have ``_deliver_many(ops, size) -> bool``, offered a whole feed of
    messages for its sid first (``size``: the sum of their payload lengths). It takes
    all of them, with the same result as ``_deliver`` on each in turn, and returns
    True; or it takes none and returns False, and they are delivered one by one.
    """

    def _deliver(self, op: Msg) -> None: ...


class ConnectionOwner(Protocol):
    """What a ``_Connection`` reports to and reads from the client that owns it (the
    client outlives its sockets; see ``_base.py``)."""

    _subs: dict[int, Delivery]
    _msg_type: type[Msg]
    _sid_types: dict[int, type[Msg]]
    _bulk_parse: BulkParse | None
    _in_msgs: int
    _in_bytes: int

    def report_error(self, exc: BaseException) -> None: ...

    def _on_async_info(self, conn: _Connection, info: Info) -> None: ...

    def _on_err(self, conn: _Connection, message: str) -> None: ...

    def _on_connection_lost(self, conn: _Connection, cause: BaseException | None) -> None: ...

    def _on_pause_writing(self, conn: _Connection) -> None: ...

    def _on_resume_writing(self, conn: _Connection) -> None: ...


#: Feeds with at least this many ops are checked for being all messages for one sid.
_BULK_MIN = 8
#: ops before the parser's run that ``_dispatch`` checks one by one, at most
_RUN_LEAD = 4

#: Bytes asked for per read on asyncio's own socket transport, while reads come back
#: smaller than this. That transport reads into a new ``bytes`` of its ``max_size``
#: (256 KiB) and shrinks it to what came: a size past glibc's mmap threshold, and a
#: chunk shrunk before it is freed never raises the threshold, so every read mapped,
#: remapped and unmapped memory (three system calls and a page fault, about a tenth
#: of a request's round trip here). Below the threshold the buffer comes from the heap.
READ_SIZE = 64 * 1024
#: ... and once a read fills READ_SIZE (a bulk transfer), until one comes back short:
#: there, fewer and larger reads cost less than the mapping does.
BULK_READ_SIZE = 256 * 1024
#: ... or this, where a bulk parser reads the feeds (``Parser.bulk``): its passes over a
#: feed have a cost of their own to set up, which a larger feed shares among more ops.
BULK_PARSED_READ_SIZE = 512 * 1024
_sid_of = attrgetter("sid")
_payload_of = attrgetter("payload")


class _Connection(asyncio.Protocol):
    def __init__(self, client: ConnectionOwner, peer: str = "the server") -> None:
        loop = asyncio.get_running_loop()
        self.client = client
        self.peer = peer  # the server, for error messages
        self.subs = client._subs
        self.transport: asyncio.Transport | None = None
        self.parser = Parser(
            msg_type=client._msg_type, sid_types=client._sid_types, bulk=client._bulk_parse
        )
        self.msg_type = client._msg_type
        self.info: asyncio.Future[Info] = loop.create_future()
        #: resolved by the first PONG (the end of the CONNECT handshake) or failed by -ERR
        self.handshake: asyncio.Future[None] = loop.create_future()
        #: FIFO of PING waiters; None marks a keepalive PING nobody waits for
        self.pongs: deque[asyncio.Future[None] | None] = deque()
        self.pings_outstanding = 0
        self.lost: asyncio.Future[BaseException | None] = loop.create_future()
        self.failure: BaseException | None = None
        self.established = False
        self.write_paused = False
        #: the socket transport whose read size is ours to set (see READ_SIZE), if any
        self._reads: Any = None
        self._bulk = False

    # -- asyncio.Protocol -----------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports do not subclass asyncio.Transport; they quack alike.
        self.transport = cast(asyncio.Transport, transport)
        # uvloop reads into a buffer of its own and has no max_size to set.
        if isinstance(getattr(transport, "max_size", None), int):
            self._reads = transport
            transport.max_size = READ_SIZE  # type: ignore[attr-defined]

    def layered(self, transport: asyncio.Transport) -> None:
        """TLS now runs over the socket: ``transport`` carries the data, and the socket's
        reads are the TLS layer's (into a buffer of its own), no longer sized here."""
        self.transport = transport
        self._reads = None

    def _resize_reads(self, size: int) -> None:
        """Between READ_SIZE and bulk reads (larger where a bulk parser reads the
        feeds), by the size of the last one."""
        if size >= READ_SIZE:
            if not self._bulk:
                self._bulk = True
                bulk = self.parser.bulk is not None
                self._reads.max_size = BULK_PARSED_READ_SIZE if bulk else BULK_READ_SIZE
        elif self._bulk:
            self._bulk = False
            self._reads.max_size = READ_SIZE

    def data_received(self, data: bytes) -> None:
        if self._reads is not None:
            self._resize_reads(len(data))
        try:
            ops = self.parser.feed(data)
        except ProtocolError as exc:
            # Hand over what came before the violation, then drop the socket.
            self._dispatch(exc.ops)  # type: ignore[arg-type]
            self.fail(exc)
            return
        self._dispatch(ops)

    def _dispatch(self, ops: list[Op]) -> None:
        subs = self.subs
        msg_type = self.msg_type
        # messages: the client's Msg, or the class registered for a sid (``sid_types``)
        if len(ops) >= _BULK_MIN and isinstance(ops[0], Msg):
            parser = self.parser
            size = -1
            sid: int | None = None
            if parser.run_end == len(ops) and parser.run_start <= _RUN_LEAD:
                # One run for one sid as the parser made it, but for the few ops before
                # it (a payload begun in the feed before): only those are looked at.
                sid = parser.run_sid
                size = parser.run_bytes
                for op in ops[: parser.run_start]:
                    if not isinstance(op, Msg) or op.sid != sid:
                        sid = None
                        size = -1
                        break
                    size += len(op.payload)
            else:
                # Only MSG ops have a sid: an AttributeError means some op is not one.
                try:
                    sids = list(map(_sid_of, ops))
                except AttributeError:
                    sids = None
                sid = sids[0] if sids is not None and sids.count(sids[0]) == len(sids) else None
            if sid is not None:
                many = getattr(subs.get(sid), "_deliver_many", None)
                if many is not None:
                    if size < 0:
                        size = sum(map(len, map(_payload_of, ops)))
                    try:
                        taken = many(ops, size)
                    except Exception as exc:  # as below: the reader must go on
                        self.client.report_error(exc)
                        taken = True
                    if taken:
                        client = self.client
                        client._in_msgs += len(ops)
                        client._in_bytes += size
                        return
        n = 0
        size = 0
        for op in ops:
            if op.__class__ is msg_type or isinstance(op, Msg):
                n += 1
                size += len(op.payload)
                sub = subs.get(op.sid)
                if sub is not None:
                    try:
                        sub._deliver(op)
                    except Exception as exc:  # a bug in a handler must not stop the reader
                        self.client.report_error(exc)
            else:
                self._control(op)
        if n:
            client = self.client
            client._in_msgs += n
            client._in_bytes += size

    def _control(self, op: object) -> None:
        cls = op.__class__
        if cls is Ping:
            self.write(PONG)
        elif cls is Pong:
            self.pings_outstanding = 0
            if self.pongs:
                w = self.pongs.popleft()
                if w is not None and not w.done():
                    w.set_result(None)
            elif not self.handshake.done():
                self.handshake.set_result(None)
        elif cls is Info:
            assert isinstance(op, Info)
            if not self.info.done():
                self.info.set_result(op)
            else:
                self.client._on_async_info(self, op)
        elif cls is Err:
            assert isinstance(op, Err)
            self.client._on_err(self, op.message)
        elif cls is Ok:
            pass
        elif isinstance(op, MsgRun):
            self._deliver_run(op)

    def _deliver_run(self, run: MsgRun) -> None:
        """A bulk parser's run: whole to a subscription that reads runs, else op by op."""
        client = self.client
        client._in_msgs += len(run)
        client._in_bytes += run.nbytes
        sub = self.subs.get(run.run_sid)
        if sub is None:
            return
        try:
            take = getattr(sub, "_deliver_run", None)
            if take is not None:
                take(run)
            else:
                for op in run.ops(self.msg_type):
                    sub._deliver(op)
        except Exception as exc:  # as in _dispatch: the reader must go on
            client.report_error(exc)

    def connection_lost(self, exc: Exception | None) -> None:
        cause: BaseException | None = self.failure or exc
        err: NatsError
        if isinstance(cause, ssl.SSLError):
            # e.g. TLS 1.3: the server rejects our client certificate only after the
            # handshake looked done to us, with an alert that ends the connection.
            err = TlsError(f"TLS with {self.peer} failed: {tls_reason(cause)}")
        else:
            err = NatsError(
                f"connection lost: {cause}" if cause else "connection closed by the server"
            )
        for fut in (self.info, self.handshake):
            if not fut.done():
                fut.set_exception(cause if isinstance(cause, NatsError) else err)
                fut.exception()  # mark retrieved: the handshake path may be gone already
        if not self.lost.done():
            self.lost.set_result(cause)
        self.client._on_connection_lost(self, cause)

    def pause_writing(self) -> None:
        self.write_paused = True
        self.client._on_pause_writing(self)

    def resume_writing(self) -> None:
        self.write_paused = False
        self.client._on_resume_writing(self)

    # -- helpers ----------------------------------------------------------

    @property
    def writable(self) -> bool:
        """False once the socket is failing or closing: bytes written now would be lost
        (the loss itself is reported a loop iteration later)."""
        t = self.transport
        return t is not None and self.failure is None and not t.is_closing()

    def write(self, data: bytes | bytearray) -> None:
        t = self.transport
        if t is not None and not t.is_closing():
            t.write(data)

    def fail(self, exc: BaseException) -> None:
        """Drop the socket because of ``exc`` (it becomes the cause of the loss)."""
        if self.failure is None:
            self.failure = exc
        t = self.transport
        if t is not None:
            t.abort()


async def open_connection(
    client: ConnectionOwner, server: Server, opts: _Options, ctx: ssl.SSLContext | None
) -> tuple[_Connection, Info]:
    """Open a socket to ``server`` and run the INFO / (TLS) / CONNECT / PING-PONG handshake;
    for ``ws://`` and ``wss://``, (TLS and) the WebSocket upgrade first (``_wslink.py``).

    Returns the established connection and the server's INFO. Every step is bounded
    by ``opts.connect_timeout``; on any failure the socket is aborted.

    Raises:
        TimeoutError: the handshake did not finish in time.
        TlsError: TLS was required but failed (certificate, hostname, or not offered).
        AuthorizationError: the server refused the credentials.
        WebSocketError: the WebSocket upgrade was refused or not answered as one.
        OSError: the TCP connection failed.
    """
    loop = asyncio.get_running_loop()
    hostname = opts.tls_hostname or server.host
    conn = _Connection(client, str(server))
    implied = ""  # why TLS is used although no tls= was given (for error messages)
    if ctx is None and opts.tls_first:
        ctx = ssl.create_default_context()
        implied = "tls_handshake_first was set"
    elif ctx is not None and opts.tls is None:
        implied = f"the URL asks for {server.scheme}://"
    try:
        async with asyncio.timeout(opts.connect_timeout):
            if server.websocket:
                # TLS (wss://) comes before the HTTP upgrade, the NATS protocol after it.
                from ._wslink import open_websocket

                await open_websocket(
                    conn,
                    scheme=server.scheme,
                    host=server.host,
                    port=server.port,
                    path=server.path,
                    ctx=ctx,
                    server_hostname=hostname,
                    headers=opts.ws_headers,
                    compression=opts.ws_compression,
                    peer=str(server),
                )
            elif ctx is not None and opts.tls_first:
                await loop.create_connection(
                    lambda: conn, server.host, server.port, ssl=ctx, server_hostname=hostname
                )
            else:
                await loop.create_connection(lambda: conn, server.host, server.port)
            info = await conn.info
            # Over WebSocket, the INFO's tls_required speaks of the TLS of wss://, done.
            upgrade = not (opts.tls_first or server.websocket)
            if ctx is None and info.tls_required and upgrade:
                ctx = ssl.create_default_context()
                implied = "the server requires TLS"
            if ctx is not None and upgrade:
                if not (info.tls_required or info.tls_available):
                    raise TlsError(f"server {server} does not offer TLS, which was required")
                assert conn.transport is not None
                tr = await loop.start_tls(conn.transport, conn, ctx, server_hostname=hostname)
                if tr is None:
                    raise TlsError(f"TLS upgrade with {server} failed")
                conn.layered(tr)
            creds = opts.credentials
            if server.user is not None or server.token is not None:
                creds = dataclasses.replace(
                    creds, user=server.user, password=server.password, token=server.token
                )
            fields: dict[str, Any] = {
                "verbose": False,
                "pedantic": False,
                "tls_required": ctx is not None,
                "lang": "python3-jetstream",
                "version": __version__,
                "protocol": 1,
                "headers": True,
                "no_responders": True,
                "echo": not opts.no_echo,
            }
            if opts.name:
                fields["name"] = opts.name
            fields.update(await creds.connect_fields(info.nonce))
            conn.write(encode_connect(fields) + PING)
            try:
                await conn.handshake
            except NatsError as exc:
                if type(exc) is NatsError and ctx is not None and info.tls_verify:
                    # A TLS 1.3 server checks our certificate after the handshake looked
                    # done to us; its alert may be lost to a reset when it drops the socket.
                    raise TlsError(
                        f"TLS with {server} failed: the server, which verifies client "
                        f"certificates, dropped the connection right after the TLS "
                        f"handshake ({exc}); it probably rejected our certificate"
                    ) from None
                raise
    except TimeoutError as exc:
        _abort(conn)
        if isinstance(exc, NatsError):
            raise
        raise NatsTimeoutError(
            f"connect to {server} did not complete within {opts.connect_timeout}s"
        ) from None
    except ssl.SSLError as exc:
        _abort(conn)
        raise TlsError(_tls_message(server, exc, implied)) from None
    except BaseException:
        _abort(conn)
        raise
    return conn, info


def tls_reason(exc: ssl.SSLError) -> str:
    """What went wrong in a TLS failure, in words (the verify message when there is one)."""
    if isinstance(exc, ssl.SSLCertVerificationError) and exc.verify_message:
        return f"certificate verify failed: {exc.verify_message}"
    return str(exc.reason or exc.strerror or exc)


# OpenSSL verify codes meaning "signed by a CA this context does not trust"
_UNTRUSTED = frozenset({2, 18, 19, 20, 21})


def _tls_message(server: Server, exc: ssl.SSLError, implied: str) -> str:
    hint = ""
    if implied and isinstance(exc, ssl.SSLCertVerificationError) and exc.verify_code in _UNTRUSTED:
        hint = (
            f" ({implied}, and with no tls= given only the system's trust store is used; "
            "pass tls=make_ssl_context(ca_file=...) to trust the server's CA)"
        )
    elif server.websocket and exc.reason == "WRONG_VERSION_NUMBER":
        hint = " (the port answered without TLS: a listener for ws://, not wss://?)"
    return f"TLS with {server} failed: {tls_reason(exc)}{hint}"


def _abort(conn: _Connection) -> None:
    if conn.transport is not None:
        conn.transport.abort()


def classify_server_error(message: str, server: str) -> NatsError:
    """The typed error for the text of a server's ``-ERR``."""
    low = message.lower()
    if "permissions violation" in low:
        return PermissionsError(f"server {server}: {message}")
    if "authorization" in low or "authentication" in low or "revoked" in low:
        return AuthorizationError(f"server {server} refused: {message}")
    if "stale connection" in low:
        return StaleConnectionError(f"server {server} says: {message}")
    return NatsError(f"server {server} says: {message}")


def denied_subscription(message: str) -> tuple[str, str | None] | None:
    """``(subject, queue)`` of a 'Permissions Violation for Subscription to "s"' -ERR, else None."""
    if "subscription" not in message.lower():
        return None
    first = message.find('"')
    last = message.rfind('"')
    if first < 0 or last <= first:
        return None
    subject = message[first + 1 : last]
    queue: str | None = None
    if '" using queue "' in subject:
        subject, _, queue = subject.partition('" using queue "')
    return subject, queue
