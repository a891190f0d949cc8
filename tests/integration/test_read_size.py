"""On asyncio's socket transport the client sets how much each read asks for: READ_SIZE
while reads come back short (small, latency-bound traffic: no memory mapping per read),
BULK_READ_SIZE once a read fills it, and READ_SIZE again after the next short read."""

from __future__ import annotations

import asyncio
import fcntl
import struct
import termios

import pytest

import jetstream
from jetstream.core._connection import BULK_READ_SIZE, READ_SIZE

pytestmark = pytest.mark.asyncio


def _readable(fd: int) -> int:
    """Bytes waiting in the socket's receive buffer."""
    return int(struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0])


async def test_reads_grow_for_a_bulk_transfer_and_shrink_after(nats_url: str) -> None:
    async with jetstream.connect(nats_url) as sc, jetstream.connect(nats_url) as pc:
        conn = sc._conn
        assert conn is not None and conn.transport is not None
        transport = conn.transport
        assert transport.max_size == READ_SIZE  # type: ignore[attr-defined]

        sizes: list[int] = []
        resize = conn._resize_reads

        def spy(size: int) -> None:
            sizes.append(size)
            resize(size)

        conn._resize_reads = spy  # type: ignore[method-assign]
        sub = await sc.subscribe(
            "bulk.read", pending_msgs_limit=1 << 20, pending_bytes_limit=1 << 30
        )
        await sc.flush()

        # Stop reading while 4 MiB pile up in the socket: the first read then fills.
        transport.pause_reading()
        payload = b"x" * 1024
        for _ in range(4096):
            await pc.publish("bulk.read", payload)
        await pc.flush()
        fd = transport.get_extra_info("socket").fileno()
        async with asyncio.timeout(30):
            while _readable(fd) < READ_SIZE:
                await asyncio.sleep(0.01)
        sizes.clear()
        transport.resume_reading()
        for _ in range(4096):
            await sub.next_msg(timeout=10)
        assert max(sizes) > READ_SIZE  # a read after the first full one asked for more
        assert max(sizes) <= BULK_READ_SIZE
        assert sizes[0] == READ_SIZE

        # A short read (a lone message) brings the read size back down.
        await pc.publish("bulk.read", b"one")
        assert (await sub.next_msg(timeout=5)).data == b"one"
        assert sizes[-1] < READ_SIZE
        assert transport.max_size == READ_SIZE  # type: ignore[attr-defined]
