"""NATS over WebSocket: a layer between the socket and the NATS connection.

``_WsLink`` is the socket's ``asyncio.Protocol``. It sends the HTTP upgrade
request, reads the answer, and from then on hands the payload of every binary
WebSocket message to the connection's ``data_received`` as it comes: the NATS
parser is fed exactly as from a TCP socket (a message may carry several ops, an
op may span messages). ``_WsTransport`` is what the connection writes to: each
write (the client's coalesced buffer) goes out as one binary message. The codec
is wsproto's, sans-IO like our parser: bytes in, events out; events in, bytes
out. No task and no future per message; ``open_websocket`` awaits only the TCP
(and TLS) connect, and the caller's wait for the server's INFO covers the upgrade.

This module needs wsproto (the ``ws`` extra); ``_ws.py`` holds what is known without it.
"""

from __future__ import annotations

import asyncio
import ssl
import zlib
from collections.abc import Sequence
from typing import Any, Protocol, cast

from wsproto import ConnectionType, WSConnection
from wsproto.connection import ConnectionState
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Event,
    Ping,
    RejectConnection,
    RejectData,
    Request,
    TextMessage,
)
from wsproto.extensions import Extension, PerMessageDeflate
from wsproto.utilities import ProtocolError as WsProtocolError

from ..errors import NatsError
from ._ws import WebSocketError

__all__ = ["open_websocket"]

#: bytes asked for per read of the socket (as ``_connection.READ_SIZE``: below glibc's
#: mmap threshold, so that a read buffer comes from the heap)
READ_SIZE = 64 * 1024
#: how much of a refusal's body an error quotes
_QUOTED = 200
#: nats-server's extension: a client that sends this header (value "true") may send its
#: frames unmasked, if the server echoes it in its answer (as nats-server's own WebSocket
#: leafnode connections do). Masking is for browsers, whose scripts choose the bytes a
#: proxy's cache might misread; done in Python it took most of a 1 KiB publish's time.
_NO_MASKING = b"nats-no-masking"
#: writes this short or shorter go uncompressed (a PING, an ack), as nats-server's do
_COMPRESS_MIN = 64
#: the ports an HTTP Host header leaves out
_DEFAULT_PORTS = {"ws": 80, "wss": 443}


class Upper(Protocol):
    """The NATS connection above the link (``_connection._Connection``)."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None: ...

    def data_received(self, data: bytes) -> None: ...

    def connection_lost(self, exc: Exception | None) -> None: ...

    def pause_writing(self) -> None: ...

    def resume_writing(self) -> None: ...

    def fail(self, exc: BaseException) -> None: ...


class _WsTransport(asyncio.Transport):
    """The transport the NATS connection writes to: one binary message a write."""

    def __init__(self, link: _WsLink) -> None:
        super().__init__()
        self._link = link

    def write(self, data: bytes | bytearray | memoryview) -> None:
        link = self._link
        ws = link.ws
        raw = link.raw
        if raw is None or raw.is_closing() or ws.state is not ConnectionState.OPEN:
            return  # as a closing socket's transport does: the loss is reported
        if link.unmasked:
            # Two writes, not one of header + data: that would copy the data (up to the
            # client's 512 KiB flush) into fresh memory, mapped and faulted in each time.
            header, data = frame(data, link.compressed)
            raw.write(header)
            raw.write(data)
        else:
            raw.write(ws.send(BytesMessage(data=bytes(data))))

    def is_closing(self) -> bool:
        raw = self._link.raw
        return raw is None or raw.is_closing()

    def close(self) -> None:
        """A close frame (1000, normal closure), then the socket is closed."""
        link = self._link
        raw = link.raw
        if raw is None or raw.is_closing():
            return
        if link.ws.state is ConnectionState.OPEN:
            raw.write(link.ws.send(CloseConnection(code=1000)))
        raw.close()

    def abort(self) -> None:
        raw = self._link.raw
        if raw is not None:
            raw.abort()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        raw = self._link.raw
        return default if raw is None else raw.get_extra_info(name, default)

    def get_write_buffer_size(self) -> int:
        raw = self._link.raw
        return 0 if raw is None else raw.get_write_buffer_size()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        raw = self._link.raw
        if raw is not None:
            raw.set_write_buffer_limits(high, low)

    def pause_reading(self) -> None:
        raw = self._link.raw
        if raw is not None:
            raw.pause_reading()

    def resume_reading(self) -> None:
        raw = self._link.raw
        if raw is not None:
            raw.resume_reading()

    def is_reading(self) -> bool:
        raw = self._link.raw
        return raw is not None and raw.is_reading()


def frame(
    data: bytes | bytearray | memoryview, compress: bool
) -> tuple[bytes, bytes | bytearray | memoryview]:
    """``data`` as one unmasked binary frame (FIN set): its header and its payload.
    With ``compress``, the payload is deflated as permessage-deflate without context
    takeover wants it (RSV1 set, a sync flush whose empty block's 4 bytes are left
    off), unless it is too short to gain."""
    first = 0x82
    if compress and len(data) > _COMPRESS_MIN:
        deflate = zlib.compressobj(wbits=-zlib.MAX_WBITS)
        data = (deflate.compress(data) + deflate.flush(zlib.Z_SYNC_FLUSH))[:-4]
        first = 0xC2
    n = len(data)
    if n < 126:
        header = bytes((first, n))
    elif n < 65536:
        header = bytes((first, 126)) + n.to_bytes(2, "big")
    else:
        header = bytes((first, 127)) + n.to_bytes(8, "big")
    return header, data


class _WsLink(asyncio.Protocol):
    """The socket's protocol: the HTTP upgrade, then WebSocket frames to and from ``upper``."""

    def __init__(
        self,
        upper: Upper,
        *,
        host: str,
        target: str,
        headers: Sequence[tuple[str, str]],
        compression: bool,
        peer: str,
    ) -> None:
        self.upper = upper
        self.ws = WSConnection(ConnectionType.CLIENT)
        self.raw: asyncio.Transport | None = None
        self.open = False
        self._host = host
        self._target = target
        self._headers = headers
        self._compression = compression
        self._peer = peer
        self._first = b""  # the first bytes of the answer, for errors
        self._refusal: RejectConnection | None = None
        self._body = bytearray()
        self._closed_by: NatsError | None = None
        #: whether permessage-deflate was agreed on (after the upgrade)
        self.compressed = False
        #: whether the server takes our frames unmasked (it said so in its answer)
        self.unmasked = False

    # -- asyncio.Protocol --------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        raw = cast(asyncio.Transport, transport)
        self.raw = raw
        if isinstance(getattr(raw, "max_size", None), int):
            raw.max_size = READ_SIZE  # type: ignore[attr-defined]
        extensions: list[Extension] = []
        if self._compression:
            extensions.append(
                PerMessageDeflate(client_no_context_takeover=True, server_no_context_takeover=True)
            )
        request = Request(
            host=self._host,
            target=self._target,
            extensions=extensions,
            extra_headers=[
                *((k.encode(), v.encode()) for k, v in self._headers),
                (_NO_MASKING, b"true"),
            ],
        )
        raw.write(self.ws.send(request))
        # The connection writes nothing before the server's INFO, which follows the upgrade.
        self.upper.connection_made(_WsTransport(self))

    def data_received(self, data: bytes) -> None:
        ws = self.ws
        if not self.open and len(self._first) < 64:
            self._first += data[: 64 - len(self._first)]
            if self._first.startswith(b"INFO"):  # not HTTP: a NATS client port
                self.upper.fail(self._bad_answer(None))
                return
        try:
            ws.receive_data(data)
            for event in ws.events():
                if event.__class__ is BytesMessage:
                    # bytes: the parser's fast path (it would copy a bytearray itself)
                    self.upper.data_received(bytes(event.data))
                else:
                    self._event(event)
        except WsProtocolError as exc:
            self.upper.fail(self._bad_answer(exc) if not self.open else NatsError(str(exc)))

    def _event(self, event: Event) -> None:
        if isinstance(event, AcceptConnection):
            self.open = True
            self.compressed = any(e.name == "permessage-deflate" for e in event.extensions)
            self.unmasked = any(
                k.lower() == _NO_MASKING and v.strip().lower() == b"true"
                for k, v in event.extra_headers
            )
        elif isinstance(event, TextMessage):  # NATS servers send binary only; taken alike
            self.upper.data_received(event.data.encode())
        elif isinstance(event, Ping):
            self._send(event.response())
        elif isinstance(event, CloseConnection):
            reason = f": {event.reason}" if event.reason else ""
            self._closed_by = NatsError(
                f"{self._peer} closed the WebSocket (status {event.code}{reason})"
            )
            if self.ws.state is ConnectionState.REMOTE_CLOSING:
                self._send(event.response())
            if self.raw is not None:
                self.raw.close()
        elif isinstance(event, RejectConnection):
            self._refusal = event
            if not event.has_body:
                self._refused()
        elif isinstance(event, RejectData):
            if len(self._body) < _QUOTED:
                self._body += event.data
            if event.body_finished:
                self._refused()

    def _send(self, event: Event) -> None:
        raw = self.raw
        if raw is not None and not raw.is_closing():
            raw.write(self.ws.send(event))

    def _refused(self) -> None:
        event = self._refusal
        assert event is not None
        body = bytes(self._body[:_QUOTED]).decode("utf-8", "replace").strip()
        said = f": {body!r}" if body else ""
        self.upper.fail(
            WebSocketError(
                f"{self._peer} refused the WebSocket upgrade of {self._target!r} with HTTP "
                f"status {event.status_code}{said}"
            )
        )

    def _bad_answer(self, exc: Exception | None) -> WebSocketError:
        first = self._first
        if first.startswith(b"INFO"):
            return WebSocketError(
                f"{self._peer} is not a WebSocket listener: it answered the upgrade with "
                f"the NATS protocol's INFO (a client port: reach it with nats:// or tls://, "
                f"or ws:// the port of the server's websocket {{}} block)"
            )
        return WebSocketError(
            f"{self._peer} did not answer the WebSocket upgrade as a WebSocket server "
            f"({exc}); it sent {first!r}"
        )

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.open and exc is None and self._refusal is None:
            sent = f" after sending {self._first!r}" if self._first else ""
            self.upper.fail(
                WebSocketError(
                    f"{self._peer} closed the connection during the WebSocket upgrade{sent}"
                )
            )
        self.upper.connection_lost(exc if exc is not None else self._closed_by)

    def pause_writing(self) -> None:
        self.upper.pause_writing()

    def resume_writing(self) -> None:
        self.upper.resume_writing()


async def open_websocket(
    upper: Upper,
    *,
    scheme: str,
    host: str,
    port: int,
    path: str,
    ctx: ssl.SSLContext | None,
    server_hostname: str,
    headers: Sequence[tuple[str, str]],
    compression: bool,
    peer: str,
) -> None:
    """Connect to ``host:port`` (with TLS under ``ctx``) and send the upgrade request
    for ``path``. ``upper`` is made with its transport at once; the upgrade's answer
    comes before the server's INFO, which ``upper`` waits for: a refused or failed
    upgrade ends that wait with ``WebSocketError``.

    Raises:
        OSError: the TCP connection failed.
        ssl.SSLError: the TLS handshake failed.
    """
    loop = asyncio.get_running_loop()
    shown = f"[{host}]" if ":" in host else host
    host_header = shown if _DEFAULT_PORTS.get(scheme) == port else f"{shown}:{port}"
    link = _WsLink(
        upper,
        host=host_header,
        target=path or "/",
        headers=headers,
        compression=compression,
        peer=peer,
    )
    if ctx is not None:
        await loop.create_connection(
            lambda: link, host, port, ssl=ctx, server_hostname=server_hostname
        )
    else:
        await loop.create_connection(lambda: link, host, port)
