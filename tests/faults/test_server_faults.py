"""A real server frozen (SIGSTOP) or restarted under a consuming client."""

from __future__ import annotations

import asyncio

import pytest

import jetstream
from jetstream import ConsumerConfig, JsMsg, NoHeartbeatError, StreamConfig
from jetstream.embedded import NatsServer

pytestmark = pytest.mark.asyncio


async def test_consume_resumes_after_a_frozen_server(nats_server: NatsServer) -> None:
    """SIGSTOP for several seconds during consume(): missed heartbeats are reported, and
    consumption picks up promptly after SIGCONT without losing anything."""
    errors: list[BaseException] = []
    async with jetstream.connect(
        nats_server.url, ping_interval=60, reconnect_time_wait=0.1, max_reconnect_attempts=-1
    ) as nc:
        js = nc.jetstream()
        s = await js.create_stream(StreamConfig(name="FZ", subjects=["fz"]))
        c = await s.create_consumer(ConsumerConfig(durable_name="fz", ack_wait=30))
        for i in range(200):
            await js.publish("fz", str(i).encode())
        seen: set[int] = set()

        async def handler(msg: JsMsg) -> None:
            seen.add(int(msg.data))
            await msg.ack()

        loop = asyncio.get_running_loop()
        async with await c.consume(
            handler, max_messages=50, expires=3, heartbeat=0.5, error_cb=errors.append
        ):
            async with asyncio.timeout(20):
                while len(seen) < 200:
                    await asyncio.sleep(0.02)
            nats_server.pause()
            paused = loop.time()
            try:
                async with asyncio.timeout(15):
                    while not any(isinstance(e, NoHeartbeatError) for e in errors):
                        await asyncio.sleep(0.05)
                # frozen for 5 s all the same: longer than a pull's expiry
                await asyncio.sleep(max(0.0, 5.0 - (loop.time() - paused)))
            finally:
                nats_server.resume()
            resumed = loop.time()
            for i in range(200, 400):
                await js.publish("fz", str(i).encode())
            async with asyncio.timeout(30):
                while len(seen) < 400:
                    await asyncio.sleep(0.02)
            assert loop.time() - resumed < 15
        assert seen == set(range(400))
