"""Dead-letter queue: keep the messages a consumer gave up on, with the reason.

JetStream does not move a failed message anywhere. When a consumer delivered a
message ``max_deliver`` times without an ack, or the application terminated it
with ``term()``, the server publishes an advisory (MAX_DELIVERIES or
MSG_TERMINATED) naming its stream sequence. A small forwarder listens to those
advisories, reads each message back from the stream by sequence, and republishes
it to a dead-letter stream with headers saying why.

Run: ``python examples/dead_letter_queue.py`` (server at ``$NATS_URL``, default
``nats://127.0.0.1:4222``) or ``python examples/dead_letter_queue.py --embedded``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable

import jetstream
from jetstream import AckPolicy, ConsumerConfig, JetStream, JsMsg, StorageType, StreamConfig
from jetstream.advisories import AdvisoryStream, MaxDeliveriesAdvisory

STREAM = "EXAMPLE_PAYMENTS"
DLQ = "EXAMPLE_PAYMENTS_DLQ"


async def forward_dead_letters(js: JetStream, letters: AdvisoryStream, count: int) -> None:
    """Copy the messages of ``count`` dead-letter advisories to the DLQ stream."""
    for _ in range(count):
        advisory = await letters.next(timeout=10)
        msg = await js.dead_letter_message(advisory)  # read back by stream sequence
        if isinstance(advisory, MaxDeliveriesAdvisory):
            reason = f"not acked after {advisory.deliveries} deliveries"
        else:
            reason = f"terminated: {advisory.reason}"
        await js.publish(
            f"dlq.{msg.subject}",
            msg.data,
            headers={"Dlq-Reason": reason, "Dlq-Stream-Seq": str(msg.seq)},
            msg_id=f"{advisory.stream}-{msg.seq}",  # forwarded twice, stored once
        )


async def process(messages: AsyncIterable[JsMsg]) -> None:
    """The application: one kind of message always fails, one cannot be parsed."""
    async for msg in messages:
        if msg.subject == "payments.flaky":
            print(f"{msg.subject}: failed (delivery {msg.metadata.num_delivered}), nak")
            await msg.nak()  # deliver again at once; max_deliver=3 ends that
        elif msg.subject == "payments.bad":
            print(f"{msg.subject}: cannot parse, term")
            await msg.term("invalid JSON")
        else:
            print(f"{msg.subject}: processed {msg.data.decode()}")
            await msg.ack()


async def run(url: str) -> None:
    async with jetstream.connect(url) as nc:
        js = nc.jetstream()
        stream = await js.create_stream(
            StreamConfig(name=STREAM, subjects=["payments.>"], storage=StorageType.MEMORY)
        )
        dlq = await js.create_stream(
            StreamConfig(name=DLQ, subjects=["dlq.payments.>"], storage=StorageType.MEMORY)
        )
        try:
            consumer = await stream.create_or_update_consumer(
                ConsumerConfig(
                    durable_name="processor", ack_policy=AckPolicy.EXPLICIT, max_deliver=3
                )
            )
            await js.publish("payments.ok", b'{"amount": 10}')
            await js.publish("payments.flaky", b'{"amount": 20}')
            await js.publish("payments.bad", b'{"amount": ')
            await js.publish("payments.ok", b'{"amount": 30}')

            # Listening to the advisories before anything can fail.
            async with (
                js.dead_letters(STREAM, "processor") as letters,
                consumer.messages(max_messages=10) as messages,
            ):
                worker = asyncio.create_task(process(messages))
                await forward_dead_letters(js, letters, 2)
                messages.stop()
                await worker

            print("dead-letter stream:")
            for seq in (1, 2):
                dead = await dlq.get_msg(seq)
                print(
                    f"  {dead.subject} {dead.data.decode()!r}: {dead.headers['Dlq-Reason']}"
                    f" (stream seq {dead.headers['Dlq-Stream-Seq']})"
                )
        finally:
            await js.delete_stream(STREAM)
            await js.delete_stream(DLQ)


if __name__ == "__main__":
    from _runner import main

    main(run, __doc__)
