"""What the ordered consumer's read modes share (``ordered.py``): the consumer under
them, the order of what was handed out, and the one recovery path.

Every delivered message must carry the next consumer sequence. On a gap, a missed
heartbeat, a deleted consumer, a pull that nobody answers or a reconnect, the consumer
is dropped and made again from the stream sequence after the last one handed out,
with backoff, as many times as it takes.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as _dt
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ._context import Context
from ._leaders import stream_key
from ._reader import report_to
from ._retry import Backoff
from ._stream_consumers import StreamConsumers, stream_consumers
from .api import AckPolicy, ConsumerAction, ConsumerConfig, DeliverPolicy, ReplayPolicy
from .consumer import Consumer
from .errors import JetStreamError, NatsError, StreamNotFoundError
from .errors import TimeoutError as NatsTimeoutError
from .message import ack_stream_index, parse_ack_subject
from .protocol.subjects import next_nuid

if TYPE_CHECKING:
    from .message import JsMsg

__all__ = ["OrderedBase", "consumer_seq"]

# The longest one attempt to make the consumer again waits for the server's answer.
_ATTEMPT_WAIT = 1.0


def consumer_seq(reply: str | None, tail_dots: int) -> int:
    """The consumer sequence of an ack subject with ``tail_dots`` dots after it (-1:
    none there)."""
    try:
        return int((reply or "").rsplit(".", tail_dots)[1])
    except (ValueError, IndexError):
        return -1


class OrderedBase:
    """The state and the recovery path of an ordered consumer (``OrderedConsumer``)."""

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

    def _config(self, name: str, deliver: str | None) -> ConsumerConfig:
        """The config of the consumer ``name``, from the next sequence (``deliver``: the
        push consumer's inbox)."""
        cfg = ConsumerConfig(
            name=name,
            ack_policy=AckPolicy.NONE,
            max_deliver=1,
            mem_storage=True,
            num_replicas=1,
            inactive_threshold=self._inactive,
            replay_policy=self._replay,
        )
        if self._headers_only:
            cfg.headers_only = True
        if deliver is not None:
            cfg.deliver_subject = deliver
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
        election the name is a new one. A making cancelled or given up asks the server
        to delete what its attempts may have made (the answer that would name it to
        the reader never came).
        ``StreamNotFoundError`` ends it: the stream is gone. With ``first`` (the
        consumer's creation) any error is raised."""
        old = self._consumer or self._stale
        self._consumer = self._stale = None
        self._consumer_seq = 0
        self._tail_dots = 0
        js = self._js
        loop = js.client.loop
        name = next_nuid()
        # A push consumer's inbox goes with its name: an attempt asking again for a
        # consumer that did land must ask for the same config, or the server refuses it
        # as a different consumer of that name, again at every retry.
        deliver = js.client.new_inbox() if self.push else None
        backoff = Backoff(deadline, floor=0.0)
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
        asked: set[str] = set()  # the names asked for, answered or not
        made = False
        try:
            while True:
                wait = js.timeout if first else min(js.timeout, _ATTEMPT_WAIT)
                if deadline is not None:
                    wait = min(wait, deadline - loop.time())
                    if wait <= 0.01:
                        return None
                elected = False
                try:
                    async with asyncio.timeout(wait) as scope:
                        handle = self._handle
                        if handle is None:
                            handle = self._handle = await stream_consumers(js, self.stream_name)
                        config = self._config(name, deliver)
                        asked.add(name)
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
                    pause = backoff.next_pause() or 0.0
                    # an election ends the pause early
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(pause) as scope:
                            await loop.create_future()
                    continue
                finally:
                    scope = None
                self._consumer = consumer
                made = True
                if not first:
                    self.resets += 1
                asked.discard(consumer.name)
                for lost in asked:  # an attempt given up on may have landed
                    self._drop(lost)
                if old is not None:
                    self._drop(old.name)
                return consumer
        finally:
            if watch:
                js._leaders.remove(key, on_election)
            if not made:
                # Cancelled, or given up (a deadline, an error): an attempt that was not
                # answered may have made its consumer, which nobody would read or delete
                # (the next making asks for another name). The old one stays the ordered
                # consumer's, dropped by its next making or by ``delete()``.
                for lost in asked:
                    self._drop(lost)
                if self._stale is None:
                    self._stale = old

    def _drop(self, name: str) -> None:
        """Ask the server to delete the consumer ``name``, left behind, without waiting
        for the answer (it may be gone, or never made; if it is there and the request
        is lost, it expires by itself after ``inactive_threshold``)."""
        nc = self._js.client
        if nc.is_connected:
            subject = self._js.api_subject(f"CONSUMER.DELETE.{self.stream_name}.{name}")
            with contextlib.suppress(NatsError):
                nc.write_publish(subject, b"", nc.new_inbox().encode(), None)

    def _report(self, exc: BaseException) -> None:
        report_to(self._js.client, self._error_cb, exc)

    def _moved(self) -> JetStreamError:
        return JetStreamError(
            f"stream {self.stream_name!r} elected a new leader: the ordered consumer's "
            "one-replica consumer may be gone with the old one"
        )

    def _accept(self, msg: JsMsg) -> bool:
        """True if ``msg`` is the next one in order (and records it)."""
        return self._accept_reply(msg.reply)

    def _accept_reply(self, reply: str | None) -> bool:
        """True if the message of ack subject ``reply`` is the next one in order (and
        records it).

        Reads only the consumer sequence of the ack subject (the stream sequence and
        the rest are parsed when asked for), four tokens after the stream's name
        (``ack_stream_index``), so the number of tokens after it is learnt from the
        first reply of each consumer.
        """
        if not reply:
            return False
        k = self._tail_dots
        if not k:
            n = reply.count(".") + 1
            at = ack_stream_index(n)
            if at < 0:
                return False
            k = self._tail_dots = n - at - 4
        cseq = consumer_seq(reply, k)
        if cseq != self._consumer_seq + 1:
            return False
        self._consumer_seq = cseq
        self._last_reply = reply
        return True
