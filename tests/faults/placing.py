"""Creating R3 assets on a cluster that has just started or just lost a node.

A loaded 2-core machine makes the first creates of a fresh cluster slow: the meta leader
refuses an R3 asset while it does not count every peer as online yet (10005), and a
create's reply can miss its timeout while the asset's raft group elects a leader. Both
are the setup's weather, not what a fault test measures, so a scenario makes its assets
through ``placed``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

import jetstream

T = TypeVar("T")

#: seconds a create is retried before the scenario's setup fails
PLACE_BOUND = 30.0


async def placed(make: Callable[[], Awaitable[T]], bound: float = PLACE_BOUND) -> T:
    """``make()`` an R3 asset, again while the meta leader refuses it for a peer it does
    not count as online yet (10005) or does not answer in time (a create that landed
    meanwhile is made again with the same config, which the server accepts as the same
    asset). Any other error is raised at once."""
    async with asyncio.timeout(bound):
        while True:
            try:
                return await make()
            except jetstream.TimeoutError:
                pass
            except jetstream.JetStreamApiError as exc:
                if exc.err_code != 10005:
                    raise
            await asyncio.sleep(0.2)
