"""The official next-generation Python client as a peer of the benchmarks.

PyPI ``nats-core`` (module ``nats.client``, Python 3.13 or later, imports ``nkeys``),
``nats-jetstream`` (``nats.jetstream``) and ``nats-key-value`` (``nats.key_value``). Each
workload uses its documented API with the same limits as the other clients. Its ordered
consumer pulls 100 messages at a time by default; the benchmarks give it the same pull
size as the others (500, or what the workload says). It has no ``publish_async`` and no
ObjectStore: those workloads are ``None`` here, reported as n/a.
Imported only when nats-core is installed (``make bench`` puts it in ``.venv-bench``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import nats.client
import nats.jetstream
import nats.key_value
from nats.client.errors import NoRespondersError

from benchmarks._report import start

NAME = "nats-core"
BIG = 1 << 30

#: what this client cannot do (the workload is reported as n/a)
MISSING = ("publish_async", "ObjectStore")


async def pub(url: str, n: int, payload: bytes) -> float:
    nc = await nats.client.connect(url)
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
    sc = await nats.client.connect(url)
    pc = await nats.client.connect(url)
    try:
        sub = await sc.subscribe("bench.ps", max_pending_messages=BIG, max_pending_bytes=BIG)
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
    """nats-core's echo responder, as its documentation reads a subscription: a task
    iterating it, awaiting each reply's publish."""
    svc = await nats.client.connect(url)
    try:
        sub = await svc.subscribe(subject)

        async def echo() -> None:
            async for msg in sub:
                await svc.publish(msg.reply, msg.data)

        task = asyncio.create_task(echo())
        await svc.flush()
        try:
            yield
        finally:
            task.cancel()
    finally:
        await svc.close()


async def requests(url: str, subject: str, n: int) -> list[float]:
    """``n`` sequential requests to ``subject``, each one's latency (seconds)."""
    nc = await nats.client.connect(url)
    try:
        for _ in range(50):
            try:
                await nc.request(subject, b"warm", timeout=5)
                break
            except NoRespondersError:
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

    async def __aenter__(self) -> JS:
        self.nc = await nats.client.connect(self.url)
        self.js = nats.jetstream.new(self.nc)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.nc.close()

    async def fresh_stream(self, n_stored: int) -> Any:
        try:
            await self.js.delete_stream("BENCH")
        except Exception:
            pass
        stream = await self.js.create_stream(name="BENCH", subjects=["bench"], storage="memory")
        # no async publish: fill the stream with core publishes, then wait until stored
        publish = self.nc.publish
        for _ in range(n_stored):
            await publish("bench", self.payload)
        await self.nc.flush(timeout=60)
        while n_stored and (await stream.get_info()).state.messages < n_stored:
            await asyncio.sleep(0.01)
        return stream

    async def sync_publish(self, n: int) -> float:
        await self.fresh_stream(0)
        t0 = start()
        for _ in range(n):
            await self.js.publish("bench", self.payload)
        return time.perf_counter() - t0

    async def fetch_ack(self, n: int, batch: int, confirmed: bool = False) -> float:
        stream = await self.fresh_stream(n)
        c = await stream.create_consumer(
            name="b", durable_name="b", ack_policy="explicit", max_ack_pending=-1
        )
        t0 = start()
        got = 0
        while got < n:
            msgs = [m async for m in await c.fetch(max_messages=min(batch, n - got), max_wait=5)]
            if confirmed:
                await asyncio.gather(*(m.double_ack(timeout=5) for m in msgs))
            else:
                for m in msgs:
                    await m.ack()
            got += len(msgs)
        await self.nc.flush()
        return time.perf_counter() - t0

    async def messages_ack(self, n: int) -> float:
        stream = await self.fresh_stream(n)
        c = await stream.create_consumer(name="m", durable_name="m", ack_policy="explicit")
        t0 = start()
        got = 0
        it = await c.messages(max_messages=500)
        async for m in it:
            await m.ack()
            got += 1
            if got == n:
                break
        await it.stop()
        await self.nc.flush()
        return time.perf_counter() - t0

    async def ordered(self, n: int, pull: int) -> float:
        stream = await self.fresh_stream(n)
        t0 = start()
        oc = await stream.ordered_consumer()
        got = 0
        it = await oc.messages(max_messages=pull)
        async for _ in it:
            got += 1
            if got == n:
                break
        el = time.perf_counter() - t0
        await it.stop()
        await oc.close()
        return el

    async def ack_sync(self, n: int, concurrent: int = 0) -> float:
        stream = await self.fresh_stream(n)
        c = await stream.create_consumer(
            name="s", durable_name="s", ack_policy="explicit", max_ack_pending=n + 1
        )
        msgs: list[Any] = []
        while len(msgs) < n:
            batch = await c.fetch(max_messages=min(500, n - len(msgs)), max_wait=5)
            msgs += [m async for m in batch]
        t0 = start()
        if concurrent:
            for i in range(0, n, concurrent):
                await asyncio.gather(*(m.double_ack(timeout=5) for m in msgs[i : i + concurrent]))
        else:
            for m in msgs:
                await m.double_ack(timeout=5)
        return time.perf_counter() - t0


class KV:
    name = NAME

    def __init__(self, url: str, bucket: str, value: bytes) -> None:
        self.url, self.bucket, self.value = url, bucket, value

    async def __aenter__(self) -> KV:
        self.nc = await nats.client.connect(self.url)
        self.js = nats.jetstream.new(self.nc)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.nc.close()

    async def fresh(self, keys: list[str]) -> Any:
        try:
            await nats.key_value.delete_key_value(self.js, self.bucket)
        except Exception:
            pass
        kv = await nats.key_value.create_key_value(
            self.js, nats.key_value.KeyValueConfig(bucket=self.bucket, storage="memory")
        )
        publish = self.nc.publish
        for k in keys:
            await publish(f"$KV.{self.bucket}.{k}", self.value)
        await self.nc.flush(timeout=60)
        while keys and (await kv.status()).values < len(keys):
            await asyncio.sleep(0.01)
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
        w = await kv.watch_all()
        async for _ in w.values():
            got += 1
        await w.stop()
        assert got == len(keys), got
        return time.perf_counter() - t0
