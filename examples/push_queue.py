"""Push consumer with a queue group: the server spreads messages over several workers.

A push consumer has a ``deliver_subject``: the server sends its messages there
without being asked. With a ``deliver_group`` the subscribers of that subject form
a queue group, and each message goes to one of them. Here three workers share the
consumer on one connection (in real life: one per process or machine); every
message is processed once, by whichever worker got it.

Run: ``python examples/push_queue.py`` (server at ``$NATS_URL``, default
``nats://127.0.0.1:4222``) or ``python examples/push_queue.py --embedded``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterable

import jetstream
from jetstream import AckPolicy, ConsumerConfig, JsMsg, StorageType, StreamConfig

STREAM = "EXAMPLE_TASKS"
TOTAL = 30


async def run(url: str) -> None:
    async with jetstream.connect(url) as nc:
        js = nc.jetstream()
        stream = await js.create_stream(
            StreamConfig(name=STREAM, subjects=["tasks.>"], storage=StorageType.MEMORY)
        )
        try:
            consumer = await stream.create_or_update_consumer(
                ConsumerConfig(
                    durable_name="workers",
                    deliver_subject=nc.new_inbox(),
                    deliver_group="workers",
                    ack_policy=AckPolicy.EXPLICIT,
                )
            )
            done = asyncio.Event()
            processed: dict[int, str] = {}  # stream sequence -> worker
            duplicates = 0

            async def work(name: str, messages: AsyncIterable[JsMsg]) -> None:
                nonlocal duplicates
                async for msg in messages:
                    seq = msg.metadata.sequence.stream
                    duplicates += seq in processed
                    processed[seq] = name
                    await msg.ack()
                    if len(processed) == TOTAL:
                        done.set()

            async with contextlib.AsyncExitStack() as stack:
                readers = [await stack.enter_async_context(consumer.messages()) for _ in range(3)]
                await nc.flush()  # the server knows all three queue subscriptions now
                tasks = [
                    asyncio.create_task(work(f"worker-{k}", reader))
                    for k, reader in enumerate(readers, 1)
                ]
                for i in range(1, TOTAL + 1):
                    await js.publish(f"tasks.{i}", f"task {i}".encode())
                await asyncio.wait_for(done.wait(), 10)
                for reader in readers:
                    reader.stop()
                await asyncio.gather(*tasks)

            for name, count in sorted(Counter(processed.values()).items()):
                print(f"{name} processed {count} task(s)")
            print(f"{len(processed)} of {TOTAL} tasks processed, {duplicates} twice")
        finally:
            await js.delete_stream(STREAM)


if __name__ == "__main__":
    from _runner import main

    main(run, __doc__)
