"""Confirmed message ack: ``ack()`` next to ``ack_sync()``.

The NATS by Example "Confirmed Message Ack in JetStream" example, and what
``make demo`` runs. Two consumers each take the first of two messages. Consumer 1
acks it with ``ack()``, which is only sent: right after it the server may not have
processed the ack yet, so "messages with ack pending" can still read 1. Consumer 2
acks with ``ack_sync()``, which waits for the server's confirmation, so it reads 0
every time.

Run: ``python examples/confirmed_ack.py`` (server at ``$NATS_URL``, default
``nats://127.0.0.1:4222``) or ``python examples/confirmed_ack.py --embedded``.
"""

from __future__ import annotations

import jetstream
from jetstream.demo import confirmed_ack

STREAM = "EVENTS_data"


async def run(url: str) -> None:
    async with jetstream.connect(url) as nc:
        version = nc.server_info.version if nc.server_info else "?"
        print(f"connected to nats-server {version} at {url}")
        print()
        try:
            # The very code of `make demo`: creates the stream, prints the table.
            await confirmed_ack(nc, stream=STREAM, subject="data")
        finally:
            await nc.jetstream().delete_stream(STREAM)


if __name__ == "__main__":
    from _runner import main

    main(run, __doc__)
