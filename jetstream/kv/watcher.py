"""KeyWatcher: the changes of a bucket's keys, with an "up to date" marker.

A watcher is an ordered consumer on the bucket's stream, filtered by the server
to the watched keys (``filter_subjects``). It delivers the current values first
(the last revision of each key, or every kept revision with
``include_history``), then yields ``None`` exactly once, then yields live
updates for as long as it runs. The ordered consumer makes it survive
reconnects and server restarts without losing or repeating a revision.

When is it up to date? Counting deliveries against the pending count seen when
the consumer was made goes wrong while writers are busy. This watcher reads the
stream's last sequence ``S`` (``snapshot_revision``) right after making its
consumer, so every revision up to ``S`` is in the consumer's view (the last
value of each key as the consumer was made, then every later revision in order),
and yields the marker:

- at once, when nothing matched as the consumer was made (then ``S`` is the last
  sequence read just before making it), with ``updates_only``, or with a resume
  point past ``S``;
- right after a revision with ``num_pending`` 0 (nothing else matching was
  stored when it was delivered) or with revision ``S`` itself;
- right before the first revision above ``S`` (a write made after the watch
  started).

So, for every watched key, its latest revision up to ``S`` comes before the
marker, nothing above ``S`` does, and the marker never waits for writers to
pause. A key may show up more than once before the marker when it changed
between the consumer's creation and ``S``; the last one is its value at ``S``.
One exception the server imposes: a revision up to ``S`` that the bucket's
``history`` limit discards before the watcher reaches it (the key was written
again meanwhile) cannot be delivered; its successor, above ``S``, comes right
after the marker.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, Self

from ..api import DeliverPolicy
from ..errors import NatsError
from ..errors import TimeoutError as NatsTimeoutError
from .entry import KeyValueEntry, KeyValueOp, operation_of, validate_key_filter

if TYPE_CHECKING:
    from ..message import JsMsg
    from ..ordered import OrderedConsumer, OrderedStream
    from ..stream import Stream

__all__ = ["KeyWatcher"]

#: messages made into entries at a time, at most
_BATCH = 256


class _Bucket(Protocol):
    """What a watcher reads of its bucket (``bucket.KeyValue``)."""

    bucket: str
    #: the subject prefix its keys are stored under
    _pre: str
    _stream: Stream


class KeyWatcher:
    """An async iterator of ``KeyValueEntry | None`` (``None``: the up-to-date marker).

    Made by ``kv.watch(...)`` / ``kv.watch_all(...)``; use it as an async context
    manager (it stops and deletes its consumer on exit) or call ``stop()``::

        async with kv.watch("cfg.>") as w:
            async for entry in w:
                if entry is None:      # every current value has been delivered
                    ...
                else:
                    ...

    The marker is yielded exactly once, also when there is nothing to deliver
    (then it comes first). ``up_to_date`` turns true when it is yielded.
    """

    def __init__(
        self,
        kv: _Bucket,
        filters: Sequence[str],
        *,
        include_history: bool = False,
        ignore_deletes: bool = False,
        meta_only: bool = False,
        updates_only: bool = False,
        resume_from_revision: int | None = None,
    ) -> None:
        if not filters:
            raise ValueError("watch needs at least one key filter")
        for f in filters:
            validate_key_filter(f)
        if updates_only and (include_history or resume_from_revision is not None):
            raise ValueError("updates_only cannot be combined with include_history or a resume")
        if resume_from_revision is not None and resume_from_revision < 1:
            raise ValueError("resume_from_revision starts at 1")
        self._kv = kv
        self._pre = kv._pre
        self.filters = list(filters)
        self._include_history = include_history
        self._ignore_deletes = ignore_deletes
        self._meta_only = meta_only
        self._updates_only = updates_only
        self._resume = resume_from_revision
        self._oc: OrderedConsumer | None = None
        self._it: OrderedStream | None = None
        #: the stream's last sequence when the watch started (see the module docstring)
        self.snapshot_revision = 0
        self._init_done = False
        #: what comes next, made from the messages buffered in order (None: the marker)
        self._ready: deque[KeyValueEntry | None] = deque()
        #: true once the up-to-date marker has been yielded
        self.up_to_date = False
        self._stopped = False

    async def _start(self) -> OrderedStream:
        kv = self._kv
        before = (await kv._stream.info()).state.last_seq
        if self._updates_only:
            policy = DeliverPolicy.NEW
        elif self._include_history or self._resume is not None:
            policy = DeliverPolicy.ALL
        else:
            policy = DeliverPolicy.LAST_PER_SUBJECT
        oc = self._oc = await kv._stream.ordered_consumer(
            filter_subjects=[self._pre + f for f in self.filters],
            deliver_policy=policy,
            opt_start_seq=self._resume,
            headers_only=self._meta_only,
        )
        consumer = oc.consumer
        if self._updates_only or (consumer is not None and consumer.cached_info.num_pending == 0):
            # Nothing matched when the consumer was made (nor, then, at ``before``):
            # whatever comes is a change made after the watch started.
            self.snapshot_revision = before
            self._init_done = True
            self._ready.append(None)
        else:
            # Read after the consumer exists: every revision up to here is in its view.
            last = self.snapshot_revision = (await kv._stream.info()).state.last_seq
            if self._resume is not None and self._resume > last:
                self._init_done = True
                self._ready.append(None)
        self._it = oc.messages(max_messages=1000)
        return self._it

    async def __anext__(self) -> KeyValueEntry | None:
        ready = self._ready
        if not ready:
            it = self._it
            if it is None:
                if self._stopped:
                    raise StopAsyncIteration
                it = await self._start()
            while not ready:
                # what is buffered in order, at once (a coroutine only to wait)
                msg = it.take_nowait()
                if msg is None:
                    msg = await it.__anext__()
                batch = [msg]
                while len(batch) < _BATCH and (msg := it.take_nowait()) is not None:
                    batch.append(msg)
                self._convert(batch)
        out = ready.popleft()
        if out is None:
            self.up_to_date = True
        return out

    def _convert(self, batch: list[JsMsg]) -> None:
        """The entries of ``batch`` into ``_ready``, the marker where it belongs."""
        ready = self._ready
        bucket = self._kv.bucket
        pre_len = len(self._pre)
        meta_only = self._meta_only
        ignore_deletes = self._ignore_deletes
        put = KeyValueOp.PUT
        for msg in batch:
            # The ack subject, read once: ...<sseq>.<cseq>.<timestamp ns>.<pending>
            # (v1 has 9 tokens, v2 11 or more; see message.parse_ack_subject).
            t = (msg.reply or "").split(".")
            if len(t) == 9:
                seq, ts, pending = int(t[5]), int(t[7]), int(t[8])
            else:
                seq, ts, pending = int(t[7]), int(t[9]), int(t[10])
            op = operation_of(msg.headers) if msg.raw_headers else put
            entry: KeyValueEntry | None = None
            if not (ignore_deletes and op is not put):
                entry = KeyValueEntry(
                    bucket,
                    msg.subject[pre_len:],
                    b"" if meta_only else msg.data,
                    seq,
                    ts,
                    pending,
                    op,
                )
            if not self._init_done:
                last = self.snapshot_revision
                if seq > last:
                    # A write made after the watch started: the marker comes first.
                    self._init_done = True
                    ready.append(None)
                elif seq == last or pending == 0:
                    self._init_done = True
                    if entry is not None:
                        ready.append(entry)
                    ready.append(None)
                    continue
            if entry is not None:
                ready.append(entry)

    def __aiter__(self) -> Self:
        return self

    async def next(self, timeout: float | None = None) -> KeyValueEntry | None:
        """The next entry (or the marker), waiting at most ``timeout`` seconds.

        Raises:
            TimeoutError: nothing arrived in time.
            StopAsyncIteration: the watcher was stopped.
        """
        import asyncio

        try:
            async with asyncio.timeout(timeout):
                return await self.__anext__()
        except TimeoutError as exc:
            if isinstance(exc, NatsError):
                raise
            raise NatsTimeoutError(f"watch of {self.filters}: nothing within {timeout}s") from None

    async def stop(self) -> None:
        """Stop watching: the iteration ends and the consumer is deleted (best effort)."""
        self._stopped = True
        self._ready.clear()
        if self._it is not None:
            self._it.stop()
        oc = self._oc
        self._oc = None
        if oc is not None:
            await oc.delete()

    async def __aenter__(self) -> Self:
        if self._it is None:
            await self._start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
