"""A stream of ``n`` numbered messages and all of them fetched through a durable
consumer ``c``: what the tests of the batch acks start from."""

from __future__ import annotations

from jetstream import ConsumerConfig, JetStream, JsMsg, StreamConfig


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
