"""One socket's protocol: bytes in, ops dispatched; nothing here outlives the socket.

``data_received`` feeds the parser and hands each ``MSG``/``HMSG`` straight to
the subscription registered for its sid (one dict lookup, no task, no
future). Control ops go to the client. The client owns the write buffer and
the subscriptions, so both survive a reconnect; a ``_Connection`` is made anew
for every socket.
"""

from __future__ import annotations

import asyncio
import ssl
from collections import deque
from typing import TYPE_CHECKING, Any, Protocol

from . import __version__
from .auth import Credentials
from .errors import NatsError, ProtocolError, TlsError
from .errors import TimeoutError as NatsTimeoutError
from .protocol.commands import PING, PONG, encode_connect
from .protocol.ops import Err, Info, Msg, Ok, Ping, Pong
from .protocol.parser import Parser

if TYPE_CHECKING:
    from ._connect import _Options
    from ._servers import Server
    from .client import Client

__all__ = ["Delivery", "_Connection", "open_connection"]


class Delivery(Protocol):
    """Anything registered in the client's sid table: it receives MSG ops for its sid."""

    def _deliver(self, op: Msg) -> None: ...


class _Connection(asyncio.Protocol):
    def __init__(self, client: Client) -> None:
        loop = asyncio.get_running_loop()
        self.client = client
        self.subs = client._subs
        self.transport: asyncio.Transport | None = None
        self.parser = Parser()
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

    # -- asyncio.Protocol -----------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        try:
            ops = self.parser.feed(data)
        except ProtocolError as exc:
            self.fail(exc)
            return
        subs = self.subs
        n = 0
        size = 0
        for op in ops:
            if op.__class__ is Msg:
                n += 1
                size += len(op.payload)
                sub = subs.get(op.sid)
                if sub is not None:
                    try:
                        sub._deliver(op)
                    except Exception as exc:  # a bug in a handler must not stop the reader
                        self.client._report_error(exc)
            else:
                self._control(op)
        if n:
            stats = self.client.stats
            stats.in_msgs += n
            stats.in_bytes += size

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

    def connection_lost(self, exc: Exception | None) -> None:
        cause: BaseException | None = self.failure or exc
        err = NatsError(f"connection lost: {cause}" if cause else "connection closed by the server")
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
    client: Client, server: Server, opts: _Options, ctx: ssl.SSLContext | None
) -> tuple[_Connection, Info]:
    """Open a socket to ``server`` and run the INFO / (TLS) / CONNECT / PING-PONG handshake.

    Returns the established connection and the server's INFO. Every step is bounded
    by ``opts.connect_timeout``; on any failure the socket is aborted.

    Raises:
        TimeoutError: the handshake did not finish in time.
        TlsError: TLS was required but failed (certificate, hostname, or not offered).
        AuthorizationError: the server refused the credentials.
        OSError: the TCP connection failed.
    """
    loop = asyncio.get_running_loop()
    hostname = opts.tls_hostname or server.host
    conn = _Connection(client)
    try:
        async with asyncio.timeout(opts.connect_timeout):
            if ctx is not None and opts.tls_first:
                await loop.create_connection(
                    lambda: conn, server.host, server.port, ssl=ctx, server_hostname=hostname
                )
            else:
                await loop.create_connection(lambda: conn, server.host, server.port)
            info = await conn.info
            if ctx is None and info.tls_required:
                ctx = ssl.create_default_context()
            if ctx is not None and not opts.tls_first:
                if not (info.tls_required or info.tls_available):
                    raise TlsError(f"server {server} does not offer TLS, which was required")
                assert conn.transport is not None
                tr = await loop.start_tls(conn.transport, conn, ctx, server_hostname=hostname)
                if tr is None:
                    raise TlsError(f"TLS upgrade with {server} failed")
                conn.transport = tr
            creds = opts.credentials
            if server.user is not None or server.token is not None:
                creds = Credentials(
                    user=server.user,
                    password=server.password,
                    token=server.token,
                    nkey_seed=creds.nkey_seed,
                    jwt=creds.jwt,
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
            fields.update(creds.connect_fields(info.nonce))
            conn.write(encode_connect(fields) + PING)
            await conn.handshake
    except TimeoutError as exc:
        _abort(conn)
        if isinstance(exc, NatsError):
            raise
        raise NatsTimeoutError(
            f"connect to {server} did not complete within {opts.connect_timeout}s"
        ) from None
    except ssl.SSLError as exc:
        _abort(conn)
        raise TlsError(f"TLS handshake with {server} failed: {exc.reason or exc}") from None
    except BaseException:
        _abort(conn)
        raise
    return conn, info


def _abort(conn: _Connection) -> None:
    if conn.transport is not None:
        conn.transport.abort()
