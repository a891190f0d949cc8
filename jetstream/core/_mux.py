"""Request/reply plumbing: the one muxed inbox of ``request`` and the gatherer of
``request_many``."""

from __future__ import annotations

import asyncio
import itertools
import math
from collections.abc import Iterable, Sequence
from typing import Protocol

from ..errors import ConnectionClosedError, NoRespondersError
from ..errors import TimeoutError as NatsTimeoutError
from ..protocol.headers import HeadersLike
from .message import Msg
from .subscription import Subscription

__all__ = ["RequestMux", "Waiter", "gather_replies"]


class Waiter(Protocol):
    """What the mux completes for a request in flight: its future, or one object that
    several requests share (``ack_sync_all``'s, told of each reply)."""

    def done(self) -> bool: ...

    def set_result(self, result: Msg, /) -> None: ...

    def set_exception(self, exception: BaseException, /) -> None: ...


class _Looped(Protocol):
    @property
    def _loop(self) -> asyncio.AbstractEventLoop: ...


class _Requester(Protocol):
    """What ``gather_replies`` needs of the client."""

    def new_inbox(self) -> str: ...

    async def subscribe(
        self, subject: str, queue: str | None = None, *, max_msgs: int | None = None
    ) -> Subscription: ...

    async def publish(
        self,
        subject: str,
        data: bytes | bytearray | memoryview = b"",
        *,
        reply: str | None = None,
        headers: HeadersLike | None = None,
    ) -> None: ...


class RequestMux:
    """The shared ``<inbox>.*`` subscription that answers every request."""

    def __init__(self, client: _Looped, prefix: str, sid: int) -> None:
        self.client = client
        self.prefix = prefix
        self.prefix_b = prefix.encode()
        self.cut = len(prefix)
        self.sid = sid
        self.subject = prefix + "*"
        self.queue: str | None = None
        self.max_msgs: int | None = None
        self.received = 0
        #: token -> (reply future, deadline, subject, timeout) of each request in flight
        self.waiters: dict[str, tuple[Waiter, float, str, float]] = {}
        self.tokens = itertools.count(1)
        # One timer for all requests, at the earliest deadline that may still matter,
        # instead of a timer (made, heap-pushed, cancelled) per request.
        self.due = math.inf
        self._timer: asyncio.TimerHandle | None = None

    # A reply takes its request out of ``waiters``; a caller pops its own entry when
    # it gives up first (a timeout, a cancel, a failure).

    def _deliver(self, op: Msg) -> None:
        w = self.waiters.pop(op.subject[self.cut :], None)
        if w is not None and not w[0].done():
            w[0].set_result(op)

    def _deliver_many(self, ops: list[Msg], size: int) -> bool:
        """``_deliver`` of each op of a feed (all of them replies), in one call."""
        pop = self.waiters.pop
        cut = self.cut
        for op in ops:
            w = pop(op.subject[cut:], None)
            if w is not None and not w[0].done():
                w[0].set_result(op)
        return True

    def add_each(self, subjects: Sequence[str], waiter: Waiter, timeout: float) -> list[str]:
        """Register a request to each of ``subjects``, all answered to ``waiter`` (which
        tells the replies apart by their subjects); returns their reply subjects."""
        deadline = self.client._loop.time() + timeout
        # one entry for all: the sweep names the first subject (the waiter says more)
        entry = (waiter, deadline, subjects[0] if subjects else "", timeout)
        waiters = self.waiters
        inboxes: list[str] = []
        for _ in subjects:
            token = str(next(self.tokens))
            waiters[token] = entry
            inboxes.append(self.prefix + token)
        if deadline < self.due:
            self.arm(deadline)
        return inboxes

    def forget(self, inboxes: Iterable[str]) -> None:
        """Drop the requests of these reply subjects (answered or not)."""
        pop = self.waiters.pop
        cut = self.cut
        for inbox in inboxes:
            pop(inbox[cut:], None)

    def arm(self, when: float) -> None:
        """Have the sweep run at ``when`` (earlier than it is due now)."""
        if self._timer is not None:
            self._timer.cancel()
        self.due = when
        self._timer = self.client._loop.call_at(when, self._sweep)

    def _sweep(self) -> None:
        """Fail the requests past their deadline; run again at the next deadline."""
        self._timer = None
        self.due = math.inf
        now = self.client._loop.time()
        nxt = math.inf
        for fut, deadline, subject, timeout in list(self.waiters.values()):
            if fut.done():
                continue
            if deadline <= now:
                fut.set_exception(
                    NatsTimeoutError(f"request to {subject!r}: no reply within {timeout}s")
                )
            elif deadline < nxt:
                nxt = deadline
        if nxt < math.inf:
            self.arm(nxt)

    def fail_all(self, exc: BaseException) -> None:
        # a copy: a waiter may drop its own entry when told
        for fut, _, _, _ in list(self.waiters.values()):
            if not fut.done():
                fut.set_exception(exc)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.due = math.inf


async def gather_replies(
    client: _Requester,
    subject: str,
    data: bytes | bytearray | memoryview,
    timeout: float,
    max_msgs: int | None,
    stall: float | None,
    headers: HeadersLike | None,
) -> list[Msg]:
    """Publish a request on a fresh inbox and gather replies (``Client.request_many``)."""
    inbox = client.new_inbox()
    sub = await client.subscribe(inbox, max_msgs=max_msgs)
    out: list[Msg] = []
    loop = asyncio.get_running_loop()
    try:
        await client.publish(subject, data, reply=inbox, headers=headers)
        deadline = loop.time() + timeout
        while max_msgs is None or len(out) < max_msgs:
            left = deadline - loop.time()
            if left <= 0:
                break
            wait = min(left, stall) if (stall is not None and out) else left
            try:
                msg = await sub.next_msg(timeout=wait)
            except (NatsTimeoutError, ConnectionClosedError):
                break
            if msg.status == 503:
                raise NoRespondersError(f"no responders on {subject!r}")
            out.append(msg)
    finally:
        await sub.unsubscribe()
    return out
