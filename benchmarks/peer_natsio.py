"""natsio 1.x as a peer of the benchmarks (PyPI ``natsio``, Python 3.13 or later).

Each workload uses natsio's documented API with the same limits as the other clients:
subscriptions and consumers with the same pending limits, ``publish_async`` with the
same window, fetches of the same batch, the ordered consumer with the same pull size.
Imported only when natsio is installed (``make bench`` puts it in ``.venv-bench``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import natsio
from natsio.jetstream.entities import AckPolicy, ConsumerConfig, StorageType, StreamConfig
from natsio.kv.entities import KeyValueConfig
from natsio.objectstore.entities import ObjectStoreConfig

from benchmarks._report import start

NAME = "natsio"
BIG = 1 << 30


async def pub(url: str, n: int, payload: bytes) -> float:
    nc = await natsio.connect(url)
    try:
        publish = nc.publish
        t0 = start()
        for _ in range(n):
            await publish("bench.pub", payload)
        await nc.flush(timeout=60)
        return time.perf_counter() - t0
    finally:
        await nc.close()


async def pubsub(url: str, n: int, payload: bytes) -> float:
    sc = await natsio.connect(url)
    pc = await natsio.connect(url)
    try:
        sub = sc.subscribe("bench.ps", pending_msgs_limit=BIG, pending_bytes_limit=BIG)
        await sc.flush()

        async def reader() -> None:
            count = 0
            async for _ in sub:
                count += 1
                if count == n:
                    return

        t0 = start()
        task = asyncio.create_task(reader())
        publish = pc.publish
        for _ in range(n):
            await publish("bench.ps", payload)
        await pc.flush(timeout=60)
        await asyncio.wait_for(task, 120)
        return time.perf_counter() - t0
    finally:
        await pc.close()
        await sc.close()


@asynccontextmanager
async def responder(url: str, subject: str) -> AsyncIterator[None]:
    """natsio's echo responder: an async callback that publishes the reply."""
    svc = await natsio.connect(url)
    try:

        async def echo(msg: Any) -> None:
            await svc.publish(msg.reply, msg.data)

        svc.subscribe(subject, cb=echo)
        await svc.flush()
        yield
    finally:
        await svc.close()


async def requests(url: str, subject: str, n: int) -> list[float]:
    """``n`` sequential requests to ``subject``, each one's latency (seconds)."""
    nc = await natsio.connect(url)
    try:
        for _ in range(50):
            try:
                await nc.request(subject, b"warm", timeout=5)
                break
            except natsio.NoRespondersError:
                await asyncio.sleep(0.1)
        out = []
        for _ in range(n):
            t0 = start()
            await nc.request(subject, b"x" * 16, timeout=5)
            out.append(time.perf_counter() - t0)
        return out
    finally:
        await nc.close()


class JS:
    name = NAME

    def __init__(self, url: str, payload: bytes, window: int) -> None:
        self.url = url
        self.payload = payload
        self.window = window

    async def __aenter__(self) -> JS:
        self.nc = await natsio.connect(self.url)
        self.js = self.nc.jetstream(publish_async_max_pending=self.window)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.nc.close()

    async def fresh_stream(self, n_stored: int) -> Any:
        try:
            await self.js.delete_stream("BENCH")
        except Exception:
            pass
        stream = await self.js.create_stream(
            StreamConfig(name="BENCH", subjects=["bench"], storage=StorageType.MEMORY)
        )
        if n_stored:
            for _ in range(n_stored):
                await self.js.publish_async("bench", self.payload)
            await self.js.publish_async_complete(timeout=120)
        return stream

    async def sync_publish(self, n: int) -> float:
        await self.fresh_stream(0)
        t0 = start()
        for _ in range(n):
            await self.js.publish("bench", self.payload)
        return time.perf_counter() - t0

    async def async_publish(self, n: int) -> float:
        await self.fresh_stream(0)
        t0 = start()
        for _ in range(n):
            await self.js.publish_async("bench", self.payload)
        await self.js.publish_async_complete(timeout=120)
        return time.perf_counter() - t0

    async def fetch_ack(self, n: int, batch: int, confirmed: bool = False) -> float:
        stream = await self.fresh_stream(n)
        c = await stream.create_consumer(
            ConsumerConfig(durable_name="b", ack_policy=AckPolicy.EXPLICIT, max_ack_pending=-1)
        )
        t0 = start()
        got = 0
        while got < n:
            msgs = await c.fetch(min(batch, n - got), timeout=5)
            if confirmed:
                await asyncio.gather(*(m.ack_sync() for m in msgs))
            else:
                for m in msgs:
                    await m.ack()
            got += len(msgs)
        await self.nc.flush()
        return time.perf_counter() - t0

    async def messages_ack(self, n: int) -> float:
        stream = await self.fresh_stream(n)
        c = await stream.create_consumer(
            ConsumerConfig(durable_name="m", ack_policy=AckPolicy.EXPLICIT)
        )
        t0 = start()
        got = 0
        async with c.consume(max_messages=500) as it:
            async for m in it:
                await m.ack()
                got += 1
                if got == n:
                    break
        await self.nc.flush()
        return time.perf_counter() - t0

    async def ordered(self, n: int, pull: int) -> float:
        stream = await self.fresh_stream(n)
        t0 = start()
        oc = stream.ordered_consumer()
        got = 0
        it = oc.messages(max_messages=pull)
        async for _ in it:
            got += 1
            if got == n:
                break
        await it.aclose()
        el = time.perf_counter() - t0
        await oc.stop()
        return el

    async def ack_sync(self, n: int, concurrent: int = 0) -> float:
        stream = await self.fresh_stream(n)
        c = await stream.create_consumer(
            ConsumerConfig(durable_name="s", ack_policy=AckPolicy.EXPLICIT, max_ack_pending=n + 1)
        )
        msgs: list[Any] = []
        while len(msgs) < n:
            msgs += await c.fetch(min(500, n - len(msgs)), timeout=5)
        t0 = start()
        if concurrent:
            for i in range(0, n, concurrent):
                await asyncio.gather(*(m.ack_sync() for m in msgs[i : i + concurrent]))
        else:
            for m in msgs:
                await m.ack_sync()
        return time.perf_counter() - t0


class KV:
    name = NAME

    def __init__(self, url: str, bucket: str, value: bytes) -> None:
        self.url, self.bucket, self.value = url, bucket, value

    async def __aenter__(self) -> KV:
        self.nc = await natsio.connect(self.url)
        self.js = self.nc.jetstream()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.nc.close()

    async def fresh(self, keys: list[str]) -> Any:
        try:
            await self.js.delete_key_value(self.bucket)
        except Exception:
            pass
        kv = await self.js.create_key_value(
            KeyValueConfig(bucket=self.bucket, storage=StorageType.MEMORY)
        )
        for k in keys:
            await self.js.publish_async(f"$KV.{self.bucket}.{k}", self.value)
        await self.js.publish_async_complete(timeout=120)
        return kv

    async def put(self, keys: list[str]) -> float:
        kv = await self.fresh([])
        t0 = start()
        for k in keys:
            await kv.put(k, self.value)
        return time.perf_counter() - t0

    async def get(self, keys: list[str]) -> float:
        kv = await self.fresh(keys)
        t0 = start()
        for k in keys:
            await kv.get(k)
        return time.perf_counter() - t0

    async def watch(self, keys: list[str]) -> float:
        kv = await self.fresh(keys)
        t0 = start()
        got = 0
        async with kv.watch() as w:
            async for entry in w:
                if entry is None:
                    break
                got += 1
        assert got == len(keys), got
        return time.perf_counter() - t0


class Obj:
    name = NAME

    def __init__(self, url: str) -> None:
        self.url = url

    async def __aenter__(self) -> Obj:
        self.nc = await natsio.connect(self.url)
        self.js = self.nc.jetstream()
        self.obs = await self.js.create_object_store(ObjectStoreConfig(bucket="bench_natsio"))
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.js.delete_object_store("bench_natsio")
        await self.nc.close()

    async def put(self, data: bytes) -> float:
        t = time.perf_counter()
        await self.obs.put("obj", data)
        return time.perf_counter() - t

    async def get(self, size: int) -> float:
        t = time.perf_counter()
        got = await self.obs.get_bytes("obj")
        elapsed = time.perf_counter() - t
        assert len(got) == size
        return elapsed

    async def stream(self, size: int) -> float:
        t = time.perf_counter()
        n = 0
        async with self.obs.get("obj") as reader:
            async for chunk in reader:
                n += len(chunk)
        elapsed = time.perf_counter() - t
        assert n == size
        return elapsed
