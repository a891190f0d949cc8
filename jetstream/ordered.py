"""The ordered consumer: every message of a stream exactly once, in order.

Underneath is an ephemeral pull consumer (ack none, one replica, memory storage).
Each delivered message must carry the next consumer sequence; on a gap, a missed
heartbeat, a deleted consumer, a pull that nobody answers or a reconnect, the
consumer is dropped and made again from the stream sequence after the last one
delivered, with backoff, as many times as it takes. When the stream itself is
gone, the iterator ends with ``StreamNotFoundError``.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ._context import Context
from ._fetch import _Fetch
from ._leaders import stream_key
from ._ordered_base import OrderedBase, consumer_seq
from ._pull import MessageStream, PullOptions
from ._push import PushStream
from ._reader import ConsumeContext, MessageReader
from ._runs import RunStream
from ._stream_consumers import StreamConsumers, stream_consumers
from .consumer import Consumer
from .errors import NatsError
from .errors import TimeoutError as NatsTimeoutError

if TYPE_CHECKING:
    from .api import ConsumerInfo
    from .message import JsMsg, Msg
    from .protocol.ops import MsgRun

__all__ = ["OrderedConsumer", "OrderedStream"]


def _heartbeat(expires: float) -> float | None:
    """The idle heartbeat of an ordered pull: 1 s (a lost consumer is noticed within
    about 2 s), or none for a pull too short to carry one."""
    return 1.0 if expires >= 2.0 else None


class OrderedConsumer(OrderedBase):
    """Create with ``await stream.ordered_consumer(filter_subjects=[...])``."""

    @classmethod
    async def create(
        cls,
        js: Context,
        stream: str,
        *,
        handle: StreamConsumers | None = None,
        **options: Any,
    ) -> OrderedConsumer:
        """Make the first consumer (``handle``: the stream's, when the caller has it)."""
        oc = cls(js, stream, **options)
        oc._handle = handle
        await oc._recreate(first=True)
        return oc

    async def delete(self) -> None:
        """Delete the server-side consumer now (best effort) instead of leaving it to
        expire after ``inactive_threshold``. Reading again makes a new one."""
        old, self._consumer = self._consumer or self._stale, None
        self._stale = None
        if old is None:
            return
        try:
            stream = self._handle or await stream_consumers(self._js, self.stream_name)
            await stream.delete_consumer(old.name)
        except NatsError:
            pass

    def _check_pull(self) -> None:
        if self.push:
            raise TypeError("a push-based ordered consumer is read with messages()")

    @property
    def consumer(self) -> Consumer | None:
        """The current underlying consumer (it changes on every reset)."""
        return self._consumer

    async def info(self) -> ConsumerInfo:
        """Info of the current underlying consumer."""
        consumer = await self._ensure()
        assert consumer is not None  # no deadline: made, or raised
        return await consumer.info()

    def messages(
        self,
        *,
        max_messages: int = 500,
        expires: float = 30.0,
        heartbeat: float | None = None,
        msg_type: type[Msg] | None = None,
    ) -> OrderedStream:
        """Every message in order: ``async with oc.messages() as it: async for m in it``.

        ``heartbeat`` (default: half of ``expires``, at most 5 s) is the idle heartbeat
        of its pulls: a consumer lost without a word (no election heard, no reconnect)
        is noticed after two missed ones and made again. (To read in runs of messages,
        with no message object made, see ``jetstream.bulk.ordered_runs``.)

        ``msg_type``: the class the messages are made of instead of ``JsMsg``, a
        subclass of ``jetstream.Msg`` with its positional fields, for a reader whose
        items are the messages themselves (the KeyValue watcher's entries; an ordered
        consumer acknowledges nothing).
        """
        hb = heartbeat if heartbeat is not None else min(expires / 2, 5.0)
        opts = PullOptions(batch=max_messages, expires=expires, heartbeat=hb)
        return OrderedStream(self, opts, msg_type=msg_type)

    async def next(self, timeout: float = 30.0) -> JsMsg:
        """The next message in order.

        Raises:
            TimeoutError: none within ``timeout`` seconds.
            TypeError: a push-based ordered consumer (use ``messages()``).
        """
        msgs = await self._pull(1, timeout)
        if not msgs:
            raise NatsTimeoutError(
                f"no message from the ordered consumer of stream {self.stream_name!r} "
                f"within {timeout}s"
            )
        return msgs[0]

    async def fetch(self, batch: int = 1, *, expires: float = 30.0) -> list[JsMsg]:
        """Up to ``batch`` messages in order (fewer when the request ends first).

        A restart, a reconnect or a lost consumer within the call is recovered from
        (the consumer is made again) while ``expires`` lasts; what came before a gap is
        returned.
        """
        return await self._pull(batch, expires)

    async def _pull(self, batch: int, expires: float) -> list[JsMsg]:
        """``fetch`` and ``next``: pull until something in order came or ``expires``."""
        self._check_pull()
        if batch < 1:
            raise ValueError("batch must be at least 1")
        loop = self._js.client.loop
        deadline = loop.time() + expires
        while True:
            consumer = await self._ensure(deadline)
            left = deadline - loop.time()
            if consumer is None or left < 0.01:
                return []
            opts = PullOptions(batch=batch, expires=left, heartbeat=_heartbeat(left))
            pull = _Fetch(consumer, opts, recover=False)

            def moved(pull: _Fetch = pull) -> None:
                pull._end(self._moved())

            key = stream_key(self.stream_name)
            self._js._leaders.add(key, moved)
            try:
                msgs = await pull.run()
            except NatsError as exc:
                self._lost(exc)
                continue
            except asyncio.CancelledError:
                self._lost(None)  # what its pull brought is lost: read on from the last
                raise
            finally:
                self._js._leaders.remove(key, moved)
            out: list[JsMsg] = []
            for msg in msgs:
                if not self._accept(msg):
                    self._lost(None)
                    break
                out.append(msg)
            if out or loop.time() >= deadline - 0.01:
                return out

    async def consume(self, handler: Callable[[JsMsg], Awaitable[None] | None], **kw: Any) -> Any:
        """Run ``handler`` for every message in order, in one task (see ``messages``)."""
        return ConsumeContext(self.messages(**kw), handler)


class OrderedStream(MessageReader):
    """The iterator of ``OrderedConsumer.messages()``.

    Order is checked a run at a time: when the reader reaches the messages buffered,
    the first goes through the consumer's own check (``OrderedConsumer._accept``) and
    the run behind it is in order when the last one's consumer sequence is the first's
    plus the run's length minus one (one consumer delivers its sequences ascending, so
    nothing can be missing between them). Those messages are then handed over with no
    check of their own. A run that does not pass is checked message by message, and
    the consumer is made again at the gap.

    ``runs``: the messages are read as runs (``protocol.ops.MsgRun``) with
    ``jetstream.bulk.take_runs``, by bulk readers that never need a message object (pull consumers
    only; see ``_runs.RunStream``).
    """

    def __init__(
        self,
        oc: OrderedBase,
        opts: PullOptions,
        *,
        runs: bool = False,
        msg_type: type[Msg] | None = None,
    ) -> None:
        self._oc = oc
        self._opts = opts
        self._runs = runs
        self._msg_type = msg_type
        self._inner: MessageStream | PushStream | None = None
        # messages at the head of the inner buffer found in order and not taken yet
        # (0 whenever there is no inner stream, or it is broken or closed)
        self._ok = 0
        self._broken = False
        self._closed = False
        self._started = False
        self._hooked = False  # our reconnect hook and stream leader callback are on
        self._loop = oc._js.client.loop

    def _open(self) -> MessageStream | PushStream:
        inner = self._inner
        if inner is None:
            consumer = self._oc._consumer
            assert consumer is not None
            if consumer.is_push:
                if self._runs:
                    raise TypeError("a push-based ordered consumer is not read in runs")
                inner = self._inner = PushStream(
                    consumer, error_cb=self._on_error, msg_type=self._msg_type
                )
            else:
                opts = dataclasses.replace(self._opts)
                kind = RunStream if self._runs else MessageStream
                inner = self._inner = kind(consumer, opts, self._on_error)
                if self._msg_type is not None:
                    # the class the parser makes of its deliveries (see ``messages``)
                    cls: Any = self._oc._js.client.msg_class(self._msg_type)
                    inner._cls = cls
            inner._start()
        return inner

    def _on_error(self, exc: BaseException) -> None:
        # A missed heartbeat, a pull nobody answers: start over from the next sequence.
        self._break(exc)

    def _on_reconnect(self) -> None:
        self._break(None)

    def _break(self, exc: BaseException | None) -> None:
        """The consumer's one recovery path (``OrderedConsumer._lost``), then a new
        inner stream on the consumer made again."""
        self._oc._lost(exc)
        self._broken = True
        self._ok = 0
        if self._inner is not None:
            self._inner.stop()

    def _start(self) -> None:
        self._started = True
        nc = self._oc._js.client
        if not self._hooked:
            self._hooked = True
            nc.add_reconnect_hook(self._on_reconnect)
            self._oc._js._leaders.add(stream_key(self._oc.stream_name), self._on_leader)

    def _on_leader(self) -> None:
        self._break(self._oc._moved())

    def _check(self) -> bool:
        """Check the order of the run buffered (see the class): True if some message is
        ready to hand over (``_ok``); after a gap, the stream is broken."""
        inner = self._inner
        if inner is None or self._broken or self._closed:
            return False
        buf: Any = inner._buf
        if not buf:
            return False
        oc = self._oc
        if isinstance(inner, RunStream):
            first, last, n = inner.first_reply(), inner.last_reply(), inner.pending
        else:
            first, last, n = buf[0].reply, buf[-1].reply, len(buf)
        if not oc._accept_reply(first):
            self._break(None)
            return False
        if n > 1 and consumer_seq(last, oc._tail_dots) == oc._consumer_seq + n - 1:
            oc._consumer_seq += n - 1
            self._ok = n
        else:
            self._ok = 1
        return True

    def _take(self) -> JsMsg | None:
        """The next message if it is buffered and in order, else None (then
        ``__anext__`` waits, or starts over after a gap). No coroutine is made."""
        if self._ok or self._check():
            return self._next_ok()
        return None

    #: public: ``msg = it.take_nowait() or await anext(it)`` reads what is buffered
    #: without making a coroutine a message
    take_nowait = _take

    async def __anext__(self) -> JsMsg:
        # The common case without a coroutine of the inner stream: a message buffered
        # and found in order.
        if self._ok:
            self._ok -= 1
            inner: Any = self._inner
            msg: JsMsg = inner._take()
            self._oc._last_reply = msg.reply
            return msg
        while not self._check():
            await self._wait_inner()
        return self._next_ok()

    def _next_ok(self) -> JsMsg:
        """The next message found in order (``_ok`` is at least 1)."""
        self._ok -= 1
        inner: Any = self._inner
        msg: JsMsg = inner._take()
        self._oc._last_reply = msg.reply
        return msg

    async def _wait_inner(self) -> None:
        """Wait for the inner stream to buffer something, starting over on a consumer
        made again when it has ended (a deleted consumer, a refused pull, a gap)."""
        if not self._started:
            self._start()
        if self._closed:
            raise StopAsyncIteration
        if self._oc._consumer is None or self._broken:
            await self._reset()
        inner = self._open()
        try:
            await inner._wait()
        except StopAsyncIteration:
            if self._closed:
                raise
            self._break(None)
        except NatsError as exc:  # a deleted consumer, a refused pull
            self._break(exc)

    async def _take_run(self, timeout: float | None) -> list[Any]:
        """``take_many`` / ``take_runs``: what is buffered and in order, waiting at most
        ``timeout`` seconds for a first message."""
        if not (self._ok or self._check()):
            try:
                async with asyncio.timeout(timeout):
                    while not self._check():
                        await self._wait_inner()
            except TimeoutError as exc:
                if isinstance(exc, NatsError):
                    raise
                raise NatsTimeoutError(f"no message within {timeout}s") from None
        inner: Any = self._inner
        n, self._ok = self._ok, 0
        run: list[Any] = inner._take_run(n)
        last = run[-1]
        self._oc._last_reply = last.reply(-1) if self._runs else last.reply
        return run

    async def take_many(self, timeout: float | None = 30.0) -> list[JsMsg]:
        """Every message buffered that is next in order, at once: at least one, waiting
        at most ``timeout`` seconds for it (None: as long as it takes).

        Raises:
            TimeoutError: nothing came in time.
            StopAsyncIteration: the stream was stopped.
        """
        if self._runs:
            raise TypeError("an ordered stream of runs is read with jetstream.bulk.take_runs()")
        return await self._take_run(timeout)

    async def _take_runs(self, timeout: float) -> list[MsgRun]:
        """``take_many`` of a stream read in runs (``jetstream.bulk.take_runs``)."""
        if not self._runs:
            raise TypeError(
                "take_runs() reads an ordered stream made with runs=True "
                "(jetstream.bulk.ordered_runs)"
            )
        return await self._take_run(timeout)

    async def _reset(self) -> None:
        self._ok = 0
        if self._inner is not None:
            self._inner.stop()
            self._inner = None
        # A break heard while the consumer is being made (an election, a reconnect)
        # is the making's own to recover from (it asks again): not a second reset.
        await self._oc._ensure()
        self._broken = False

    def stop(self) -> None:
        """Stop: unsubscribe; the iteration ends. The ordered consumer reads on from the
        last message handed out: what its consumer delivered beyond (buffered here, or
        still on the way) is dropped with the stream, so the next read makes the
        consumer again."""
        self._closed = True
        self._ok = 0
        if self._inner is not None:
            self._oc._lost(None)
        nc = self._oc._js.client
        if self._hooked:
            self._hooked = False
            nc.remove_reconnect_hook(self._on_reconnect)
            self._oc._js._leaders.remove(stream_key(self._oc.stream_name), self._on_leader)
        if self._inner is not None:
            self._inner.stop()

    async def drain(self) -> None:
        self.stop()

    @property
    def pending(self) -> int:
        """Messages buffered and not yet taken by the reader."""
        return self._inner.pending if self._inner is not None else 0

    def _report(self, exc: BaseException) -> None:
        self._oc._report(exc)
