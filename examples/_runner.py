"""What every example shares: where its nats-server is.

An example runs against ``$NATS_URL`` (default ``nats://127.0.0.1:4222``), or, with
``--embedded``, against a nats-server of its own that it starts and stops
(``jetstream.embedded``; the binary comes with the ``server`` extra).
"""

from __future__ import annotations

import argparse
import asyncio
import os
from collections.abc import Awaitable, Callable


def main(run: Callable[[str], Awaitable[None]], doc: str | None) -> None:
    """Parse ``--embedded``, then run ``run(url)`` to completion."""
    parser = argparse.ArgumentParser(description=(doc or "").strip().splitlines()[0])
    parser.add_argument("--embedded", action="store_true", help="start a nats-server of our own")

    async def go(url: str) -> None:
        await run(url)

    if parser.parse_args().embedded:
        from jetstream.embedded import NatsServer

        with NatsServer() as server:
            asyncio.run(go(server.url))
    else:
        asyncio.run(go(os.environ.get("NATS_URL", "nats://127.0.0.1:4222")))
