"""Ordered consumer: every message of a stream once and in order, whatever happens.

An ordered consumer is a client-side construction over an ephemeral consumer with
no acks. The client checks that each message carries the next consumer sequence;
on a gap, a missed heartbeat, a reconnect or a deleted consumer it makes a new
consumer that starts right after the last stream sequence it handed out. Here the
consumer underneath is deleted half-way through on purpose, and the reader still
gets every message once, in order.

Run: ``python examples/ordered_consumer.py`` (server at ``$NATS_URL``, default
``nats://127.0.0.1:4222``) or ``python examples/ordered_consumer.py --embedded``.
"""

from __future__ import annotations

import jetstream
from jetstream import StorageType, StreamConfig

STREAM = "EXAMPLE_READINGS"


async def run(url: str) -> None:
    async with jetstream.connect(url) as nc:
        js = nc.jetstream()
        stream = await js.create_stream(
            StreamConfig(name=STREAM, subjects=["readings.>"], storage=StorageType.MEMORY)
        )
        try:
            for i in range(1, 11):
                sensor = "a" if i % 2 else "b"
                await js.publish(f"readings.{sensor}", f"reading {i} from {sensor}".encode())

            ordered = await stream.ordered_consumer(
                filter_subjects=["readings.a"],
                error_cb=lambda exc: print(f"  (noticed: {exc})"),
            )
            seen: list[int] = []
            while True:
                msg = await ordered.next(timeout=5)
                seq = msg.metadata.sequence.stream
                seen.append(seq)
                print(f"stream seq {seq:2}: {msg.data.decode()}")
                if len(seen) == 2 and ordered.consumer is not None:
                    # Pull the rug: the client notices and makes a new consumer that
                    # starts after stream sequence `seq`.
                    await stream.delete_consumer(ordered.consumer.name)
                    print("  (consumer deleted under the reader)")
                if msg.metadata.num_pending == 0:
                    break
            print(f"read {len(seen)} messages in order; consumer recreated {ordered.resets}x")
        finally:
            await js.delete_stream(STREAM)


if __name__ == "__main__":
    from _runner import main

    main(run, __doc__)
