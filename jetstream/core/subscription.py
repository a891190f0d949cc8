"""Core subscriptions: a bounded deque and one waiter, or an in-order callback.

The receive path calls ``Subscription._deliver(op)`` straight from
``data_received``: no task and no future per message. A reader waiting in
``__anext__`` owns the only future. Past the pending limits a message is
dropped and counted, and the error callback hears of it once per episode, so a
slow reader never stalls the shared socket.
"""

from __future__ import annotations

import asyncio
import inspect
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Protocol

from ..errors import ConnectionClosedError, NatsError, SlowConsumerError
from ..errors import TimeoutError as NatsTimeoutError
from .message import Msg

__all__ = [
    "DEFAULT_PENDING_BYTES",
    "DEFAULT_PENDING_MSGS",
    "MsgHandler",
    "Subscription",
    "SubscriptionOwner",
]

#: A subscription's default pending limits, nats.go's: 512k messages or 64 MiB queued
#: before new ones are dropped (a fast publisher in the same process does not trip them).
DEFAULT_PENDING_MSGS = 512 * 1024
DEFAULT_PENDING_BYTES = 64 * 1024 * 1024

MsgHandler = Callable[[Msg], Awaitable[None] | None]


class SubscriptionOwner(Protocol):
    """What a ``Subscription`` needs of the client it belongs to."""

    @property
    def _loop(self) -> asyncio.AbstractEventLoop: ...

    def report_error(self, exc: BaseException) -> None: ...

    def remove_delivery(self, sid: int) -> None: ...

    def send_unsub(self, sid: int, max_msgs: int | None) -> None: ...

    async def flush(self, timeout: float = 10.0) -> None: ...


class Subscription:
    """A subscription on a subject: an async iterator of ``Msg``, or a callback.

    Iterate with ``async for msg in sub`` or call ``await sub.next_msg(timeout)``.
    With ``cb=``, the callback runs for each message in order: a plain function
    is called right from the receive path; a coroutine function runs in one
    task per subscription (never a task per message).
    """

    def __init__(
        self,
        client: SubscriptionOwner,
        sid: int,
        subject: str,
        queue: str | None,
        cb: MsgHandler | None,
        max_msgs: int | None,
        pending_msgs_limit: int,
        pending_bytes_limit: int,
    ) -> None:
        self._client = client
        self.sid = sid
        self.subject = subject
        self.queue = queue
        self._cb = cb
        self._cb_is_async = cb is not None and inspect.iscoroutinefunction(cb)
        self.max_msgs = max_msgs
        self.pending_msgs_limit = pending_msgs_limit
        self.pending_bytes_limit = pending_bytes_limit
        self._queue: deque[Msg] = deque()
        self._pending_bytes = 0
        self._waiter: asyncio.Future[None] | None = None
        self._task: asyncio.Task[None] | None = None
        #: messages handed to this subscription by the server (dropped ones included)
        self.received = 0
        #: messages dropped because the pending limits were passed
        self.dropped = 0
        self._dropped_bytes = 0
        self._slow = False
        self._closed = False
        self._error: BaseException | None = None
        self._deliver: Callable[[Msg], None] = (
            self._deliver_cb if cb is not None and not self._cb_is_async else self._deliver_queue
        )
        self._deliver_many: Callable[[list[Msg], int], bool] | None = (
            None if cb is not None and not self._cb_is_async else self._deliver_queue_many
        )
        if self._cb_is_async:
            self._task = asyncio.get_running_loop().create_task(
                self._run_async_cb(), name=f"jetstream-sub-{sid}"
            )

    # -- receive path -----------------------------------------------------

    # Two specialised receive paths, picked once in __init__ (``self._deliver``): the
    # hot one appends to the deque and wakes the reader (or the task of an async
    # callback); the other runs a plain callback inline. ``_deliver_queue_many`` takes
    # a whole feed at once. None creates a task or a future per message.
    #
    # An async callback always runs in the subscription's task, never started from
    # the receive path: a handler may use ``asyncio.timeout()`` or anything else that
    # needs a current task, and may close the client.

    def _deliver_queue(self, op: Msg) -> None:
        self.received += 1
        q = self._queue
        pending = self._pending_bytes + len(op.payload)
        if len(q) < self.pending_msgs_limit and pending <= self.pending_bytes_limit:
            q.append(op)
            self._pending_bytes = pending
            if self._waiter is not None:
                self._wake()
        else:
            self._drop(len(op.payload))
        if self.max_msgs is not None:
            self._check_max()

    def _deliver_queue_many(self, ops: list[Msg], size: int) -> bool:
        """``_deliver_queue`` of all ``ops`` (``size``: their payload bytes) in one
        ``extend``, when they all fit under the limits and no max_msgs is counting;
        else False (nothing taken)."""
        q = self._queue
        pending = self._pending_bytes + size
        if (
            self.max_msgs is not None
            or len(q) + len(ops) > self.pending_msgs_limit
            or pending > self.pending_bytes_limit
        ):
            return False
        self.received += len(ops)
        q.extend(ops)
        self._pending_bytes = pending
        if self._waiter is not None:
            self._wake()
        return True

    def _wake(self) -> None:
        """Wake the reader (or the callback task) waiting for a message."""
        w = self._waiter
        if w is not None:
            self._waiter = None
            try:
                w.set_result(None)
            except asyncio.InvalidStateError:  # the reader was cancelled meanwhile
                pass

    def _deliver_cb(self, op: Msg) -> None:
        self.received += 1
        assert self._cb is not None
        try:
            self._cb(op)
        except Exception as exc:  # a user callback must not kill the read loop
            self._client.report_error(exc)
        if self.max_msgs is not None:
            self._check_max()

    def _drop(self, size: int) -> None:
        self.dropped += 1
        self._dropped_bytes += size
        if not self._slow:
            self._slow = True
            self._client.report_error(
                SlowConsumerError(self.subject, self.sid, self.dropped, self._dropped_bytes)
            )

    def _check_max(self) -> None:
        if self.max_msgs is not None and self.received >= self.max_msgs:
            # The server has auto-unsubscribed; no more will come.
            self._client.remove_delivery(self.sid)
            self._finish(None)

    def _finish(self, error: BaseException | None) -> None:
        """End the subscription: readers get what is queued, then the end (or the error)."""
        if self._closed:
            return
        self._closed = True
        self._error = error
        w = self._waiter
        if w is not None and not w.done():
            self._waiter = None
            w.set_result(None)

    # -- consumer side ----------------------------------------------------

    def _pop(self) -> Msg:
        msg = self._queue.popleft()
        self._pending_bytes -= len(msg.payload)
        if self._slow and not self._queue:
            self._slow = False
        return msg

    async def _wait(self) -> None:
        w = self._client._loop.create_future()  # no get_running_loop(): it calls getpid()
        self._waiter = w
        try:
            await w
        finally:
            self._waiter = None

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> Msg:
        q = self._queue
        while True:
            if q:
                msg = q.popleft()
                self._pending_bytes -= len(msg.payload)
                if self._slow and not q:
                    self._slow = False
                return msg
            if self._cb is not None:
                raise TypeError("a subscription with a callback cannot be iterated")
            if self._closed:
                if self._error is not None:
                    raise self._error
                raise StopAsyncIteration
            await self._wait()

    async def next_msg(self, timeout: float | None = 1.0) -> Msg:
        """Return the next message, waiting at most ``timeout`` seconds (None: forever).

        Raises:
            TimeoutError: nothing arrived in time.
            ConnectionClosedError: the subscription ended (unsubscribed or closed).
        """
        if self._queue and self._cb is None:
            return self._pop()  # queued: no timeout to arm
        try:
            async with asyncio.timeout(timeout):
                return await self.__anext__()
        except StopAsyncIteration:
            raise ConnectionClosedError(f"subscription on {self.subject!r} has ended") from None
        except TimeoutError:
            raise NatsTimeoutError(f"no message on {self.subject!r} within {timeout}s") from None

    async def take_many(self, timeout: float | None = 30.0) -> list[Msg]:
        """Every message queued, at once, in order: at least one, waiting at most
        ``timeout`` seconds (None: forever) for it. For a reader that works on batches:
        one call for what a feed brought, not an ``async for`` step a message.

        Raises:
            TimeoutError: nothing arrived in time.
            ConnectionClosedError: the subscription ended and nothing is left.
            TypeError: the subscription has a callback.
        """
        if self._cb is not None:
            raise TypeError("a subscription with a callback cannot be read")
        q = self._queue
        if q:
            msgs = list(q)
        else:
            msgs = [await self.next_msg(timeout)]  # counted out of the pending bytes
            if not q:
                return msgs
            msgs += q
        q.clear()
        self._pending_bytes = 0
        self._slow = False
        return msgs

    async def _run_async_cb(self) -> None:
        cb = self._cb
        assert cb is not None
        while True:
            while self._queue:
                msg = self._pop()
                try:
                    await cb(msg)  # type: ignore[misc]
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    self._client.report_error(exc)
            if self._closed:
                return
            await self._wait()

    # -- control ----------------------------------------------------------

    @property
    def pending_msgs(self) -> int:
        """Messages received and not yet handed to the reader."""
        return len(self._queue)

    @property
    def pending_bytes(self) -> int:
        """Payload bytes received and not yet handed to the reader."""
        return self._pending_bytes

    @property
    def closed(self) -> bool:
        """True once no more messages will arrive."""
        return self._closed

    async def unsubscribe(self, limit: int | None = None) -> None:
        """Stop the subscription, or with ``limit`` let it end after that many messages in all.

        Messages already queued can still be read; then iteration ends.
        """
        if self._closed:
            return
        if limit is not None and limit > self.received:
            self.max_msgs = limit
            self._client.send_unsub(self.sid, limit)
            return
        self._client.send_unsub(self.sid, None)
        self._client.remove_delivery(self.sid)
        self._finish(None)

    async def drain(self, timeout: float = 30.0) -> None:
        """Unsubscribe, then wait until the messages already received are handled."""
        if not self._closed:
            self._client.send_unsub(self.sid, None)
            try:
                await self._client.flush(timeout=timeout)
            except NatsError:
                pass
            self._client.remove_delivery(self.sid)
            self._finish(None)
        await self._wait_handled(timeout)

    async def _wait_handled(self, timeout: float) -> None:
        task = self._task
        if task is not None:
            try:
                async with asyncio.timeout(timeout):
                    await asyncio.shield(task)
            except TimeoutError:
                task.cancel()

    async def _close(self) -> None:
        """Called by the client on close: end iteration and stop the callback task."""
        self._finish(None)
        task = self._task
        if task is not None and task is not asyncio.current_task():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    def __repr__(self) -> str:
        q = f", queue={self.queue!r}" if self.queue else ""
        return f"<Subscription sid={self.sid} subject={self.subject!r}{q}>"
