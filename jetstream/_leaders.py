"""Leader elections, heard as they happen, for the consumers that read through them.

When a consumer's leader dies (kill -9, a frozen VM), the pull requests parked on
it die too, silently: nothing tells the client but missing heartbeats, seconds
later. The server announces every election on
``$JS.EVENT.ADVISORY.CONSUMER.LEADER_ELECTED.<stream>.<consumer>`` and
``$JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED.<stream>``, so a reader that is waiting
on a consumer registers here and is called back on the election of its consumer
(a durable pull pulls again at once) or of its stream (an ordered consumer, whose
one-replica consumer lived with the old stream leader, is made again).

One subscription per JetStream context, made on the first registration and only
when the server is part of a cluster (a single server holds no elections). A
callback runs on the read path: it must not raise or block.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .core.client import Client
    from .protocol.ops import Msg as MsgOp

__all__ = ["LeaderWatch"]

_PREFIX = "$JS.EVENT.ADVISORY."
_CONSUMER = "CONSUMER.LEADER_ELECTED."
_STREAM = "STREAM.LEADER_ELECTED."


def consumer_key(stream: str, consumer: str) -> str:
    return f"{_CONSUMER}{stream}.{consumer}"


def stream_key(stream: str) -> str:
    return f"{_STREAM}{stream}"


class LeaderWatch:
    """Callbacks by election subject (without the advisory prefix)."""

    def __init__(self, nc: Client) -> None:
        self._nc = nc
        self._sid = 0
        self._listeners: dict[str, list[Callable[[], None]]] = {}
        # Delivery protocol: what the client needs to re-make the subscription.
        self.subject = _PREFIX + "*.LEADER_ELECTED.>"
        self.queue: str | None = None
        self.max_msgs: int | None = None
        self.received = 0

    @property
    def active(self) -> bool:
        """True when connected to a cluster (where elections happen)."""
        info = self._nc._info
        return info is not None and bool(info.cluster)

    def add(self, key: str, cb: Callable[[], None]) -> None:
        """Call ``cb`` on each election of ``key`` (``consumer_key`` or ``stream_key``)."""
        self._listeners.setdefault(key, []).append(cb)
        if not self._sid:
            self._subscribe()

    def remove(self, key: str, cb: Callable[[], None]) -> None:
        cbs = self._listeners.get(key)
        if cbs is not None and cb in cbs:
            cbs.remove(cb)
            if not cbs:
                del self._listeners[key]

    def _subscribe(self) -> None:
        nc = self._nc
        info = nc._info
        if info is None or not info.cluster or nc.is_closed:
            return
        self._sid = nc._new_sid()
        nc._register(self._sid, self)
        nc._send_sub(self.subject, self._sid, None)

    def _deliver(self, op: MsgOp) -> None:
        self.received += 1
        cbs = self._listeners.get(op.subject[len(_PREFIX) :])
        if cbs:
            for cb in list(cbs):
                cb()

    async def _close(self) -> None:
        """Called by the client on close."""
        self._listeners.clear()
