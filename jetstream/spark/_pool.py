"""One connection per process and connection settings, reused by every task that writes.

A Spark executor runs its tasks one after another in a few long-lived Python workers
(``spark.python.worker.reuse``, on by default). The sinks and the writers used to open a
connection per task, which a batch of 200 tiny partitions paid 200 times. Here the
process has one event loop, run by a thread of its own for as long as the process lives
(``run_pooled`` hands a task's coroutine to it and waits), and a task leases the
connection and JetStream context cached on it for its settings (``lease``): the first
task of a worker connects, the next ones reuse it. Since the loop never stops between
tasks, a cached connection answers the server's pings, reconnects and times its acks as
any connection does.

- **Threads.** Tasks of several threads at once (the driver's: ``mode="driver"``, Spark
  Connect's foreachBatch functions) share the connection; each lease has a JetStream
  context of its own (its publish window), taken from those its connection has free.
- **Dead connections.** A cached client that was closed (its reconnects ran out) is
  replaced at the next lease; one that is reconnecting is kept: its publishes wait for the
  reconnect as they would on a fresh one. A lease whose task failed leaves its JetStream
  context behind (its window may still hold publishes), never to a later task.
- **Idle connections** are closed once unused for ``IDLE`` seconds, and every cached
  connection at the process's exit (``atexit``; a Spark worker that is killed or ends with
  ``os._exit`` has its sockets closed by the OS: every row was confirmed before its task
  returned, so nothing is lost).
- **Fork.** A pool made in a parent process is left alone, not used, in a child.

A coroutine that runs elsewhere (a test's own loop) leases a connection of its own,
closed when the lease ends.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import pickle
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from ._common import run_sync

if TYPE_CHECKING:
    from jetstream import Client

    from ._common import ConnectSpec

__all__ = ["IDLE", "close_all", "lease", "run_pooled"]

T = TypeVar("T")

#: seconds a cached connection may stay unused before the next lease on its loop closes it
IDLE = 60.0


@dataclass
class _Entry:
    """A cached connection, the JetStream contexts made on it that no task holds, how
    many leases hold it, and when the last one ended."""

    nc: Client
    free: dict[bytes, list[Any]] = field(default_factory=dict)
    used: float = 0.0
    holders: int = 0


class _Pool:
    """The process's loop, its thread, and the connections cached on it."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.loop = asyncio.new_event_loop()
        self.entries: dict[bytes, _Entry] = {}
        self.connecting: dict[bytes, asyncio.Lock] = {}
        self.reaper: asyncio.TimerHandle | None = None
        self.thread = threading.Thread(target=self._run, name="jetstream-spark", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def usable(self) -> bool:
        return self.pid == os.getpid() and self.thread.is_alive() and not self.loop.is_closed()

    def reap_later(self) -> None:
        if self.reaper is None:
            self.reaper = self.loop.call_later(IDLE / 2, self._reap)

    def _reap(self) -> None:
        self.reaper = None
        now = time.monotonic()
        for key, entry in list(self.entries.items()):
            if not entry.holders and now - entry.used > IDLE:
                del self.entries[key]
                self.loop.create_task(_close(entry.nc))
        if self.entries:
            self.reap_later()

    async def close(self) -> None:
        entries, self.entries = list(self.entries.values()), {}
        for entry in entries:
            await _close(entry.nc)


async def _close(nc: Client) -> None:
    with contextlib.suppress(Exception):
        await nc.close()


_pool_lock = threading.Lock()
_the_pool: _Pool | None = None


def _pool() -> _Pool:
    global _the_pool
    with _pool_lock:
        if _the_pool is None or not _the_pool.usable():
            _the_pool = _Pool()
        return _the_pool


def run_pooled(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion on the process's lasting loop, where ``lease`` reuses
    connections across calls, and return its result (or raise its error)."""
    pool = _pool()
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is pool.loop:  # called from a coroutine of the pool itself: cannot wait
        return run_sync(coro)
    fut = asyncio.run_coroutine_threadsafe(coro, pool.loop)
    try:
        return fut.result()
    except BaseException:
        fut.cancel()  # interrupted while waiting: the coroutine is cancelled too
        raise


def _current() -> _Pool | None:
    """The pool, if the running loop is its loop."""
    pool = _the_pool
    if pool is None or pool.pid != os.getpid():
        return None
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        return None
    return pool if running is pool.loop else None


@contextlib.asynccontextmanager
async def lease(
    spec: ConnectSpec,
    connect: Callable[[], Awaitable[Client]],
    overrides: dict[str, Any] | None = None,
    **js_options: Any,
) -> AsyncIterator[Any]:
    """A JetStream context (``spec.jetstream(nc, **js_options)``) on the connection cached
    for ``spec`` and ``overrides`` (the connect options the caller adds to the spec's),
    made with ``connect()`` when there is none or it was closed; for the time of the
    ``async with``. Outside ``run_pooled``'s loop the connection is the lease's own."""
    pool = _current()
    if pool is None:
        nc = await connect()
        try:
            yield spec.jetstream(nc, **js_options)
        finally:
            await nc.close()
        return
    key = pickle.dumps((spec, sorted((overrides or {}).items())))
    lock = pool.connecting.setdefault(key, asyncio.Lock())
    async with lock:  # two leases at once on one loop make one connection
        entry = pool.entries.get(key)
        if entry is None or entry.nc.is_closed:
            entry = pool.entries[key] = _Entry(await connect())
    entry.holders += 1
    pool.reap_later()
    js_key = pickle.dumps(sorted(js_options.items()))
    free = entry.free.setdefault(js_key, [])
    js = free.pop() if free else spec.jetstream(entry.nc, **js_options)
    ok = False
    try:
        yield js
        ok = True
    finally:
        entry.holders -= 1
        entry.used = time.monotonic()
        if ok and not js.publish_async_pending and not entry.nc.is_closed:
            free.append(js)


def close_all() -> None:
    """Close the pool's connections and stop its loop (at the process's exit)."""
    pool = _the_pool
    if pool is None or not pool.usable():
        return
    with contextlib.suppress(Exception):
        asyncio.run_coroutine_threadsafe(pool.close(), pool.loop).result(timeout=5)
    pool.loop.call_soon_threadsafe(pool.loop.stop)


atexit.register(close_all)
