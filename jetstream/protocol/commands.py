"""Encoders for the commands a client sends: CONNECT, PUB, HPUB, SUB, UNSUB, PING, PONG.

The ``encode_*`` functions that take a ``buf`` append to the caller's
bytearray -- the connection's write buffer -- so a burst of publishes becomes
one socket write. They do not validate: the client checks subjects, sizes and
headers before calling them, once, and may cache the result.

Wire forms (every line ends with CRLF)::

    PUB <subject> [reply] <#payload>\\r\\n<payload>\\r\\n
    HPUB <subject> [reply] <#headers> <#headers + #payload>\\r\\n<headers><payload>\\r\\n
    SUB <subject> [queue] <sid>\\r\\n
    UNSUB <sid> [max_msgs]\\r\\n
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

__all__ = [
    "PING",
    "PONG",
    "encode_connect",
    "encode_pub",
    "encode_sub",
    "encode_unsub",
]

PING: bytes = b"PING\r\n"
PONG: bytes = b"PONG\r\n"

# Payloads up to this size are formatted together with the control line (one
# bytearray append); larger ones are appended on their own so they are copied
# once, into the buffer, and never into a temporary bytes object first.
_INLINE_MAX = 1024

_encode_json = msgspec.json.Encoder().encode


def encode_connect(options: Mapping[str, object]) -> bytes:
    """Return ``CONNECT <json>\\r\\n`` with ``options`` as compact JSON.

    Raises:
        TypeError: a value has a type that cannot be encoded as JSON.
    """
    body = options if isinstance(options, dict) else dict(options)
    return b"CONNECT " + _encode_json(body) + b"\r\n"


def encode_pub(
    buf: bytearray,
    subject: str,
    payload: bytes | bytearray | memoryview,
    reply: str | None = None,
    headers: bytes | None = None,
) -> None:
    """Append a ``PUB`` (or, with ``headers``, an ``HPUB``) to ``buf``.

    Args:
        buf: the write buffer to append to.
        subject: the subject, already validated.
        payload: the message body; a memoryview must be a flat view of bytes
            (its ``len`` is the byte count sent in the control line).
        reply: the reply subject, already validated, or None (or "") for none.
        headers: a header block from ``encode_headers`` (including its final
            blank line), or None for a plain ``PUB``. An empty payload with
            headers is a valid headers-only message.
    """
    size = len(payload)
    if headers is None:
        if size <= _INLINE_MAX:
            # %b takes any buffer (bytearray, memoryview); typeshed only knows bytes.
            if not reply:
                buf += b"PUB %b %d\r\n%b\r\n" % (subject.encode(), size, payload)  # type: ignore[str-format]
            else:
                buf += b"PUB %b %b %d\r\n%b\r\n" % (  # type: ignore[str-format]
                    subject.encode(),
                    reply.encode(),
                    size,
                    payload,
                )
            return
        if not reply:
            buf += b"PUB %b %d\r\n" % (subject.encode(), size)
        else:
            buf += b"PUB %b %b %d\r\n" % (subject.encode(), reply.encode(), size)
    else:
        hdr_len = len(headers)
        if not reply:
            buf += b"HPUB %b %d %d\r\n%b" % (subject.encode(), hdr_len, hdr_len + size, headers)
        else:
            buf += b"HPUB %b %b %d %d\r\n%b" % (
                subject.encode(),
                reply.encode(),
                hdr_len,
                hdr_len + size,
                headers,
            )
    buf += payload
    buf += b"\r\n"


def encode_sub(buf: bytearray, subject: str, sid: int, queue: str | None = None) -> None:
    """Append ``SUB <subject> [queue] <sid>`` to ``buf`` (no queue group if ``queue`` is empty)."""
    if not queue:
        buf += b"SUB %b %d\r\n" % (subject.encode(), sid)
    else:
        buf += b"SUB %b %b %d\r\n" % (subject.encode(), queue.encode(), sid)


def encode_unsub(buf: bytearray, sid: int, max_msgs: int | None = None) -> None:
    """Append ``UNSUB <sid> [max_msgs]`` to ``buf``.

    With ``max_msgs`` the server removes the subscription by itself once that
    many messages have been delivered in total; without it, at once.
    """
    if max_msgs is None:
        buf += b"UNSUB %d\r\n" % sid
    else:
        buf += b"UNSUB %d %d\r\n" % (sid, max_msgs)
