"""The client through a misbehaving network (a proxy of our own in front of a real server)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

import jetstream
from jetstream import AckPolicy, ConsumerConfig, NoHeartbeatError, StreamConfig
from jetstream.embedded import NatsServer
from tests.faults.proxy import FaultProxy

pytestmark = pytest.mark.asyncio

FAST = {"reconnect_time_wait": 0.05, "reconnect_jitter": 0.02, "max_reconnect_attempts": -1}


@pytest_asyncio.fixture
async def proxy(nats_server: NatsServer) -> AsyncIterator[FaultProxy]:
    async with FaultProxy(nats_server.port) as p:
        yield p


async def test_one_byte_fragments_both_ways(proxy: FaultProxy) -> None:
    proxy.fragment = 1
    async with jetstream.connect(proxy.url, **FAST) as nc:
        sub = await nc.subscribe("frag.>")
        await nc.flush()
        for i in range(50):
            await nc.publish(f"frag.{i}", b"x" * i, headers={"i": str(i)})
        got = [await sub.next_msg(timeout=10) for _ in range(50)]
        assert [(m.subject, m.data, m.headers["i"]) for m in got] == [
            (f"frag.{i}", b"x" * i, str(i)) for i in range(50)
        ]
        js = nc.jetstream(timeout=10)
        s = await js.create_stream(StreamConfig(name="F", subjects=["f"]))
        for i in range(200):
            await js.publish("f", str(i).encode(), msg_id=f"m{i}")
        assert (await s.info()).state.messages == 200


async def test_publishes_through_fragments_latency_and_a_throttle(proxy: FaultProxy) -> None:
    """Scenario 2: pipelined publishes with msg ids through 1-byte pieces, 200 ms of added
    latency and a 1 MB/s throttle, then read back through the same link: exact counts."""
    proxy.fragment = 1
    proxy.latency = 0.2
    proxy.throttle = 1_000_000
    n = 300
    async with jetstream.connect(proxy.url, **FAST) as nc:
        js = nc.jetstream(timeout=30)
        s = await js.create_stream(StreamConfig(name="SLOW", subjects=["slow"]))
        futs = [await js.publish_async("slow", str(i).encode(), msg_id=f"s{i}") for i in range(n)]
        acks = await asyncio.gather(*futs)
        assert sorted(a.seq for a in acks) == list(range(1, n + 1))
        assert not any(a.duplicate for a in acks)
        # the same ids again (a retrying producer): every one a duplicate, nothing stored
        again = [await js.publish("slow", b"x", msg_id=f"s{i}") for i in range(0, n, 30)]
        assert all(a.duplicate for a in again)
        assert (await s.info()).state.messages == n
        consumer = await s.create_consumer(ConsumerConfig(ack_policy=AckPolicy.EXPLICIT))
        got: list[bytes] = []
        while len(got) < n:
            for m in await consumer.fetch(100, expires=10):
                got.append(m.data)
                await m.ack()
        assert got == [str(i).encode() for i in range(n)]


async def test_publishes_with_msg_ids_survive_connection_cuts(proxy: FaultProxy) -> None:
    """Sync publishes with msg ids while every connection is cut every ~0.3 s: the client's
    own retries store each exactly once and no error reaches the application."""
    errors: list[BaseException] = []
    async with jetstream.connect(proxy.url, error_cb=errors.append, **FAST) as nc:
        js = nc.jetstream(timeout=2)
        s = await js.create_stream(StreamConfig(name="CUT", subjects=["cut"]))
        stop = asyncio.Event()

        async def cutter() -> None:
            while True:
                await asyncio.sleep(0.3)
                if stop.is_set():
                    return
                proxy.cut()

        task = asyncio.create_task(cutter())
        n = 0
        try:
            # Publish until at least 2000 are stored and the link was cut 3 times: a fast
            # machine would otherwise finish before the third cut.
            async with asyncio.timeout(120):
                while n < 2000 or proxy.cuts < 3:
                    await js.publish("cut", str(n).encode(), msg_id=f"id-{n}", retry_attempts=20)
                    n += 1
        finally:
            stop.set()
            await task
        assert proxy.cuts >= 3
        info = await s.info()
        assert info.state.messages == n


async def test_blackhole_during_pull_consumption(proxy: FaultProxy) -> None:
    """A 3 s blackhole with 0.5 s heartbeats: a typed missed-heartbeat report, then the
    consumption goes on; nothing received before the stall is lost."""
    async with jetstream.connect(proxy.url, ping_interval=60, **FAST) as nc:
        js = nc.jetstream()
        s = await js.create_stream(StreamConfig(name="BH", subjects=["bh"]))
        c = await s.create_consumer(ConsumerConfig(durable_name="bh", ack_wait=30))
        for i in range(100):
            await js.publish("bh", str(i).encode())
        errors: list[BaseException] = []
        seen: set[int] = set()
        async with c.messages(
            max_messages=20, expires=5, heartbeat=0.5, error_cb=errors.append
        ) as it:
            async for msg in it:
                seen.add(int(msg.data))
                await msg.ack()
                if len(seen) == 50:
                    break
            proxy.blackhole = True
            loop = asyncio.get_running_loop()
            t0 = loop.time()
            async with asyncio.timeout(10):
                while not any(isinstance(e, NoHeartbeatError) for e in errors):
                    await asyncio.sleep(0.05)
            assert loop.time() - t0 < 5
            await asyncio.sleep(max(0.0, 3.0 - (loop.time() - t0)))
            proxy.blackhole = False
            for i in range(100, 150):
                await js.publish("bh", str(i).encode())
            async with asyncio.timeout(30):
                async for msg in it:
                    seen.add(int(msg.data))
                    await msg.ack()
                    if len(seen) == 150:
                        break
        assert seen == set(range(150))


async def test_blackhole_found_by_pings_then_reconnect_on_heal(proxy: FaultProxy) -> None:
    """Sockets open, nothing flows: 1 s pings find the dead link in about 3 s; after the
    heal the client is back promptly and nothing queued meanwhile is lost."""
    lost = asyncio.Event()
    async with jetstream.connect(
        proxy.url,
        ping_interval=1.0,
        max_outstanding_pings=2,
        connect_timeout=1.0,
        disconnected_cb=lost.set,
        **FAST,
    ) as nc:
        sub = await nc.subscribe("bh.core")
        await nc.flush()
        loop = asyncio.get_running_loop()
        proxy.blackhole = True
        t0 = loop.time()
        async with asyncio.timeout(10):
            await lost.wait()
        found = loop.time() - t0
        assert 1.5 <= found <= 5.0, found
        for i in range(20):  # buffered while disconnected
            await nc.publish("bh.core", str(i).encode())
        await asyncio.sleep(max(0.0, 5.0 - (loop.time() - t0)))
        proxy.blackhole = False
        healed = loop.time()
        async with asyncio.timeout(15):
            while not nc.is_connected:
                await asyncio.sleep(0.01)
        # a generous bound: the 500 ms bar is scenario 4 of make faults-report
        assert loop.time() - healed < 10.0
        got = [int((await sub.next_msg(timeout=5)).data) for _ in range(20)]
        assert got == list(range(20))


async def test_ordered_consumer_with_dropped_deliveries(proxy: FaultProxy) -> None:
    """0.5 % of the deliveries vanish on the way: the ordered consumer still yields every
    message once and in order, and the wire carries far less than 10x the messages."""
    import random

    rng = random.Random(7)
    total = 10_000
    async with jetstream.connect(proxy.url, **FAST) as nc:
        js = nc.jetstream()
        s = await js.create_stream(StreamConfig(name="DROP", subjects=["drop"]))
        futs = [await js.publish_async("drop", str(i).encode()) for i in range(total)]
        await asyncio.gather(*futs)
        proxy.drop = lambda line: b" $JS.ACK." in line and rng.random() < 0.005
        oc = await s.ordered_consumer()
        got: list[int] = []
        async with oc.messages(max_messages=200, expires=2, heartbeat=0.5) as it:
            async with asyncio.timeout(120):
                async for msg in it:
                    got.append(int(msg.data))
                    if len(got) == total:
                        break
        assert got == list(range(total))
        assert proxy.dropped > 0 and oc.resets >= 1
        assert proxy.forwarded_msgs <= 10 * total
