"""NATS over WebSocket: a layer between the socket and the NATS connection.

``_WsLink`` is the socket's ``asyncio.Protocol``. It sends the HTTP upgrade
request, reads the answer, and from then on hands the payload of the server's
binary WebSocket messages to the connection's ``data_received`` as it comes: the
NATS parser is fed exactly as from a TCP socket (a message may carry several ops,
an op may span messages). ``_WsTransport`` is what the connection writes to: each
write (the client's coalesced buffer) goes out as one binary message.

wsproto (sans-IO, like our parser) makes the upgrade request and reads its answer,
and frames what we send where frames must be masked. The server's frames are read
by ``_wsframes.FrameReader`` (sans-IO too), and ours go unmasked where the server
said it takes them so, both for speed. No task and no future per message;
``open_websocket`` awaits only the TCP (and TLS) connect, and the caller's wait for
the server's INFO covers the upgrade.

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
    Pong,
    RejectConnection,
    RejectData,
    Request,
)
from wsproto.extensions import Extension, PerMessageDeflate
from wsproto.utilities import ProtocolError as WsProtocolError

from ..errors import NatsError
from ._ws import WebSocketError
from ._wsframes import CLOSE, PING, PONG, Control, FrameError, FrameReader, frame_header

__all__ = ["open_websocket"]

#: how much of a refusal's body an error quotes
_QUOTED = 200
#: nats-server's extension: a client that sends this header (value "true") may send its
#: frames unmasked, if the server echoes it in its answer (as nats-server's own WebSocket
#: leafnode connections do). Masking is for browsers, whose scripts choose the bytes a
#: proxy's cache might misread; done in Python it took most of a 1 KiB publish's time.
#: ``ws_headers={"Nats-No-Masking": "false"}`` keeps every frame masked (for a proxy
#: that passes the header on but checks the masking of frames itself).
_NO_MASKING = b"nats-no-masking"
#: the most bytes the answer's head may take (nats-server's is a few hundred)
_MAX_HEAD = 16 * 1024
#: frames shorter than this go out in one write of header and payload joined; longer,
#: in two (a copy below glibc's mmap threshold costs less than a second send)
_JOIN_MAX = 64 * 1024
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
        if raw is None or raw.is_closing() or link.closing or ws.state is not ConnectionState.OPEN:
            return  # as a closing socket's transport does: the loss is reported
        if link.unmasked:
            header, data = frame(data, link.compressed)
            if len(data) < _JOIN_MAX:
                raw.write(header + data)  # one send, one packet: what a request waits for
            else:
                # Two writes, not one of header + data: that would copy the data (up to
                # the client's 512 KiB flush) into fresh memory, mapped and faulted in.
                raw.write(header)
                raw.write(data)
        else:
            raw.write(ws.send(BytesMessage(data=bytes(data))))

    def is_closing(self) -> bool:
        raw = self._link.raw
        return raw is None or raw.is_closing()

    @property
    def max_size(self) -> int | None:
        """The socket transport's read size, where it has one (asyncio's own does): the
        connection sizes reads over WebSocket as over TCP (``_connection.READ_SIZE``)."""
        size = getattr(self._link.raw, "max_size", None)
        return size if isinstance(size, int) else None

    @max_size.setter
    def max_size(self, size: int) -> None:
        raw: Any = self._link.raw
        if raw is not None and isinstance(getattr(raw, "max_size", None), int):
            raw.max_size = size

    def close(self) -> None:
        """A close frame (1000, normal closure), then the socket is closed."""
        link = self._link
        raw = link.raw
        if raw is None or raw.is_closing():
            return
        if link.open:
            link._send_control(CLOSE, (1000).to_bytes(2, "big"))
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
    return frame_header(first, len(data)), data


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
        self._head = b""  # the answer's head while it comes
        self._refusal: RejectConnection | None = None
        self._refused_said = False
        self._body = bytearray()
        self._closed_by: NatsError | None = None
        #: whether permessage-deflate was agreed on (after the upgrade)
        self.compressed = False
        #: whether the server takes our frames unmasked (it said so in its answer)
        self.unmasked = False
        #: the server's frames, once upgraded
        self.reader: FrameReader | None = None
        #: a close frame was sent: nothing more is
        self.closing = False

    # -- asyncio.Protocol --------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        raw = cast(asyncio.Transport, transport)
        self.raw = raw
        extensions: list[Extension] = []
        if self._compression:
            extensions.append(
                PerMessageDeflate(client_no_context_takeover=True, server_no_context_takeover=True)
            )
        headers = [(k.encode(), v.encode()) for k, v in self._headers]
        if not any(k.lower() == _NO_MASKING for k, _ in headers):  # the user's says
            headers.append((_NO_MASKING, b"true"))
        request = Request(
            host=self._host, target=self._target, extensions=extensions, extra_headers=headers
        )
        raw.write(self.ws.send(request))
        # The connection writes nothing before the server's INFO, which follows the upgrade.
        self.upper.connection_made(_WsTransport(self))

    def data_received(self, data: bytes) -> None:
        reader = self.reader
        if reader is not None:  # upgraded: the hot path
            try:
                items = reader.feed(data)
            except FrameError as exc:
                self.upper.fail(NatsError(f"{self._peer}: {exc}"))
                return
            upper = self.upper
            for item in items:
                if item.__class__ is bytes:
                    upper.data_received(item)
                else:
                    self._control(item)  # type: ignore[arg-type]
            return
        if self._refusal is not None:  # the body of a refusal
            self._handshake(data)
            return
        # The answer's head goes to wsproto alone, what follows it to the frame reader.
        head = self._head = self._head + data
        if head.startswith(b"INFO"):  # not HTTP: a NATS client port
            self.upper.fail(self._bad_answer(None))
            return
        end = head.find(b"\r\n\r\n")
        if end < 0:
            if len(head) > _MAX_HEAD:
                self.upper.fail(self._bad_answer(None))
            return
        self._handshake(head[: end + 4])
        self._after_head(head[end + 4 :])

    def _after_head(self, rest: bytes) -> None:
        """What came after the answer's head: frames, or the body of a refusal."""
        if not rest:
            return
        if self.reader is not None:
            self.data_received(rest)
        elif self._refusal is not None:
            self._handshake(rest)

    def _handshake(self, data: bytes) -> None:
        """``data`` to wsproto, which reads the upgrade's answer (or a refusal's body)."""
        try:
            self.ws.receive_data(data)
            for event in self.ws.events():
                self._event(event)
        except WsProtocolError as exc:
            self.upper.fail(self._bad_answer(exc))

    def _event(self, event: Event) -> None:
        if isinstance(event, AcceptConnection):
            self.open = True
            deflate = [e for e in event.extensions if isinstance(e, PerMessageDeflate)]
            self.compressed = bool(deflate)
            self.unmasked = any(
                k.lower() == _NO_MASKING and v.strip().lower() == b"true"
                for k, v in event.extra_headers
            )
            takeover = bool(deflate) and not deflate[0].server_no_context_takeover
            self.reader = FrameReader(inflate=self.compressed, takeover=takeover)
        elif isinstance(event, RejectConnection):
            self._refusal = event
            if not event.has_body:
                self._refused()
        elif isinstance(event, RejectData):
            if len(self._body) < _QUOTED:
                self._body += event.data
            if event.body_finished:
                self._refused()

    def _control(self, frame: Control) -> None:
        if frame.opcode == PING:
            self._send_control(PONG, frame.payload)
        elif frame.opcode == CLOSE:
            body = frame.payload
            code = int.from_bytes(body[:2], "big") if len(body) >= 2 else 1005
            reason = body[2:].decode("utf-8", "replace")
            said = f": {reason}" if reason else ""
            self._closed_by = NatsError(f"{self._peer} closed the WebSocket (status {code}{said})")
            self._send_control(CLOSE, body[:2])  # the answer: the same status
            if self.raw is not None:
                self.raw.close()

    def _send_control(self, opcode: int, payload: bytes) -> None:
        raw = self.raw
        if raw is None or raw.is_closing() or self.closing:
            return
        if opcode == CLOSE:
            self.closing = True
        if self.unmasked:
            raw.write(frame_header(0x80 | opcode, len(payload)) + payload)
        elif opcode == CLOSE:
            code = int.from_bytes(payload, "big") if len(payload) == 2 else 1000
            raw.write(self.ws.send(CloseConnection(code=code)))
        else:
            raw.write(self.ws.send(Pong(payload=payload)))

    def _refused(self) -> None:
        event = self._refusal
        assert event is not None
        if self._refused_said:
            return
        self._refused_said = True
        body = bytes(self._body[:_QUOTED]).decode("utf-8", "replace").strip()
        said = f": {body!r}" if body else ""
        self.upper.fail(
            WebSocketError(
                f"{self._peer} refused the WebSocket upgrade of {self._target!r} with HTTP "
                f"status {event.status_code}{said}"
            )
        )

    def _bad_answer(self, exc: Exception | None) -> WebSocketError:
        first = self._head[:64]
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
        if self._refusal is not None:
            self._refused()  # a refusal whose body ends with the connection
        elif not self.open and exc is None:
            sent = f" after sending {self._head[:64]!r}" if self._head else ""
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
