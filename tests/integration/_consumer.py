"""Consumer helpers of the integration tests: a stream of ``n`` numbered messages all
fetched through a durable consumer ``c`` (what the tests of batch acks start from), and a
consumer's info polled until a check holds. The server takes acks in on a queue of its
own, a moment after they arrive: a plain ack is not confirmed, and a flush only says that
the server has read it, so what follows plain acks is awaited, not read once."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from jetstream import Consumer, ConsumerConfig, ConsumerInfo, JetStream, JsMsg, StreamConfig


async def fetched(js: JetStream, name: str, n: int, ack_wait: float = 30.0) -> list[JsMsg]:
    s = await js.create_stream(StreamConfig(name=name, subjects=[name.lower()]))
    for i in range(n):
        await js.publish_async(name.lower(), b"%d" % i)
    await js.publish_async_complete(timeout=10)
    c = await s.create_consumer(ConsumerConfig(durable_name="c", ack_wait=ack_wait))
    msgs: list[JsMsg] = []
    while len(msgs) < n:
        msgs += await c.fetch(n - len(msgs), expires=5)
    return msgs


async def eventually(
    consumer: Consumer, check: Callable[[ConsumerInfo], bool], timeout: float = 10.0
) -> ConsumerInfo:
    """The consumer's info once ``check`` holds for it; asserted after ``timeout``."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        info = await consumer.info()
        if check(info) or asyncio.get_running_loop().time() > deadline:
            assert check(info), info
            return info
        await asyncio.sleep(0.05)
