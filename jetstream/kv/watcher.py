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

from bisect import bisect_left
from collections import deque
from collections.abc import Sequence
from itertools import compress, repeat
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Protocol, Self

from ..api import DeliverPolicy
from ..errors import NatsError
from ..errors import TimeoutError as NatsTimeoutError
from .entry import KeyValueEntry, KeyValueOp, Watched, validate_key_filter, watched_class

if TYPE_CHECKING:
    from ..ordered import OrderedConsumer, OrderedStream
    from ..stream import Stream

__all__ = ["KeyWatcher"]

_hdr_of = attrgetter("hdr")
_reply_of = attrgetter("reply")
_revision_of = attrgetter("revision")


class _Bucket(Protocol):
    """What a watcher reads of its bucket (``bucket.KeyValue``)."""

    bucket: str
    #: the subject prefix its keys are stored under
    _pre: str
    _stream: Stream
    #: read by push (else by pull)
    _watch_push: bool


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
        # Push-based, as other NATS clients' watchers (the server sends without being
        # asked, with flow control), unless the bucket is reached through an API prefix
        # or a domain: then pulls, whose deliveries answer requests made through it (a
        # push consumer's deliver subject would need an import of its own).
        oc = self._oc = await kv._stream.ordered_consumer(
            filter_subjects=[self._pre + f for f in self.filters],
            deliver_policy=policy,
            opt_start_seq=self._resume,
            headers_only=self._meta_only,
            push=kv._watch_push,
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
        # Each delivery is made an entry by the parser (one object a revision).
        self._it = oc.messages(max_messages=1000, msg_type=watched_class(kv.bucket, self._pre))
        return self._it

    async def __anext__(self) -> KeyValueEntry | None:
        ready = self._ready
        if ready:
            out = ready.popleft()
            if out is None:
                self.up_to_date = True
            return out
        return await self._more()

    async def _more(self) -> KeyValueEntry | None:
        """``__anext__`` when nothing is ready: what is buffered in order, at once, or
        what comes first."""
        ready = self._ready
        while not ready:
            it = self._it
            if it is None:
                if self._stopped:
                    raise StopAsyncIteration
                it = await self._start()
                if ready:
                    break
            self._add(await it.take_many(None))
        out = ready.popleft()
        if out is None:
            self.up_to_date = True
        return out

    def _add(self, run: list[Any]) -> None:
        """The entries of ``run`` (in order) into ``_ready``, the marker where it
        belongs, deletes and purges left out with ``ignore_deletes``."""
        at = -1 if self._init_done else self._marker_at(run)
        if self._ignore_deletes and any(map(_hdr_of, run)):
            put = KeyValueOp.PUT
            keep = [e.operation is put for e in run]
            at = sum(keep[:at]) if at > 0 else at
            run = list(compress(run, keep))
        ready = self._ready
        if at < 0:
            ready.extend(run)
        else:
            self._init_done = True
            ready.extend(run[:at])
            ready.append(None)
            ready.extend(run[at:])

    def _marker_at(self, run: list[Watched]) -> int:
        """Where the marker goes in ``run`` (the index it takes; -1: not in it): before
        the first revision above ``snapshot_revision``, or after the first one that is
        it or had nothing pending (see the module docstring). A run's revisions ascend,
        so only the last's is read unless the snapshot is reached; a pending count of 0
        is told by the end of its ack subject."""
        last = self.snapshot_revision
        n = len(run)
        if (run[0].reply or "").count(".") == 8:
            # the v1 layout: the pending count is the last token
            flags = list(map(str.endswith, map(_reply_of, run), repeat(".0")))
            zero = flags.index(True) if True in flags else n
        else:
            zero = next((i for i, e in enumerate(run) if e.delta == 0), n)
        if run[-1].revision >= last:
            # the first revision at or past the snapshot, found by halves (each revision
            # read is an ack subject parsed)
            end = min(zero + 1, n)
            i = bisect_left(run, last, 0, end, key=_revision_of)
            if i < end:
                return i + 1 if run[i].revision == last else i
        return zero + 1 if zero < n else -1

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
