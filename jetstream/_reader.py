"""What every JetStream message iterator shares: ``next(timeout)``, the error report,
``async with``, and ``consume(handler)`` on top (``ConsumeContext``). (Pull, push and
ordered streams differ only in how messages arrive.)"""

from __future__ import annotations

import asyncio
import inspect
from collections import deque
from collections.abc import Awaitable, Callable
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Self, cast

from .errors import NatsError
from .errors import TimeoutError as NatsTimeoutError
from .message import JsMsg, as_js

if TYPE_CHECKING:
    from .core.client import Client
    from .protocol.ops import Msg as MsgOp

__all__ = ["ConsumeContext", "ErrorCallback", "MessageReader", "all_plain", "js_msgs", "report_to"]

ErrorCallback = Callable[[BaseException], Any]


def report_to(nc: Client, error_cb: ErrorCallback | None, exc: BaseException) -> None:
    """Hand ``exc`` to ``error_cb`` (plain or coroutine function), else to the client's."""
    if error_cb is None:
        nc.report_error(exc)
        return
    try:
        res = error_cb(exc)
        if inspect.isawaitable(res):
            nc.spawn(res)
    except Exception as cb_exc:
        nc.report_error(cb_exc)


_status_of = attrgetter("status")


def all_plain(ops: list[MsgOp]) -> bool:
    """No op of a feed is a status message (heartbeat, flow control, 408, ...)."""
    return not any(map(_status_of, ops))


def take_first(buf: deque[Any], n: int) -> list[Any]:
    """The first ``n`` items of a reader's buffer, taken out at once (all of it, the
    common case, in one copy)."""
    if n >= len(buf):
        run = list(buf)
        buf.clear()
        return run
    pop = buf.popleft
    return [pop() for _ in range(n)]


def js_msgs(ops: list[MsgOp], cls: type[JsMsg]) -> list[JsMsg]:
    """The ``JsMsg`` of ``cls`` (a consumer's) of each op of a feed for its sid: the ops
    themselves, as the parser made them of ``cls`` (the ops of one feed for one sid are
    all of one class: the parser's class for a sid changes between feeds only), else
    copies."""
    if ops[0].__class__ is cls and ops[-1].__class__ is cls:
        return cast("list[JsMsg]", ops)
    return [as_js(op, cls) for op in ops]


class MessageReader:
    """Base of the message iterators; subclasses define ``__anext__``, ``_start`` and
    ``_finish`` and keep received messages in ``_buf``."""

    _buf: deque[JsMsg]
    _loop: asyncio.AbstractEventLoop
    _waiter: asyncio.Future[None] | None
    _closed: bool
    _draining: bool
    _error: BaseException | None
    _nc: Client
    _error_cb: ErrorCallback | None

    async def __anext__(self) -> JsMsg:
        while True:
            msg = self._take()
            if msg is not None:
                return msg
            await self._wait()

    async def _wait(self) -> None:
        """Wait until something is buffered; once the reader has ended (stopped,
        drained, failed) with nothing left, raise its error or ``StopAsyncIteration``."""
        while not self._buf:
            if self._closed or self._draining:
                if self._error is not None:
                    raise self._error
                raise StopAsyncIteration
            self._start()
            w = self._loop.create_future()
            self._waiter = w
            try:
                await w
            finally:
                self._waiter = None

    def _take(self) -> JsMsg | None:
        """The next buffered message with its bookkeeping, or None: nothing that can be
        handed over without the async path (this default, for readers without a buffer
        of their own)."""
        return None

    def _start(self) -> None:
        raise NotImplementedError

    def _wake(self) -> None:
        """Wake the reader waiting in ``__anext__``, if one is."""
        w = self._waiter
        if w is not None:
            self._waiter = None
            if not w.done():
                w.set_result(None)

    def _finish(self, error: BaseException | None) -> None:
        raise NotImplementedError

    def _report(self, exc: BaseException) -> None:
        report_to(self._nc, self._error_cb, exc)

    def stop(self) -> None:
        """Stop now: unsubscribe and drop what is buffered (a pull consumer gives it back
        at once with a nak; a push consumer's comes again after ack_wait)."""
        self._buf.clear()
        self._finish(None)

    async def drain(self) -> None:
        """Stop receiving; the reader still gets what is buffered, then the iteration ends."""
        self._draining = True
        self._finish(None)

    @property
    def pending(self) -> int:
        """Messages buffered and not yet taken by the reader."""
        return len(self._buf)

    def __aiter__(self) -> Self:
        self._start()
        return self

    async def next(self, timeout: float | None = None) -> JsMsg:
        """The next message, waiting at most ``timeout`` seconds (None: no limit).

        Raises:
            TimeoutError: nothing arrived in time.
            StopAsyncIteration: the iteration has ended (stopped or drained).
        """
        msg = self._take()
        if msg is not None:  # buffered: no timeout to arm
            return msg
        try:
            async with asyncio.timeout(timeout):
                return await self.__anext__()
        except TimeoutError as exc:
            if isinstance(exc, NatsError):
                raise
            raise NatsTimeoutError(f"no message within {timeout}s") from None

    async def __aenter__(self) -> Self:
        self._start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.stop()


class ConsumeContext:
    """A running ``consume(handler)`` (of a consumer or an ordered consumer): one task
    feeding the handler the messages of a ``MessageReader``, in order."""

    def __init__(
        self,
        stream: MessageReader,
        handler: Callable[[JsMsg], Awaitable[None] | None],
    ) -> None:
        self._stream = stream
        self._handler = handler
        self._error: NatsError | None = None
        stream._start()
        self._task = stream._loop.create_task(self._run(), name="jetstream-consume")

    async def _run(self) -> None:
        handler = self._handler
        try:
            async for msg in self._stream:
                try:
                    res = handler(msg)
                    if res is not None:
                        await res
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    self._stream._report(exc)
        except NatsError as exc:
            self._stream._report(exc)
            self._error = exc

    @property
    def closed(self) -> bool:
        return self._task.done()

    def stop(self) -> None:
        """Stop consuming now; messages not yet handled are given back (see ``stop`` of
        the iterator)."""
        self._stream.stop()

    async def drain(self) -> None:
        """Stop pulling, handle what is buffered, then end."""
        await self._stream.drain()
        await asyncio.gather(self._task, return_exceptions=True)

    async def wait(self) -> None:
        """Wait until consumption ends; raises the terminal error if there was one."""
        await asyncio.shield(self._task)
        if self._error is not None:
            raise self._error

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.stop()
        if isinstance(exc[1], asyncio.CancelledError):
            # the caller is cancelled: so is a handler still running, else it waits on it
            self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
