"""What ``ObjectStore.put`` accepts (``ObjectData``), cut into chunks of one size."""

from __future__ import annotations

import inspect
import os
from collections.abc import AsyncIterable, AsyncIterator, Iterable
from typing import IO, Any

__all__ = ["ObjectData"]

#: What ``put`` accepts: bytes, a binary file object, a path, or (async) iterables of bytes.
ObjectData = (
    bytes
    | bytearray
    | memoryview
    | os.PathLike[str]
    | IO[bytes]
    | AsyncIterable[bytes | bytearray | memoryview]
    | Iterable[bytes | bytearray | memoryview]
)


async def _chunks(data: ObjectData, size: int) -> AsyncIterator[bytes | bytearray | memoryview]:
    """Cut any accepted input into chunks of ``size`` bytes (the last one shorter)."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        view = memoryview(data).cast("B")
        for i in range(0, len(view), size):
            yield view[i : i + size]
        return
    if isinstance(data, str):
        raise TypeError(
            "put got a str: pass a pathlib.Path (or use put_file) for a file, "
            "or encode text to bytes"
        )
    if isinstance(data, os.PathLike):
        with open(data, "rb", buffering=0) as f:  # noqa: ASYNC230 (see get_file)
            while chunk := _read_full(f, size):
                yield chunk
        return
    read = getattr(data, "read", None)
    if read is not None:
        while True:
            chunk = read(size)
            if inspect.isawaitable(chunk):
                chunk = await chunk
            if not chunk:
                return
            if len(chunk) < size:
                # A short read is not the end of a pipe or socket: fill the chunk.
                parts = [chunk]
                got = len(chunk)
                while got < size:
                    more = read(size - got)
                    if inspect.isawaitable(more):
                        more = await more
                    if not more:
                        break
                    parts.append(more)
                    got += len(more)
                chunk = b"".join(parts)
                yield chunk
                if got < size:
                    return
                continue
            yield chunk
    if isinstance(data, AsyncIterable):
        pieces: AsyncIterable[Any] = data
    elif isinstance(data, Iterable):
        pieces = _aiter_sync(data)
    else:
        raise TypeError(
            f"cannot put a {type(data).__name__}: give bytes, a file, a path or an iterable"
        )
    buf = bytearray()
    async for piece in pieces:
        if not buf and len(piece) == size:
            yield bytes(piece)
            continue
        buf += piece
        while len(buf) >= size:
            yield bytes(buf[:size])
            del buf[:size]
    if buf:
        yield bytes(buf)


def _read_full(f: Any, size: int) -> bytes:
    chunk: bytes = f.read(size)
    if chunk and len(chunk) < size:
        parts = [chunk]
        got = len(chunk)
        while got < size:
            more = f.read(size - got)
            if not more:
                break
            parts.append(more)
            got += len(more)
        chunk = b"".join(parts)
    return chunk


async def _aiter_sync(items: Iterable[Any]) -> AsyncIterator[Any]:
    for item in items:
        yield item
