"""Connection events and counters."""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol, Self

__all__ = ["CallbackRunner", "ConnectionEvent", "EventKind", "EventStream", "Statistics"]

log = logging.getLogger("jetstream")


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
    """Counters of one client, across reconnects.

    ``stranded_naks`` counts the messages a JetStream consumer delivered for a pull that
    nobody waited for any more (a fetch or ``next()`` that had returned, timed out or was
    cancelled, a ``messages()`` iterator that was stopped, a pull left from before a
    reconnect): given back at once with a nak rather than left to wait out the
    consumer's ``ack_wait``.
    """

    in_msgs: int = 0
    out_msgs: int = 0
    in_bytes: int = 0
    out_bytes: int = 0
    reconnects: int = 0
    #: messages for a pull nobody waited for, given back with a nak
    stranded_naks: int = 0


class _Listened(Protocol):
    _event_streams: list[EventStream]


class EventStream:
    """Connection events as an async iterator (see ``Client.events``)."""

    def __init__(self, client: _Listened) -> None:
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


class CallbackRunner:
    """Runs user callbacks (plain or coroutine functions) so that none outlives the client.

    A coroutine callback runs in a task of its own (one per event, never per message);
    ``wait`` lets them finish on close, then cancels what is left.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._tasks: set[asyncio.Task[Any]] = set()

    def fire(self, cb: Callable[..., Awaitable[None] | None] | None, *args: Any) -> None:
        if cb is None:
            return
        try:
            res = cb(*args)
        except Exception:
            log.exception("jetstream: connection callback failed")
            return
        if res is not None:
            self.spawn(res)

    def spawn(self, aw: Awaitable[Any]) -> None:
        async def run() -> None:
            try:
                await aw
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("jetstream: connection callback failed")

        task = self._loop.create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def wait(self, timeout: float) -> None:
        me = asyncio.current_task()
        pending = [t for t in self._tasks if t is not me]
        if not pending:
            return
        _, still = await asyncio.wait(pending, timeout=timeout)
        for t in still:
            t.cancel()
        if still:
            await asyncio.gather(*still, return_exceptions=True)
