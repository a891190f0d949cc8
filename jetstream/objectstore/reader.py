"""ObjectReader: an object's chunks, streamed in order, checked against its info at the end.

The chunks are read with an ordered consumer on ``$O.<bucket>.C.<nuid>`` whose pull
batch is sized so that only a few MiB are in flight, whatever the object's size.
Each chunk is hashed as it passes; once the last chunk arrives (by the info's chunk
count, or when the stream has nothing more) the size and SHA-256 are compared with
the info, and a difference raises ``DigestMismatchError`` instead of ending cleanly.
"""

from __future__ import annotations

import hashlib
import io
from typing import TYPE_CHECKING, Protocol, Self

from ..errors import DigestMismatchError, ObjectStoreError
from .meta import DEFAULT_CHUNK_SIZE, ObjectInfo, decode_digest

if TYPE_CHECKING:
    from ..ordered import OrderedConsumer, OrderedStream
    from ..stream import Stream


class _Store(Protocol):
    """What a reader uses of its bucket (``store.ObjectStore``)."""

    async def _resolve(self, name: str, show_deleted: bool) -> tuple[_Store, ObjectInfo]: ...

    async def _get_stream(self) -> Stream: ...

    def _chunk_subject(self, nuid: str) -> str: ...


__all__ = ["ObjectReader"]

#: Bytes of chunks asked for at once (the pull batch is this over the chunk size).
READ_WINDOW = 16 * 1024 * 1024


class ObjectReader:
    """The content of one object, as an async iterator of chunks (``bytes``).

    Make it with ``store.get(name)`` and use it as an async context manager::

        async with store.get("big.bin") as reader:
            print(reader.info.size)
            async for chunk in reader:
                out.write(chunk)

    Entering it looks the object up (following a link), which raises
    ``ObjectNotFoundError`` when there is none. The iteration raises
    ``DigestMismatchError`` at the end when the content does not match the
    recorded size or digest: treat everything read so far as suspect then.
    """

    def __init__(self, store: _Store, name: str, *, show_deleted: bool = False) -> None:
        self._store = store
        self._name = name
        self._show_deleted = show_deleted
        self._info: ObjectInfo | None = None
        self._oc: OrderedConsumer | None = None
        self._it: OrderedStream | None = None
        self._hash = hashlib.sha256()
        self._left = 0
        self._read = 0
        self._done = False

    @property
    def info(self) -> ObjectInfo:
        """The info of the object being read (of the link target for a link)."""
        if self._info is None:
            raise RuntimeError("the reader is not open: use 'async with store.get(name)'")
        return self._info

    @property
    def bytes_read(self) -> int:
        return self._read

    async def _open(self) -> None:
        store, info = await self._store._resolve(self._name, self._show_deleted)
        self._info = info
        self._left = info.chunks
        if info.chunks == 0 or info.deleted:
            self._left = 0
            return
        chunk = info.chunk_size or (-(-info.size // info.chunks) if info.chunks else 0)
        batch = max(2, min(500, READ_WINDOW // max(chunk or DEFAULT_CHUNK_SIZE, 1)))
        stream = await store._get_stream()
        oc = self._oc = await stream.ordered_consumer(
            filter_subjects=[store._chunk_subject(info.nuid)], inactive_threshold=30.0
        )
        consumer = oc.consumer
        if consumer is not None and consumer.cached_info.num_pending == 0:
            # The info promises chunks the stream no longer holds: waiting would hang.
            self._left = 0
            return
        self._it = oc.messages(max_messages=batch)

    async def __aenter__(self) -> Self:
        try:
            await self._open()
        except BaseException:
            await self.close()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Stop reading and remove the consumer (safe to call more than once)."""
        self._done = True
        it, self._it = self._it, None
        if it is not None:
            it.stop()
        oc, self._oc = self._oc, None
        if oc is not None:
            await oc.delete()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> bytes:
        if self._done:
            raise StopAsyncIteration
        if self._info is None:
            raise RuntimeError("the reader is not open: use 'async with store.get(name)'")
        if self._left <= 0 or self._it is None:
            self._finish()
            raise StopAsyncIteration
        msg = await self._it.__anext__()
        data = msg.data
        self._hash.update(data)
        self._read += len(data)
        self._left -= 1
        if self._left == 0 or msg.metadata.num_pending == 0:
            self._left = 0
            self._finish()
        return data

    def _finish(self) -> None:
        """Compare what was read with the info; raises DigestMismatchError."""
        if self._done:
            return
        self._done = True
        it, self._it = self._it, None
        if it is not None:
            it.stop()
        info = self.info
        if self._read != info.size:
            raise DigestMismatchError(
                f"object {info.name!r} in bucket {info.bucket!r}: read {self._read} bytes, "
                f"its info records {info.size}"
            )
        if not info.digest:
            if info.size == 0 and self._read == 0:
                return
            raise ObjectStoreError(f"object {info.name!r} has no digest to check against")
        want = decode_digest(info.digest)
        got = self._hash.digest()
        if want is None:
            raise ObjectStoreError(
                f"object {info.name!r}: cannot read its recorded digest {info.digest!r}"
            )
        if want != got:
            raise DigestMismatchError(
                f"object {info.name!r} in bucket {info.bucket!r}: SHA-256 of the content "
                f"is {got.hex()}, its info records {want.hex()} ({info.digest})"
            )

    async def read_all(self) -> bytes:
        """The rest of the content as one ``bytes``.

        Each chunk is copied into the result as it arrives and then dropped, so the
        chunks reuse the memory of the ones before them (warm in cache, no fresh pages)
        instead of all being kept until one join at the end; ``BytesIO.getvalue()``
        hands over its buffer without a further copy.
        """
        first: bytes | None = None
        out: io.BytesIO | None = None
        async for chunk in self:
            if out is not None:
                out.write(chunk)
            elif first is None:
                first = chunk  # a one-chunk object is returned as it came
            else:
                out = io.BytesIO()
                out.write(first)
                out.write(chunk)
                first = None
        if out is not None:
            return out.getvalue()
        return first if first is not None else b""
