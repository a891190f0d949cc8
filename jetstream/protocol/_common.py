"""What the op-by-op parser and its batch paths share: error quoting, header status."""

from __future__ import annotations

from ..errors import ProtocolError

__all__ = ["CRLF", "HDR_PLAIN", "quote", "status_of"]

CRLF = b"\r\n"
HDR_PLAIN = b"NATS/1.0\r\n"  # header block with no inline status: the common case
_SNIP = 64  # bytes of offending input quoted in error messages


def quote(data: bytes | bytearray | memoryview) -> str:
    """Quote at most ``_SNIP`` bytes of ``data`` for an error message."""
    if len(data) > _SNIP:
        return repr(bytes(data[:_SNIP])) + f"... ({len(data)} bytes)"
    return repr(bytes(data))


def status_of(block: bytes) -> int:
    """The status code on the first line of a header block (``NATS/1.0 503``), or 0.

    Raises ProtocolError when the block does not start with ``NATS/1.0`` or the
    code is not three digits.
    """
    if not block.startswith(b"NATS/1.0"):
        raise ProtocolError(
            f"expected a header block starting with b'NATS/1.0', got {quote(block)}"
        )
    eol = block.find(CRLF)
    line = block[8:] if eol < 0 else block[8:eol]
    if not line or line.isspace():
        return 0
    code = line.split(None, 1)[0]
    if line[0] not in b" \t" or len(code) != 3 or not code.isdigit():
        raise ProtocolError(
            "expected b'NATS/1.0' optionally followed by a 3-digit status code, "
            f"got {quote(block[: eol if eol >= 0 else len(block)])}"
        )
    return int(code)
