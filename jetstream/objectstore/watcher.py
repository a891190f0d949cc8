"""``ObjectWatcher``: the infos of a bucket's objects as they change (``store.watch()``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Protocol, Self

import msgspec

from ..api import DeliverPolicy
from .meta import ObjectInfo, decode_info, format_time

if TYPE_CHECKING:
    from ..ordered import OrderedConsumer, OrderedStream
    from ..stream import Stream

__all__ = ["ObjectWatcher"]


class _Store(Protocol):
    """What a watcher uses of its bucket (``store.ObjectStore``)."""

    _meta_prefix: str

    async def _get_stream(self) -> Stream: ...


class ObjectWatcher:
    """Async iterator of ``ObjectInfo`` (and one ``None`` after the initial values)."""

    def __init__(
        self, store: _Store, include_history: bool, ignore_deletes: bool, updates_only: bool
    ) -> None:
        self._store = store
        self._history = include_history
        self._ignore_deletes = ignore_deletes
        self._updates_only = updates_only
        self._it: OrderedStream | None = None
        self._oc: OrderedConsumer | None = None
        self._marker = not updates_only  # a None is still owed
        self._init_left = -1
        self._stopped = False

    async def _start(self) -> None:
        store = self._store
        stream = await store._get_stream()
        if self._updates_only:
            policy = DeliverPolicy.NEW
        elif self._history:
            policy = DeliverPolicy.ALL
        else:
            policy = DeliverPolicy.LAST_PER_SUBJECT
        oc = self._oc = await stream.ordered_consumer(
            filter_subjects=[store._meta_prefix + ">"],
            deliver_policy=policy,
            inactive_threshold=30.0,
        )
        consumer = oc.consumer
        pending = consumer.cached_info.num_pending if consumer is not None else 0
        self._init_left = pending
        self._it = oc.messages(max_messages=256)

    async def __aenter__(self) -> Self:
        await self._start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def stop(self) -> None:
        """End the iteration (the consumer expires by itself; ``close`` removes it now)."""
        self._stopped = True
        if self._it is not None:
            self._it.stop()

    async def close(self) -> None:
        """End the iteration and delete the consumer underneath."""
        self.stop()
        oc, self._oc = self._oc, None
        if oc is not None:
            await oc.delete()

    def __aiter__(self) -> AsyncIterator[ObjectInfo | None]:
        return self

    async def __anext__(self) -> ObjectInfo | None:
        if self._stopped:
            raise StopAsyncIteration
        if self._it is None:
            await self._start()
        assert self._it is not None
        while True:
            if self._marker and self._init_left == 0:
                self._marker = False
                return None
            msg = await self._it.__anext__()
            if self._init_left > 0:
                self._init_left = msg.metadata.num_pending
            try:
                info = decode_info(msg.data)
            except msgspec.DecodeError:
                continue
            if info.deleted and self._ignore_deletes:
                continue
            ts = msg.metadata.timestamp
            return msgspec.structs.replace(info, mtime=format_time(ts))
