"""The Consumer handle: info, delete, and the ways to receive its messages.

Pull consumers: ``next``, ``fetch``, ``fetch_no_wait``, continuous ``messages()``
and ``consume(handler)``. For a push consumer (one with a ``deliver_subject``)
``messages()`` and ``consume()`` subscribe to its deliver subject instead.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import msgspec

from ._context import Context, validate_name
from ._fetch import fetch
from ._pull import MessageStream, PullOptions
from ._push import PushStream
from ._reader import ConsumeContext, ErrorCallback
from .api import (
    ConsumerDeleteResponse,
    ConsumerInfo,
    ConsumerPauseRequest,
    ConsumerPauseResponse,
    ConsumerResetRequest,
    ConsumerResetResponse,
    ConsumerUnpinRequest,
    ConsumerUnpinResponse,
)
from .errors import TimeoutError as NatsTimeoutError

if TYPE_CHECKING:
    from .message import JsMsg

#: ``MessageStream``, ``PushStream`` and ``ConsumeContext`` are what ``messages()`` and
#: ``consume()`` return, named here for annotations
__all__ = [
    "ConsumeContext",
    "Consumer",
    "MessageStream",
    "PushStream",
    "consumer_info",
    "delete_consumer",
    "pause_consumer",
    "reset_consumer",
    "resume_consumer",
    "unpin_consumer",
]


def _default_heartbeat(expires: float) -> float | None:
    """Idle heartbeat for one fetch: 5 s once the request lives 10 s or more."""
    return 5.0 if expires >= 10 else None


class Consumer:
    """A handle on one consumer of a stream. ``cached_info`` is from when it was made."""

    def __init__(self, js: Context, info: ConsumerInfo) -> None:
        self._js = js
        self.cached_info = info
        self.name = info.name
        self.stream_name = info.stream_name
        #: pin id of a pinned_client priority group, carried from pull to pull
        self._pin_id: str | None = None

    def __repr__(self) -> str:
        return f"<Consumer {self.name!r} of stream {self.stream_name!r}>"

    @property
    def js(self) -> Context:
        return self._js

    @property
    def is_push(self) -> bool:
        """True for a push consumer (its config has a deliver_subject)."""
        return bool(self.cached_info.config.deliver_subject)

    async def info(self) -> ConsumerInfo:
        """Fetch the consumer's state (and refresh ``cached_info``)."""
        info = await self._js._api(
            f"CONSUMER.INFO.{self.stream_name}.{self.name}", None, ConsumerInfo
        )
        self.cached_info = info
        return info

    async def delete(self) -> bool:
        """Delete this consumer."""
        await self._js._stream_info(self.stream_name)
        return await delete_consumer(self._js, self.stream_name, self.name)

    # -- one-shot pulls -------------------------------------------------------------------

    async def fetch(
        self,
        batch: int = 1,
        *,
        max_bytes: int | None = None,
        expires: float = 30.0,
        heartbeat: float | None = None,
        group: str | None = None,
        min_pending: int | None = None,
        min_ack_pending: int | None = None,
        priority: int | None = None,
    ) -> list[JsMsg]:
        """Pull up to ``batch`` messages (and at most ``max_bytes``) in one request.

        Returns when the batch is complete, or when the request ends (``expires``
        seconds, default 30, or a status from the server) with what came so far,
        maybe nothing. Within ``expires`` the pull is asked again when no server
        answered it (a 503 while the consumer elects a leader; with backoff), after a
        reconnect, and after two missed heartbeats (for requests of 10 s or more the
        server sends one every 5 s; the miss goes to the client's error callback).
        ``group`` and the ``min_*``/``priority`` options are for consumers with
        priority groups.

        Never more than ``batch`` comes back. For a consumer that needs acks, what the
        requests deliver past that, or after the call returned, timed out or was
        cancelled (a request asked again may still be alive), is given back at once
        with a nak, not left to ``ack_wait`` (counted in ``Client.stats.stranded_naks``);
        so are the messages a cancelled fetch had received.

        Raises:
            ConsumerDeletedError: the consumer was deleted meanwhile.
            ConsumerNotFoundError: there is no such consumer.
        """
        opts = PullOptions(
            batch=batch,
            max_bytes=max_bytes,
            expires=expires,
            heartbeat=heartbeat if heartbeat is not None else _default_heartbeat(expires),
            group=group,
            min_pending=min_pending,
            min_ack_pending=min_ack_pending,
            priority=priority,
        )
        msgs = await fetch(self, opts)
        tracing = self._js.client.tracing
        if tracing is not None:
            from ._tracing import received

            received(tracing, msgs)
        return msgs

    async def fetch_no_wait(
        self, batch: int = 1, *, max_bytes: int | None = None, group: str | None = None
    ) -> list[JsMsg]:
        """Pull up to ``batch`` messages that are available right now; maybe none."""
        opts = PullOptions(batch=batch, max_bytes=max_bytes, no_wait=True, group=group)
        msgs = await fetch(self, opts)
        tracing = self._js.client.tracing
        if tracing is not None:
            from ._tracing import received

            received(tracing, msgs)
        return msgs

    async def next(
        self, timeout: float = 30.0, *, heartbeat: float | None = None, group: str | None = None
    ) -> JsMsg:
        """The next message, waiting at most ``timeout`` seconds.

        Raises:
            TimeoutError: no message in time.
        """
        msgs = await self.fetch(1, expires=timeout, heartbeat=heartbeat, group=group)
        if not msgs:
            raise NatsTimeoutError(
                f"no message from consumer {self.name!r} of stream {self.stream_name!r} "
                f"within {timeout}s"
            )
        return msgs[0]

    async def ack_next(self, msg: JsMsg, timeout: float = 30.0) -> JsMsg:
        """Acknowledge ``msg`` and get the next message, in one round trip (``+NXT``).

        Raises:
            MsgAlreadyAckedError: ``msg`` was already acknowledged (nothing is sent).
            TimeoutError: no next message within ``timeout`` seconds (``msg`` is acked).
        """
        opts = PullOptions(batch=1, expires=timeout, heartbeat=_default_heartbeat(timeout))
        msgs = await fetch(self, opts, via=msg)
        tracing = self._js.client.tracing
        if tracing is not None:
            from ._tracing import received

            received(tracing, msgs)
        if not msgs:
            raise NatsTimeoutError(
                f"no message from consumer {self.name!r} after +NXT within {timeout}s"
            )
        return msgs[0]

    # -- continuous ------------------------------------------------------------------------

    def messages(
        self,
        *,
        max_messages: int = 500,
        max_bytes: int | None = None,
        expires: float = 30.0,
        heartbeat: float | None = None,
        threshold_messages: int | None = None,
        threshold_bytes: int | None = None,
        error_cb: ErrorCallback | None = None,
        group: str | None = None,
        min_pending: int | None = None,
        min_ack_pending: int | None = None,
        priority: int | None = None,
    ) -> MessageStream | PushStream:
        """Continuous consumption: ``async with consumer.messages() as it: async for m in it``.

        The buffer holds at most ``max_messages`` (and ``max_bytes``); it is topped up
        with a new pull when it falls to ``threshold_messages`` (default half). Each pull
        lives ``expires`` seconds with an idle heartbeat every ``heartbeat`` seconds
        (default half of ``expires``, at most 30). Missed heartbeats and reconnects lead
        to a fresh pull and are reported to ``error_cb`` (default: the client's error
        callback), never to the iterator; a deleted consumer ends it with
        ``ConsumerDeletedError``. ``stop()`` (and leaving ``async with``) gives what is
        buffered back at once with a nak, as it does what the pulls still deliver.
        """
        tracing = self._js.client.tracing
        if self.is_push:
            if tracing is not None:
                from ._tracing import TracedPushStream

                push = TracedPushStream(self, error_cb=error_cb)
                push._tracing = tracing
                return push
            return PushStream(self, error_cb=error_cb)
        hb = heartbeat if heartbeat is not None else min(expires / 2, 30.0)
        opts = PullOptions(
            batch=max_messages,
            max_bytes=max_bytes,
            expires=expires,
            heartbeat=hb,
            threshold_messages=threshold_messages,
            threshold_bytes=threshold_bytes,
            group=group,
            min_pending=min_pending,
            min_ack_pending=min_ack_pending,
            priority=priority,
        )
        if tracing is not None:
            from ._tracing import TracedMessageStream

            traced = TracedMessageStream(self, opts, error_cb)
            traced._tracing = tracing
            return traced
        return MessageStream(self, opts, error_cb)

    async def consume(
        self, handler: Callable[[JsMsg], Awaitable[None] | None], **messages_kw: Any
    ) -> ConsumeContext:
        """Run ``handler`` for each message, in order, in one task (see ``messages``).

        Returns a ``ConsumeContext`` with ``stop()``, ``drain()`` and ``wait()``; it is
        also an async context manager that stops on exit. Exceptions from the
        handler go to ``error_cb`` and consumption goes on.
        """
        stream = self.messages(**messages_kw)
        tracing = self._js.client.tracing
        if tracing is not None:
            from ._tracing import process_handler

            handler = process_handler(tracing, handler, stream)
        return ConsumeContext(stream, handler)

    # -- administration ---------------------------------------------------------------------

    async def pause(self, until: _dt.datetime) -> ConsumerPauseResponse:
        """Deliver nothing until ``until``."""
        await self._js._stream_info(self.stream_name)
        return await pause_consumer(self._js, self.stream_name, self.name, until)

    async def resume(self) -> ConsumerPauseResponse:
        """Resume a paused consumer."""
        await self._js._stream_info(self.stream_name)
        return await resume_consumer(self._js, self.stream_name, self.name)

    async def unpin(self, group: str) -> None:
        """Unpin the pinned client of a priority group."""
        await self._js._stream_info(self.stream_name)
        await unpin_consumer(self._js, self.stream_name, self.name, group)

    async def reset(self, seq: int | None = None) -> ConsumerResetResponse:
        """Reset to stream sequence ``seq`` (server 2.14+)."""
        await self._js._stream_info(self.stream_name)
        return await reset_consumer(self._js, self.stream_name, self.name, seq)


# -- consumers by name (the Stream handle's methods, and the Consumer's above) ----------


async def consumer_info(js: Context, stream: str, name: str) -> ConsumerInfo:
    """A consumer's config and state."""
    validate_name("consumer", name)
    return await js._api(f"CONSUMER.INFO.{stream}.{name}", None, ConsumerInfo)


async def delete_consumer(js: Context, stream: str, name: str) -> bool:
    """Delete a consumer.

    Raises:
        ConsumerNotFoundError: there is no such consumer.
    """
    validate_name("consumer", name)
    resp = await js._api(f"CONSUMER.DELETE.{stream}.{name}", None, ConsumerDeleteResponse)
    return resp.success


async def pause_consumer(
    js: Context, stream: str, name: str, until: _dt.datetime
) -> ConsumerPauseResponse:
    """Pause a consumer until ``until`` (a timezone-aware datetime): nothing is delivered."""
    req = ConsumerPauseRequest(pause_until=until)
    return await js._api(f"CONSUMER.PAUSE.{stream}.{name}", req, ConsumerPauseResponse)


async def resume_consumer(js: Context, stream: str, name: str) -> ConsumerPauseResponse:
    """Resume a paused consumer."""
    return await js._api(
        f"CONSUMER.PAUSE.{stream}.{name}", ConsumerPauseRequest(), ConsumerPauseResponse
    )


async def unpin_consumer(js: Context, stream: str, name: str, group: str) -> None:
    """Unpin the pinned client of a ``pinned_client`` priority group: the next pull
    of any client in the group gets the pin."""
    await js._api(
        f"CONSUMER.UNPIN.{stream}.{name}",
        ConsumerUnpinRequest(group=group),
        ConsumerUnpinResponse,
    )


async def reset_consumer(
    js: Context, stream: str, name: str, seq: int | None = None
) -> ConsumerResetResponse:
    """Reset a consumer to deliver again from stream sequence ``seq`` (server 2.14+);
    without ``seq`` it restarts from its deliver policy."""
    req: Any = ConsumerResetRequest(seq=seq if seq is not None else msgspec.UNSET)
    return await js._api(f"CONSUMER.RESET.{stream}.{name}", req, ConsumerResetResponse)
