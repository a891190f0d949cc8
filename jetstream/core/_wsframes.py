"""WebSocket frames from the server, without I/O: bytes in, payloads and control frames out.

After the upgrade (wsproto's part), the server's frames are read here rather than by
wsproto's frame parser, for the hot path of a busy subscription: a read holding whole
unfragmented binary frames costs a few header reads and one slice a frame, and the
payloads of one read go to the NATS parser as one ``bytes``. Server frames are never
masked (RFC 6455 5.1). Compressed messages (permessage-deflate, RSV1 on their first
frame) are inflated whole when their last frame is in; control frames (ping, pong,
close) are handed out as ``Control``.
"""

from __future__ import annotations

import zlib
from typing import NamedTuple

from ..errors import NatsError

__all__ = ["CLOSE", "PING", "PONG", "Control", "FrameError", "FrameReader", "frame_header"]

CONTINUATION, TEXT, BINARY, CLOSE, PING, PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA
_DATA = frozenset({CONTINUATION, TEXT, BINARY})
_CONTROL = frozenset({CLOSE, PING, PONG})
#: what a compressed message's deflate stream lacks at its end (RFC 7692 7.2.2)
_TAIL = b"\x00\x00\xff\xff"


def frame_header(first: int, n: int) -> bytes:
    """The header of an unmasked frame of ``n`` payload bytes; ``first`` is its first
    byte (FIN 0x80, RSV1 0x40, the opcode)."""
    if n < 126:
        return bytes((first, n))
    if n < 65536:
        return bytes((first, 126)) + n.to_bytes(2, "big")
    return bytes((first, 127)) + n.to_bytes(8, "big")


class FrameError(NatsError):
    """The server sent something that breaks the WebSocket framing."""


class Control(NamedTuple):
    """A control frame: its opcode (``CLOSE``, ``PING``, ``PONG``) and payload."""

    opcode: int
    payload: bytes


class FrameReader:
    """Reads the server's frames. ``feed`` returns what the bytes completed, in order:
    ``bytes`` (payload for the NATS parser) and ``Control`` frames.

    Args:
        inflate: permessage-deflate was agreed on.
        takeover: the server keeps its deflate context from message to message (it did
            not agree to ``server_no_context_takeover``).
        max_message: the most bytes a compressed message may inflate to.
    """

    def __init__(self, *, inflate: bool, takeover: bool, max_message: int = 64 << 20) -> None:
        self._inflate = inflate
        self._takeover = takeover
        self._max = max_message
        self._head = b""  # a frame header begun in an earlier feed
        self._rem = 0  # payload bytes of the current frame still to come
        self._opcode = 0  # of the current frame
        self._fin = True  # of the current frame
        self._message = True  # the last data frame ended its message
        self._compressed = False  # the current message is compressed
        self._parts: list[bytes] = []  # its compressed payload so far
        self._control: list[bytes] = []  # the current control frame's payload so far
        self._inflater: zlib._Decompress | None = None

    def feed(self, data: bytes) -> list[bytes | Control]:
        """Read ``data``; the payloads and control frames it completed.

        Raises:
            FrameError: a masked, reserved, oversized or out-of-order frame, or a
                compressed message that does not inflate.
        """
        if self._head:
            data = self._head + data
            self._head = b""
        out: list[bytes | Control] = []
        payload: list[bytes] = []  # data payloads of this feed, handed out joined
        n = len(data)
        pos = 0
        while pos < n:
            rem = self._rem
            if rem:
                end = pos + rem if pos + rem < n else n
                chunk = data[pos:end] if pos or end != n else data
                self._rem = rem - (end - pos)
                pos = end
                if self._opcode in _CONTROL:
                    self._control.append(chunk)
                elif self._compressed:
                    self._parts.append(chunk)
                else:
                    payload.append(chunk)
                if not self._rem:
                    self._frame_end(out, payload)
                continue
            pos = self._header(data, pos, n)
            if pos < 0:
                break
            if not self._rem:
                self._frame_end(out, payload)
        if payload:
            out.append(payload[0] if len(payload) == 1 else b"".join(payload))
        return out

    def _header(self, data: bytes, pos: int, n: int) -> int:
        """Read the frame header at ``pos``; where its payload starts, or -1 (the rest
        of ``data`` is a header begun, kept for the next feed)."""
        if n - pos < 2:
            self._head = data[pos:]
            return -1
        b0 = data[pos]
        b1 = data[pos + 1]
        length = b1 & 0x7F
        size = 2 if length < 126 else 4 if length == 126 else 10
        if n - pos < size:
            self._head = data[pos:]
            return -1
        if size > 2:
            length = int.from_bytes(data[pos + 2 : pos + size], "big")
        if b1 & 0x80:
            raise FrameError("the server sent a masked frame")
        opcode = b0 & 0x0F
        fin = bool(b0 & 0x80)
        rsv1 = bool(b0 & 0x40)
        if b0 & 0x30 or (rsv1 and (not self._inflate or opcode not in (TEXT, BINARY))):
            raise FrameError(f"the server set reserved bits in a frame (0x{b0:02x})")
        if opcode in _CONTROL:
            if not fin or length > 125:
                raise FrameError("the server fragmented a control frame or made it too long")
        elif opcode == CONTINUATION:
            if self._message:
                raise FrameError("the server continued a message it had not begun")
        elif opcode in _DATA:
            if not self._message:
                raise FrameError("the server began a message before ending the last one")
            self._compressed = rsv1
        else:
            raise FrameError(f"the server sent a frame of unknown opcode {opcode}")
        if opcode in _DATA:
            self._fin = fin
        self._opcode = opcode
        self._rem = length
        return pos + size

    def _frame_end(self, out: list[bytes | Control], payload: list[bytes]) -> None:
        opcode = self._opcode
        if opcode in _CONTROL:
            body = b"".join(self._control)
            self._control.clear()
            if payload:  # keep the order: what came before the control frame first
                out.append(payload[0] if len(payload) == 1 else b"".join(payload))
                payload.clear()
            out.append(Control(opcode, body))
            return
        self._message = self._fin
        if self._compressed and self._fin:
            payload.append(self._inflated())

    def _inflated(self) -> bytes:
        data = b"".join(self._parts) + _TAIL
        self._parts.clear()
        self._compressed = False
        inflater = self._inflater
        if inflater is None or not self._takeover:
            inflater = zlib.decompressobj(-zlib.MAX_WBITS)
            self._inflater = inflater
        try:
            out = inflater.decompress(data, self._max)
        except zlib.error as exc:
            raise FrameError(
                f"a compressed message from the server does not inflate: {exc}"
            ) from None
        if inflater.unconsumed_tail:
            raise FrameError(
                f"a compressed message from the server inflates past {self._max} bytes"
            )
        return out
