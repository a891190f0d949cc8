"""Messages with numbered reply subjects, ``<reply_prefix><seq>``: the async publisher's
inbox replies (``jetstream._pubasync``), one at a time or many rows in one call.

Methods of ``Client`` (kept out of ``client.py``: only the async publisher uses them),
checked as ``Client.write_publish`` is: the subject validated (and its ``PUB <subject> ``
prefix cached), the size against ``max_payload`` and the reconnect buffer, the data
bytes-like. The reply subject is the client's own (an inbox and a number).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import ConnectionClosedError, NatsError
from ._base import FLUSH_THRESHOLD
from ._contract import Contract, _not_bytes

__all__ = ["PIPELINE_WRITE", "NumberedWrites"]

#: payloads up to this size are formatted with their control line (one append)
_INLINE_MAX = 1024
#: ``publish_seq`` writes as soon as this much is buffered, not only at the end of the
#: loop iteration: the server starts storing the first messages of a refill of the async
#: publisher's window while the rest are still being made, instead of waiting for the
#: whole refill; client and server then work at once rather than in turn.
PIPELINE_WRITE = 8 * 1024


class NumberedWrites(Contract):
    """The async publisher's writes (see the module's docstring)."""

    def publish_seq(
        self,
        subject: str,
        data: bytes | bytearray | memoryview,
        reply_prefix: bytes,
        seq: int,
        hdr: bytes | None,
    ) -> None:
        """Buffer one message with the reply subject ``<reply_prefix><seq>``.

        Raises:
            ConnectionClosedError: the client is closed (nothing is buffered).
            BadSubjectError: the subject is invalid (nothing is buffered).
            MaxPayloadError: too big for the server (nothing is buffered).
            ReconnectBufferFullError: disconnected, and no room is left to keep it.
            TypeError: ``data`` is not bytes-like (nothing is buffered).
        """
        size = len(data)
        if hdr is not None or size > _INLINE_MAX or size > self._fast_limit:
            # A header block, a big payload, or a size to check (the limit is -1 while
            # disconnected or closed): the client's own path.
            self.write_publish(subject, data, b"%b%d" % (reply_prefix, seq), hdr)
            if len(self._wbuf) >= PIPELINE_WRITE:
                self.flush_now()
            return
        pre = self._pub_prefixes.get(subject)
        if pre is None:
            pre = self._pub_prefix(subject)
        wbuf = self._wbuf
        mark = len(wbuf)
        # Small (the usual case): the payload formatted with its control line.
        try:
            wbuf += b"%b%b%d %d\r\n%b\r\n" % (pre, reply_prefix, seq, size, data)  # type: ignore[str-format]
        except TypeError:
            raise _not_bytes(wbuf, mark, data) from None
        self._written(1, size, PIPELINE_WRITE)

    def publish_numbered(
        self,
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
        if self._closed:
            return 0, ConnectionClosedError("cannot publish: the connection is closed")
        prefixes = self._pub_prefixes
        limit = self._fast_limit
        wbuf = self._wbuf
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
                    pre = self._pub_prefix(subject)
                if hdr is None:
                    size = len(data)
                    if size > limit:
                        self._check_room(subject, size, wbuf)
                    wbuf += b"%b%b%d %d\r\n" % (pre, reply_prefix, seq, size)
                else:
                    size = len(data) + len(hdr)
                    if size > limit:
                        self._check_room(subject, size, wbuf)
                    wbuf += b"H%b%b%d %d %d\r\n%b" % (pre, reply_prefix, seq, len(hdr), size, hdr)
                wbuf += data
                wbuf += b"\r\n"
                nbytes += size
                if len(wbuf) >= FLUSH_THRESHOLD:
                    self.flush_now()
                    wbuf = self._wbuf
            i = stop
        except NatsError as exc:
            self._written(i - start, nbytes)
            return i - start, exc
        except TypeError:
            self._written(i - start, nbytes)
            return i - start, _not_bytes(wbuf, mark, items[i][1])
        self._written(stop - start, nbytes)
        return stop - start, None
