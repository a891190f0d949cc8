"""Pull consumer: fetch messages in batches and acknowledge each one.

A durable pull consumer is read with ``fetch(batch)``: one request asks for up to
``batch`` messages, and the call returns once they all came or the request expired
(``expires`` seconds). Each message carries its metadata, so the reader knows how
many are still waiting (``num_pending``) without asking the server, and asks for no
more than that. ``fetch_no_wait`` returns at once with
whatever is there, maybe nothing.

Run: ``python examples/pull_fetch.py`` (server at ``$NATS_URL``, default
``nats://127.0.0.1:4222``) or ``python examples/pull_fetch.py --embedded``.
"""

from __future__ import annotations

import jetstream
from jetstream import AckPolicy, ConsumerConfig, StorageType, StreamConfig

STREAM = "EXAMPLE_ORDERS"


async def run(url: str) -> None:
    async with jetstream.connect(url) as nc:
        js = nc.jetstream()
        stream = await js.create_stream(
            StreamConfig(name=STREAM, subjects=["orders.>"], storage=StorageType.MEMORY)
        )
        try:
            for i in range(1, 11):
                await js.publish(f"orders.{i}", f"order {i}".encode())
            consumer = await stream.create_or_update_consumer(
                ConsumerConfig(durable_name="processor", ack_policy=AckPolicy.EXPLICIT)
            )
            # The create reply already says how many messages wait for this consumer.
            left = consumer.cached_info.num_pending
            batch_no = 0
            while left:
                msgs = await consumer.fetch(min(4, left), expires=5.0)
                batch_no += 1
                print(f"batch {batch_no}: {', '.join(m.data.decode() for m in msgs)}")
                left = msgs[-1].metadata.num_pending
                for msg in msgs[:-1]:
                    await msg.ack()
                if left:
                    await msgs[-1].ack()
                    print(f"  {left} more waiting")
                else:
                    # Confirmed: once it returns the server has processed every ack
                    # this connection sent before it.
                    await msgs[-1].ack_sync()
            print(f"fetch_no_wait: {len(await consumer.fetch_no_wait(4))} message(s)")
            info = await consumer.info()
            print(
                f"acked up to stream sequence {info.ack_floor.stream_seq}, "
                f"{info.num_pending} pending, {info.num_ack_pending} awaiting an ack"
            )
        finally:
            await js.delete_stream(STREAM)


if __name__ == "__main__":
    from _runner import main

    main(run, __doc__)
