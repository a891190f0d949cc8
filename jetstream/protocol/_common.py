"""The parser's helpers: error quoting and header status (its batch paths use these
too), the errors of the op-by-op loop (made out of it: the loop only raises them), the
finding of a run of one control line, and the joining of a payload that came in pieces."""

from __future__ import annotations

import re

from ..errors import ProtocolError

__all__ = [
    "CRLF",
    "HDR_PLAIN",
    "gather",
    "headers_too_big",
    "line_too_long",
    "no_crlf",
    "quote",
    "run_length",
    "run_pattern",
    "status_of",
    "too_big",
    "wrong_fields",
]

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


def line_too_long(data: bytes, pos: int, end: int, max_line: int) -> ProtocolError:
    return ProtocolError(
        f"expected a control line of at most {max_line} bytes, "
        f"got {end - pos} bytes: {quote(data[pos:end])}"
    )


def wrong_fields(op: str, nargs: int, line: bytes) -> ProtocolError:
    form = (
        "MSG <subject> <sid> [reply] <size>"
        if op == "MSG"
        else "HMSG <subject> <sid> [reply] <header size> <total size>"
    )
    return ProtocolError(f"expected '{form}', got {nargs} field(s): {quote(line)}")


def too_big(op: str, max_payload: int, size: int, line: bytes) -> ProtocolError:
    article = "a" if op == "MSG" else "an"
    return ProtocolError(
        f"expected {article} {op} of at most max_payload={max_payload} bytes, "
        f"got {size}: {quote(line)}"
    )


def headers_too_big(hdr_len: int, size: int, line: bytes) -> ProtocolError:
    return ProtocolError(
        f"expected an HMSG header size <= total size, got {hdr_len} > {size}: {quote(line)}"
    )


def no_crlf(what: str, line: bytes, trailer: bytes) -> ProtocolError:
    return ProtocolError(f"expected CRLF after the {what} of {quote(line)}, got {quote(trailer)}")


def gather(parts: list[bytes | bytearray | memoryview], start: int, stop: int) -> bytes:
    """Bytes ``start:stop`` of the concatenation of ``parts``, copied once."""
    out: list[bytes | bytearray | memoryview] = []
    offset = 0
    for part in parts:
        end = offset + len(part)
        if end > start and offset < stop:
            lo = start - offset if start > offset else 0
            hi = stop - offset if stop < end else len(part)
            out.append(memoryview(part)[lo:hi])
        offset = end
        if offset >= stop:
            break
    return b"".join(out)


def run_pattern(sep: bytes, size: int) -> re.Pattern[bytes]:
    """``sep`` then ``size`` bytes of anything, as many times in a row as they come."""
    return re.compile(b"(?:%s.{%d})*+" % (re.escape(sep), size), re.DOTALL)


def run_length(data: bytes, first: int, step: int, sep: bytes, rx: re.Pattern[bytes] | None) -> int:
    """How many whole ops of one control line follow each other in ``data``.

    The first op's CRLF is at ``first``; ``sep`` is CRLF and the control line, and
    ``step`` the length of an op. Each op whose CRLF is followed by the line counts,
    and so does the last one when its CRLF is there. ``rx`` (``run_pattern``: sep
    and a payload's worth of anything) finds the run in one call to the regular
    expression engine; without it, a ``startswith`` per op does. Zero when the first
    op ends past ``data`` (a feed cut inside its payload): the loop waits for it.
    """
    if first > len(data):
        return 0  # the pattern would match at the end of data, before ``first``: -1 ops
    if rx is None:
        crlf = first
        while data.startswith(sep, crlf):
            crlf += step
    else:
        found = rx.match(data, first)
        crlf = found.end() if found is not None else first
    k = (crlf - first) // step
    if crlf + 2 <= len(data) and data[crlf] == 13 and data[crlf + 1] == 10:
        k += 1  # and the run's last op (a bad one: the loop in ``Parser._scan`` reports)
    return k
