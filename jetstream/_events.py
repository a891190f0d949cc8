"""Connection events and counters."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Self

if TYPE_CHECKING:
    from .client import Client

__all__ = ["ConnectionEvent", "EventKind", "EventStream", "Statistics"]


class EventKind(StrEnum):
    """What happened to the connection."""

    CONNECTED = "connected"
    DISCONNECTED = "disconnected"
    RECONNECTED = "reconnected"
    CLOSED = "closed"
    LAME_DUCK = "lame_duck"
    DISCOVERED_SERVERS = "discovered_servers"
    ERROR = "error"


@dataclass(frozen=True)
class ConnectionEvent:
    """An event of ``Client.events()``: its kind and, for errors and discovery, a detail."""

    kind: EventKind
    detail: Any = None


@dataclass
class Statistics:
    """Counters of one client, across reconnects."""

    in_msgs: int = 0
    out_msgs: int = 0
    in_bytes: int = 0
    out_bytes: int = 0
    reconnects: int = 0


class EventStream:
    """Connection events as an async iterator (see ``Client.events``)."""

    def __init__(self, client: Client) -> None:
        self._client = client
        self._queue: deque[ConnectionEvent] = deque(maxlen=1024)
        self._waiter: asyncio.Future[None] | None = None
        self._ended = False

    def _push(self, ev: ConnectionEvent) -> None:
        self._queue.append(ev)
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    def _end(self) -> None:
        self._ended = True
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    def __aiter__(self) -> AsyncIterator[ConnectionEvent]:
        return self

    async def __anext__(self) -> ConnectionEvent:
        while not self._queue:
            if self._ended:
                raise StopAsyncIteration
            w = asyncio.get_running_loop().create_future()
            self._waiter = w
            try:
                await w
            finally:
                self._waiter = None
        return self._queue.popleft()

    def close(self) -> None:
        """Stop receiving events."""
        if self in self._client._event_streams:
            self._client._event_streams.remove(self)
        self._end()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()
