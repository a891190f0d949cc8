"""What every JetStream message iterator shares: ``next(timeout)``, the error report,
``async with``. (Pull, push and ordered streams differ only in how messages arrive.)"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Self

from .errors import NatsError
from .errors import TimeoutError as NatsTimeoutError

if TYPE_CHECKING:
    from .client import Client
    from .message import JsMsg

__all__ = ["ErrorCallback", "MessageReader", "report_to"]

ErrorCallback = Callable[[BaseException], Any]


def report_to(nc: Client, error_cb: ErrorCallback | None, exc: BaseException) -> None:
    """Hand ``exc`` to ``error_cb`` (plain or coroutine function), else to the client's."""
    if error_cb is None:
        nc._report_error(exc)
        return
    try:
        res = error_cb(exc)
        if inspect.isawaitable(res):
            nc._spawn(res)
    except Exception as cb_exc:
        nc._report_error(cb_exc)


class MessageReader:
    """Base of the message iterators; subclasses define ``__anext__``, ``_start``, ``stop``."""

    async def __anext__(self) -> JsMsg:
        raise NotImplementedError

    def _start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __aiter__(self) -> Self:
        self._start()
        return self

    async def next(self, timeout: float | None = None) -> JsMsg:
        """The next message, waiting at most ``timeout`` seconds (None: no limit).

        Raises:
            TimeoutError: nothing arrived in time.
            StopAsyncIteration: the iteration has ended (stopped or drained).
        """
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
