"""The seed's confirmed-ack example ("Confirmed Message Ack in JetStream", NATS by Example).

Two consumers read the same first message of a stream. Consumer 1 acks with ``ack()``,
which is only buffered and sent: right after it, the server may not have processed the
ack yet, so ``num_ack_pending`` can still read 1. Consumer 2 acks with ``ack_sync()``,
which waits for the server's confirmation: right after it ``num_ack_pending`` reads 0,
every time.
"""

from __future__ import annotations

from collections.abc import Callable

from .api import AckPolicy, ConsumerConfig, StorageType, StreamConfig
from .client import Client

__all__ = ["Row", "confirmed_ack"]

#: (stage, pending messages, messages with ack pending)
Row = tuple[str, int, int]


async def confirmed_ack(
    nc: Client,
    *,
    subject: str = "data",
    stream: str = "EVENTS_data",
    out: Callable[[str], None] = print,
) -> dict[str, list[Row]]:
    """Run the example on ``nc``, print its table through ``out``, and return it."""
    js = nc.jetstream()
    s = await js.create_stream(
        StreamConfig(name=stream, subjects=[subject], storage=StorageType.MEMORY)
    )
    # Publish a couple of messages so there is some state to look at.
    await js.publish(subject, b"A")
    await js.publish(subject, b"B")

    table: dict[str, list[Row]] = {}
    for label, name, confirmed in (
        ("Consumer 1", "consumer1", False),
        ("Consumer 2", "consumer2", True),
    ):
        consumer = await s.create_or_update_consumer(
            ConsumerConfig(name=name, filter_subject=subject, ack_policy=AckPolicy.EXPLICIT)
        )
        rows: list[Row] = []
        info = consumer.cached_info
        rows.append(("Start", info.num_pending, info.num_ack_pending))
        msg = await consumer.next(timeout=5)
        info = await consumer.info()
        rows.append(("After received but before ack", info.num_pending, info.num_ack_pending))
        if confirmed:
            await msg.ack_sync(timeout=5)
        else:
            await msg.ack()
        info = await consumer.info()
        rows.append(("After ack", info.num_pending, info.num_ack_pending))
        table[label] = rows
        out(label)
        for stage, pending, ack_pending in rows:
            out(f"  {stage}")
            out(f"    # pending messages: {pending}")
            out(f"    # messages with ack pending: {ack_pending}")
    return table
