"""Messages with numbered reply subjects, ``<reply_prefix><seq>``: the async publisher's
inbox replies (``jetstream._pubasync``), one at a time or many rows in one call.

Kept out of ``client.py`` (only the async publisher uses them); checked as
``Client._publish_to_reply`` is: the subject validated (and its ``PUB <subject> ``
prefix cached), the size against ``max_payload`` and the reconnect buffer, the data
bytes-like. The reply subject is the client's own (an inbox and a number).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..errors import ConnectionClosedError, NatsError
from ._base import FLUSH_THRESHOLD
from .client import _not_bytes

if TYPE_CHECKING:
    from .client import Client

__all__ = ["PIPELINE_WRITE", "publish_numbered", "publish_seq"]

#: payloads up to this size are formatted with their control line (one append)
_INLINE_MAX = 1024
#: ``publish_seq`` writes as soon as this much is buffered, not only at the end of the
#: loop iteration: the server starts storing the first messages of a refill of the async
#: publisher's window while the rest are still being made, instead of waiting for the
#: whole refill; client and server then work at once rather than in turn.
PIPELINE_WRITE = 8 * 1024


def publish_seq(
    nc: Client,
    subject: str,
    data: bytes | bytearray | memoryview,
    reply_prefix: bytes,
    seq: int,
    hdr: bytes | None,
) -> None:
    """Buffer one message with the reply subject ``<reply_prefix><seq>``.

    Raises:
        ConnectionClosedError, BadSubjectError, MaxPayloadError, ReconnectBufferFullError,
        TypeError: as ``publish`` (nothing is buffered).
    """
    size = len(data)
    if hdr is not None or size > _INLINE_MAX or size > nc._fast_limit:
        # A header block, a big payload, or a size to check (the limit is -1 while
        # disconnected or closed): the client's own path.
        nc._publish_to_reply(subject, data, b"%b%d" % (reply_prefix, seq), hdr)
        if len(nc._wbuf) >= PIPELINE_WRITE:
            nc._flush_now()
        return
    pre = nc._pub_prefixes.get(subject)
    if pre is None:
        pre = nc._pub_prefix(subject)
    wbuf = nc._wbuf
    mark = len(wbuf)
    # Small (the usual case): the payload formatted with its control line.
    try:
        wbuf += b"%b%b%d %d\r\n%b\r\n" % (pre, reply_prefix, seq, size, data)  # type: ignore[str-format]
    except TypeError:
        raise _not_bytes(wbuf, mark, data) from None
    nc._out_msgs += 1
    nc._out_bytes += size
    if len(wbuf) >= PIPELINE_WRITE:
        nc._flush_now()
    elif not nc._flush_scheduled:
        nc._flush_scheduled = True
        nc._loop.call_soon(nc._flush_cb)


def publish_numbered(
    nc: Client,
    items: Sequence[tuple[str, bytes | bytearray | memoryview, bytes | None, Any]],
    start: int,
    stop: int,
    reply_prefix: bytes,
    seq: int,
) -> tuple[int, NatsError | TypeError | None]:
    """Buffer ``items[start:stop]`` (subject, data, encoded header block or None, any),
    the k-th with the reply subject ``<reply_prefix><seq + k>`` (k from 1): the
    numbered inbox replies of the async publisher, many at a time.

    Checked as ``publish_seq`` is. Returns how many were buffered and the
    error that stopped the rest (an invalid subject, a payload too big, data that
    is not bytes), if any.
    """
    if nc._closed:
        return 0, ConnectionClosedError("cannot publish: the connection is closed")
    prefixes = nc._pub_prefixes
    limit = nc._fast_limit
    wbuf = nc._wbuf
    nbytes = 0
    i = start
    mark = len(wbuf)
    try:
        for i in range(start, stop):
            mark = len(wbuf)
            subject, data, hdr, _ = items[i]
            seq += 1
            pre = prefixes.get(subject)
            if pre is None:
                pre = nc._pub_prefix(subject)
            if hdr is None:
                size = len(data)
                if size > limit:
                    nc._check_room(subject, size, wbuf)
                wbuf += b"%b%b%d %d\r\n" % (pre, reply_prefix, seq, size)
            else:
                size = len(data) + len(hdr)
                if size > limit:
                    nc._check_room(subject, size, wbuf)
                wbuf += b"H%b%b%d %d %d\r\n%b" % (pre, reply_prefix, seq, len(hdr), size, hdr)
            wbuf += data
            wbuf += b"\r\n"
            nbytes += size
            if len(wbuf) >= FLUSH_THRESHOLD:
                nc._flush_now()
                wbuf = nc._wbuf
        i = stop
    except NatsError as exc:
        return _numbered_done(nc, i - start, nbytes), exc
    except TypeError:
        return _numbered_done(nc, i - start, nbytes), _not_bytes(wbuf, mark, items[i][1])
    return _numbered_done(nc, stop - start, nbytes), None


def _numbered_done(nc: Client, n: int, nbytes: int) -> int:
    nc._out_msgs += n
    nc._out_bytes += nbytes
    if nc._wbuf and not nc._flush_scheduled:
        nc._flush_scheduled = True
        nc._loop.call_soon(nc._flush_cb)
    return n
