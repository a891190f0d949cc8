"""A small TCP proxy for fault tests: pass, delay, fragment, throttle, blackhole, cut.

It sits between a client and a real nats-server on 127.0.0.1. Every knob can be
turned while connections are open:

- ``latency``: seconds added before each forwarded read;
- ``fragment``: forward in pieces of this many bytes (1: byte by byte);
- ``throttle``: bytes per second, both directions;
- ``blackhole``: stop forwarding while keeping the sockets open;
- ``drop``: a function deciding, for each server->client MSG/HMSG op (its control line),
  whether to drop it; the stream is cut at op boundaries for that; ``drop_op`` the same,
  given the control line and the payload (headers included);
- ``cut(rst=True)``: drop every connection, with an RST (or a FIN).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections.abc import Callable
from typing import Self

__all__ = ["FaultProxy"]


class _Link:
    def __init__(
        self,
        cw: asyncio.StreamWriter,
        sw: asyncio.StreamWriter,
    ) -> None:
        self.client_writer = cw
        self.server_writer = sw
        self.tasks: list[asyncio.Task[None]] = []


class FaultProxy:
    def __init__(self, target_port: int, target_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self.latency = 0.0
        self.fragment = 0
        self.throttle = 0
        self.blackhole = False
        self.drop: Callable[[bytes], bool] | None = None
        self.drop_op: Callable[[bytes, bytes], bool] | None = None
        self.dropped = 0
        self.forwarded_msgs = 0
        self.port = 0
        self.cuts = 0
        self.connections = 0
        self._server: asyncio.Server | None = None
        self._links: set[_Link] = set()

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    async def start(self) -> Self:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            sreader, swriter = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        self.connections += 1
        link = _Link(writer, swriter)
        self._links.add(link)
        link.tasks = [
            asyncio.create_task(self._pump(reader, swriter, link)),
            asyncio.create_task(self._pump(sreader, writer, link, from_server=True)),
        ]
        with contextlib.suppress(asyncio.CancelledError):  # the proxy is closing
            await asyncio.gather(*link.tasks, return_exceptions=True)
        self._links.discard(link)
        for w in (writer, swriter):
            w.close()

    async def _pump(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        link: _Link,
        *,
        from_server: bool = False,
    ) -> None:
        pending = b""
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                if from_server and (self.drop is not None or self.drop_op is not None):
                    data, pending = self._filter(pending + data)
                    if not data:  # all dropped, or an op not whole yet
                        continue
                while self.blackhole:
                    await asyncio.sleep(0.01)
                if self.latency:
                    await asyncio.sleep(self.latency)
                step = self.fragment or len(data)
                for i in range(0, len(data), step):
                    piece = data[i : i + step]
                    writer.write(piece)
                    await writer.drain()
                    if self.throttle:
                        await asyncio.sleep(len(piece) / self.throttle)
        except (ConnectionError, OSError):
            pass
        finally:
            for t in link.tasks:
                if t is not asyncio.current_task():
                    t.cancel()

    def _filter(self, buf: bytes) -> tuple[bytes, bytes]:
        """Split ``buf`` into whole ops, drop the MSG/HMSG ops ``drop`` picks; return what
        to forward and the incomplete tail."""
        out = bytearray()
        pos = 0
        while True:
            end = buf.find(b"\r\n", pos)
            if end < 0:
                break
            line = buf[pos:end]
            stop = end + 2
            if line.startswith((b"MSG ", b"HMSG ")):
                stop = end + 2 + int(line.split()[-1]) + 2
                if stop > len(buf):
                    break
                if (self.drop is not None and self.drop(line)) or (
                    self.drop_op is not None and self.drop_op(line, buf[end + 2 : stop - 2])
                ):
                    self.dropped += 1
                    pos = stop
                    continue
                self.forwarded_msgs += 1
            out += buf[pos:stop]
            pos = stop
        return bytes(out), buf[pos:]

    def cut(self, *, rst: bool = True) -> int:
        """Drop every open connection (RST by default); returns how many."""
        n = 0
        for link in list(self._links):
            for w in (link.client_writer, link.server_writer):
                sock = w.get_extra_info("socket")
                if rst and sock is not None:
                    with contextlib.suppress(OSError):
                        sock.setsockopt(
                            socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                        )
                w.transport.abort() if rst else w.close()
            for t in link.tasks:
                t.cancel()
            n += 1
        self.cuts += n
        return n

    async def close(self) -> None:
        self.cut()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        await asyncio.sleep(0)

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
