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
import contextlib
import dataclasses
import datetime as _dt
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from ._context import Context
from ._fetch import _Fetch
from ._leaders import stream_key
from ._pull import MessageStream, PullOptions
from ._push import PushStream
from ._reader import ConsumeContext, MessageReader, report_to
from ._retry import retry_delay
from ._stream_consumers import StreamConsumers, stream_consumers
from .api import AckPolicy, ConsumerAction, ConsumerConfig, DeliverPolicy, ReplayPolicy
from .consumer import Consumer
from .errors import JetStreamError, NatsError, StreamNotFoundError
from .errors import TimeoutError as NatsTimeoutError
from .message import parse_ack_subject
from .protocol.subjects import next_nuid

if TYPE_CHECKING:
    from .api import ConsumerInfo
    from .message import JsMsg

__all__ = ["OrderedConsumer", "OrderedStream"]

# The longest one attempt to make the consumer again waits for the server's answer.
_ATTEMPT_WAIT = 1.0


def _heartbeat(expires: float) -> float | None:
    """The idle heartbeat of an ordered pull: 1 s (a lost consumer is noticed within
    about 2 s), or none for a pull too short to carry one."""
    return 1.0 if expires >= 2.0 else None


class OrderedConsumer:
    """Create with ``await stream.ordered_consumer(filter_subjects=[...])``."""

    def __init__(
        self,
        js: Context,
        stream: str,
        *,
        filter_subjects: Sequence[str] = (),
        deliver_policy: DeliverPolicy = DeliverPolicy.ALL,
        opt_start_seq: int | None = None,
        opt_start_time: _dt.datetime | None = None,
        headers_only: bool = False,
        replay_policy: ReplayPolicy = ReplayPolicy.INSTANT,
        inactive_threshold: float = 300.0,
        error_cb: Callable[[BaseException], Any] | None = None,
        push: bool = False,
        heartbeat: float = 5.0,
    ) -> None:
        self._js = js
        self.stream_name = stream
        self.filter_subjects = list(filter_subjects)
        self._deliver_policy = deliver_policy
        self._opt_start_seq = opt_start_seq
        self._opt_start_time = opt_start_time
        self._headers_only = headers_only
        self._replay = replay_policy
        self._inactive = inactive_threshold
        self._error_cb = error_cb
        #: the push-based form: the server pushes to an inbox, with flow control and
        #: idle heartbeats every ``heartbeat`` seconds
        self.push = push
        self._heartbeat = heartbeat
        self._consumer: Consumer | None = None
        # a consumer dropped by ``_lost``, deleted when the next one is made
        self._stale: Consumer | None = None
        # the stream's handle, to make consumers on (fetched once when not given)
        self._handle: StreamConsumers | None = None
        # The stream sequence of the last message handed out is read from its reply
        # subject only when asked for (``stream_seq``): _seq, or _last_reply if set.
        self._seq = 0
        self._last_reply: str | None = None
        self._consumer_seq = 0
        # how many "." end a reply subject from its consumer sequence on (0: unknown)
        self._tail_dots = 0
        #: how many times the underlying consumer was made again
        self.resets = 0

    @property
    def stream_seq(self) -> int:
        """Stream sequence of the last message handed out (0: none yet)."""
        reply = self._last_reply
        if reply is not None:
            self._last_reply = None
            try:
                self._seq = parse_ack_subject(reply).sequence.stream
            except NatsError:
                pass  # accepted by its consumer sequence; keep the one before
        return self._seq

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

    def _config(self) -> ConsumerConfig:
        cfg = ConsumerConfig(
            ack_policy=AckPolicy.NONE,
            max_deliver=1,
            mem_storage=True,
            num_replicas=1,
            inactive_threshold=self._inactive,
            replay_policy=self._replay,
        )
        if self._headers_only:
            cfg.headers_only = True
        if self.push:
            cfg.deliver_subject = self._js.client.new_inbox()
            cfg.flow_control = True
            cfg.idle_heartbeat = self._heartbeat
        if len(self.filter_subjects) == 1:
            cfg.filter_subject = self.filter_subjects[0]
        elif self.filter_subjects:
            cfg.filter_subjects = list(self.filter_subjects)
        seq = self.stream_seq
        if seq > 0:
            cfg.deliver_policy = DeliverPolicy.BY_START_SEQUENCE
            cfg.opt_start_seq = seq + 1
        else:
            cfg.deliver_policy = self._deliver_policy
            if self._opt_start_seq is not None:
                cfg.deliver_policy = DeliverPolicy.BY_START_SEQUENCE
                cfg.opt_start_seq = self._opt_start_seq
            elif self._opt_start_time is not None:
                cfg.deliver_policy = DeliverPolicy.BY_START_TIME
                cfg.opt_start_time = self._opt_start_time
        return cfg

    # -- the one recovery path ----------------------------------------------------------
    #
    # Every read mode (fetch, next, messages, consume) takes the same path when the
    # consumer under it can no longer be trusted: a sequence gap, missed heartbeats, a
    # deleted or missing consumer (404/409/503), no responders, or a reconnect. ``_lost``
    # drops the consumer; the next read makes a new one (``_ensure``) starting at the
    # stream sequence after the last message handed out, retrying with backoff.

    def _lost(self, exc: BaseException | None) -> None:
        """Drop the current consumer (reporting ``exc``): the next read makes another."""
        if exc is not None:
            self._report(exc)
        if self._consumer is not None:
            self._stale = self._consumer
            self._consumer = None

    async def _ensure(self, deadline: float | None = None) -> Consumer | None:
        """The consumer to read from, made again if it was lost; None if ``deadline``
        (loop time) passed before a new one could be made."""
        consumer = self._consumer
        if consumer is not None:
            return consumer
        return await self._recreate(deadline=deadline)

    async def _recreate(
        self, *, first: bool = False, deadline: float | None = None
    ) -> Consumer | None:
        """Make a consumer from the next sequence, and drop the old one.

        Retries with backoff until it succeeds or ``deadline`` passes (then None). Each
        attempt waits at most ``_ATTEMPT_WAIT`` for the server: during an election a
        request may go unanswered, and the next one finds the new leader. An election
        of the stream heard meanwhile ends the wait or the pause at once (the new
        leader is there to ask). Attempts ask for the same consumer name, so an attempt
        given up on that did land is the same consumer, not a second one; after an
        election the name is a new one.
        ``StreamNotFoundError`` ends it: the stream is gone. With ``first`` (the
        consumer's creation) any error is raised."""
        old = self._consumer or self._stale
        self._consumer = self._stale = None
        self._consumer_seq = 0
        self._tail_dots = 0
        js = self._js
        loop = js.client._loop
        name = next_nuid()
        # A push consumer's inbox goes with its name: an attempt asking again for a
        # consumer that did land must ask for the same config, or the server refuses it
        # as a different consumer of that name, again at every retry.
        deliver = js.client.new_inbox() if self.push else None
        attempt = 0
        scope: asyncio.Timeout | None = None
        elected = False

        def on_election() -> None:
            nonlocal elected
            elected = True
            if scope is not None and not scope.expired():
                with contextlib.suppress(RuntimeError):  # exited meanwhile
                    scope.reschedule(loop.time())

        key = stream_key(self.stream_name)
        watch = not first and js._leaders.active
        if watch:
            js._leaders.add(key, on_election)
        try:
            while True:
                wait = js.timeout if first else min(js.timeout, _ATTEMPT_WAIT)
                if deadline is not None:
                    wait = min(wait, deadline - loop.time())
                    if wait <= 0.01:
                        self._stale = old
                        return None
                elected = False
                try:
                    async with asyncio.timeout(wait) as scope:
                        handle = self._handle
                        if handle is None:
                            handle = self._handle = await stream_consumers(js, self.stream_name)
                        config = self._config()
                        config.name = name
                        if deliver is not None:
                            config.deliver_subject = deliver
                        consumer = await handle._upsert(config, ConsumerAction.CREATE)
                except StreamNotFoundError:
                    raise
                except (NatsError, OSError, TimeoutError) as exc:
                    if first:
                        if isinstance(exc, NatsError | OSError):
                            raise
                        raise NatsTimeoutError(
                            f"no answer making an ordered consumer on stream "
                            f"{self.stream_name!r} within {wait:g}s"
                        ) from None
                    if elected:
                        # A new leader: ask it now, under a new name (one made by the
                        # attempt given up on may live with the old leader).
                        name = next_nuid()
                        deliver = js.client.new_inbox() if self.push else None
                        continue
                    self._report(exc)
                    attempt += 1
                    pause = retry_delay(attempt)
                    if deadline is not None:
                        pause = min(pause, max(deadline - loop.time(), 0.0))
                    # an election ends the pause early
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(pause) as scope:
                            await loop.create_future()
                    continue
                finally:
                    scope = None
                self._consumer = consumer
                if not first:
                    self.resets += 1
                if old is not None:
                    self._drop(old)
                return consumer
        finally:
            if watch:
                js._leaders.remove(key, on_election)

    def _drop(self, old: Consumer) -> None:
        """Ask the server to delete a consumer that was left, without waiting for the
        answer (it may be gone already; if it is not, it expires by itself after
        ``inactive_threshold``)."""
        nc = self._js.client
        if nc.is_connected:
            subject = self._js.api_subject(f"CONSUMER.DELETE.{self.stream_name}.{old.name}")
            with contextlib.suppress(NatsError):
                nc._publish_to_reply(subject, b"", nc.new_inbox().encode(), None)

    def _report(self, exc: BaseException) -> None:
        report_to(self._js.client, self._error_cb, exc)

    def _moved(self) -> JetStreamError:
        return JetStreamError(
            f"stream {self.stream_name!r} elected a new leader: the ordered consumer's "
            "one-replica consumer may be gone with the old one"
        )

    async def delete(self) -> None:
        """Delete the server-side consumer now (best effort) instead of leaving it to
        expire after ``inactive_threshold``. Reading again makes a new one."""
        old, self._consumer = self._consumer or self._stale, None
        self._stale = None
        if old is None:
            return
        try:
            stream = await stream_consumers(self._js, self.stream_name)
            await stream.delete_consumer(old.name)
        except NatsError:
            pass

    def _accept(self, msg: JsMsg) -> bool:
        """True if ``msg`` is the next one in order (and records it).

        Reads only the consumer sequence of the ack subject (the stream sequence and
        the rest are parsed when asked for): the 7th token of 9 in the v1 layout, the
        9th of 11 or more in v2 (see message.py), so the number of tokens after it is
        learnt from the first reply of each consumer.
        """
        reply = msg.reply
        if not reply:
            return False
        k = self._tail_dots
        if not k:
            n = reply.count(".") + 1
            k = self._tail_dots = 3 if n == 9 else n - 8 if n >= 11 else 0
            if not k:
                return False
        try:
            cseq = int(reply.rsplit(".", k)[1])
        except (ValueError, IndexError):
            return False
        if cseq != self._consumer_seq + 1:
            return False
        self._consumer_seq = cseq
        self._last_reply = reply
        return True

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
    ) -> OrderedStream:
        """Every message in order: ``async with oc.messages() as it: async for m in it``.

        ``heartbeat`` (default: half of ``expires``, at most 5 s) is the idle heartbeat
        of its pulls: a consumer lost without a word (no election heard, no reconnect)
        is noticed after two missed ones and made again."""
        hb = heartbeat if heartbeat is not None else min(expires / 2, 5.0)
        return OrderedStream(self, PullOptions(batch=max_messages, expires=expires, heartbeat=hb))

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
        loop = self._js.client._loop
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
    """The iterator of ``OrderedConsumer.messages()``."""

    def __init__(self, oc: OrderedConsumer, opts: PullOptions) -> None:
        self._oc = oc
        self._opts = opts
        self._inner: MessageStream | PushStream | None = None
        self._broken = False
        self._closed = False
        self._started = False
        self._loop = oc._js.client._loop

    def _open(self) -> MessageStream | PushStream:
        inner = self._inner
        if inner is None:
            consumer = self._oc._consumer
            assert consumer is not None
            if consumer.is_push:
                inner = self._inner = PushStream(consumer, error_cb=self._on_error)
            else:
                opts = dataclasses.replace(self._opts)
                inner = self._inner = MessageStream(consumer, opts, self._on_error)
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
        if self._inner is not None:
            self._inner.stop()

    def _start(self) -> None:
        self._started = True
        nc = self._oc._js.client
        if self._on_reconnect not in nc._reconnect_hooks:
            nc._reconnect_hooks.append(self._on_reconnect)
            self._oc._js._leaders.add(stream_key(self._oc.stream_name), self._on_leader)

    def _on_leader(self) -> None:
        self._break(self._oc._moved())

    def _take(self) -> JsMsg | None:
        """The next message if it is buffered and in order, else None (then
        ``__anext__`` waits, or starts over after a gap). No coroutine is made."""
        inner = self._inner
        if inner is not None and not self._broken and not self._closed:
            msg = inner._take()
            if msg is not None:
                if self._oc._accept(msg):
                    return msg
                self._break(None)
        return None

    async def __anext__(self) -> JsMsg:
        # The common case without a coroutine of the inner stream: a buffered message.
        msg = self._take()
        if msg is not None:
            return msg
        if not self._started:
            self._start()
        while True:
            if self._closed:
                raise StopAsyncIteration
            if self._oc._consumer is None or self._broken:
                await self._reset()
            inner = self._open()
            try:
                msg = await inner.__anext__()
            except StopAsyncIteration:
                if self._closed:
                    raise
                self._break(None)
                continue
            except NatsError as exc:  # a deleted consumer, a refused pull
                self._break(exc)
                continue
            if self._oc._accept(msg):
                return msg
            self._break(None)

    async def _reset(self) -> None:
        if self._inner is not None:
            self._inner.stop()
            self._inner = None
        # A break heard while the consumer is being made (an election, a reconnect)
        # is the making's own to recover from (it asks again): not a second reset.
        await self._oc._ensure()
        self._broken = False

    def stop(self) -> None:
        """Stop: unsubscribe; the iteration ends."""
        self._closed = True
        nc = self._oc._js.client
        if self._on_reconnect in nc._reconnect_hooks:
            nc._reconnect_hooks.remove(self._on_reconnect)
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
