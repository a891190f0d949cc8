"""An ordered consumer read in bulk, for the Spark source: the parser's MSG ops as they
came, a run at a time, with no ``JsMsg`` made and no coroutine per message.

``RawOrderedStream`` is ``OrderedConsumer.messages()`` with one difference in what it
keeps: its pull stream (``RawPullStream``) buffers the MSG ops themselves, and
``take_many`` hands over everything buffered at once. Everything else is the ordered
consumer's own: the pulls and their accounting, heartbeats, resets on a reconnect or a
leader change, and the one recovery path (a gap, a lost or deleted consumer: made again
from the stream sequence after the last message handed over).

Order is checked per run, not per message: the first message of a run goes through the
ordered consumer's own check, and the run is in order when its consumer sequences go on
from there one by one, which its last message tells (one consumer delivers its sequences
ascending). A run that does not pass is checked message by message and cut at the gap.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import TYPE_CHECKING, Any

from .._pull import MessageStream, PullOptions
from .._reader import all_plain
from ..errors import NatsError
from ..errors import TimeoutError as NatsTimeoutError
from ..ordered import OrderedStream

if TYPE_CHECKING:
    from ..ordered import OrderedConsumer
    from ..protocol.ops import Msg as MsgOp

__all__ = ["RawOrderedStream", "RawPullStream", "consumer_seq"]


def consumer_seq(reply: str, tail_dots: int) -> int:
    """The consumer sequence of an ack subject with ``tail_dots`` dots after it (-1: none)."""
    try:
        return int(reply.rsplit(".", tail_dots)[1])
    except (ValueError, IndexError):
        return -1


class RawPullStream(MessageStream):
    """A ``MessageStream`` whose buffer holds the MSG ops as the parser made them."""

    def _deliver(self, op: MsgOp) -> None:
        if op.status or self._track_bytes or self._opts.group is not None:
            super()._deliver(op)
            return
        self._seen = True
        self.received += 1
        if self._closed:
            return
        if self._out_msgs > 0:
            self._out_msgs -= 1
        buf: Any = self._buf
        buf.append(op)
        if self._waiter is not None:
            self._wake()

    def _deliver_many(self, ops: list[MsgOp], size: int) -> bool:
        if self._track_bytes or self._opts.group is not None or self._closed or not all_plain(ops):
            return False
        self._seen = True
        self.received += len(ops)
        buf: Any = self._buf
        buf.extend(ops)
        self._took(len(ops))
        return True

    def _late(self, op: MsgOp) -> None:
        if op.status or self._track_bytes:
            super()._late(op)
            return
        self._seen = True
        if self._closed:
            return
        self.received += 1
        buf: Any = self._buf
        buf.append(op)
        if self._waiter is not None:
            self._wake()

    def take_all(self) -> list[MsgOp]:
        """Everything buffered, and the pulls topped up."""
        buf: Any = self._buf
        ops: list[MsgOp] = list(buf)
        buf.clear()
        if not self._closed:
            self._refill()
        return ops


class RawOrderedStream(OrderedStream):
    """``OrderedConsumer.messages()`` read a run of MSG ops at a time (``take_many``)."""

    def __init__(self, oc: OrderedConsumer, *, batch: int, expires: float) -> None:
        # the idle heartbeat of OrderedConsumer.messages()
        hb = min(expires / 2, 5.0)
        super().__init__(oc, PullOptions(batch=batch, expires=expires, heartbeat=hb))

    def _open(self) -> Any:
        inner = self._inner
        if inner is None:
            consumer = self._oc._consumer
            assert consumer is not None
            opts = dataclasses.replace(self._opts)
            inner = self._inner = RawPullStream(consumer, opts, self._on_error)
            inner._start()
        return inner

    async def take_many(self, timeout: float) -> list[MsgOp]:
        """The buffered messages that are next in order (at least one; waits at most
        ``timeout`` seconds for it).

        Raises:
            TimeoutError: nothing came in time.
            StopAsyncIteration: the stream was stopped.
        """
        first: Any = self._take()
        if first is None:
            try:
                async with asyncio.timeout(timeout):
                    first = await self.__anext__()
            except TimeoutError as exc:
                if isinstance(exc, NatsError):
                    raise
                raise NatsTimeoutError(f"no message within {timeout}s") from None
        inner = self._inner
        if not isinstance(inner, RawPullStream) or self._broken or self._closed:
            return [first]
        rest = inner.take_all()
        if not rest:
            return [first]
        oc = self._oc
        k = oc._tail_dots
        last = rest[-1].reply or ""
        if consumer_seq(last, k) == oc._consumer_seq + len(rest):
            # consumer sequences ascend: the run goes on one by one
            oc._consumer_seq += len(rest)
            oc._last_reply = last
            return [first, *rest]
        # a gap: what comes before it, then the consumer is made again
        run = [first]
        accept: Any = oc._accept
        for op in rest:
            if not accept(op):
                self._break(None)
                break
            run.append(op)
        return run
