"""Tracing of the JetStream calls: ``js.publish`` and ``publish_async`` (send spans that
end at the PubAck), ``next``/``fetch``/``messages()`` (receive spans) and ``consume()``
(process spans). Imported only when the client traces (``connect(tracing=...)``); the
spans themselves are made by ``core._otel.Tracing`` (see its docstring for the trace
structure), this module adds what JetStream knows of a message.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from ._pull import MessageStream
from ._push import PushStream
from .api import PubAck
from .errors import NatsError
from .message import JsMsg
from .protocol.headers import NATS_MSG_ID, HeadersLike

if TYPE_CHECKING:
    from opentelemetry.trace import Span

    from .core.tracing import Tracing

__all__ = [
    "TracedMessageStream",
    "TracedPushStream",
    "end_with",
    "js_attributes",
    "process_handler",
    "publish",
    "received",
]

Handler = Callable[[JsMsg], Awaitable[None] | None]


def js_attributes(msg: JsMsg) -> dict[str, Any]:
    """The messaging attributes of a delivered JetStream message."""
    attrs: dict[str, Any] = {
        "messaging.destination.name": msg.subject,
        "messaging.message.body.size": len(msg.data),
    }
    if msg.hdr:
        msg_id = msg.headers.get(NATS_MSG_ID)
        if msg_id:
            attrs["messaging.message.id"] = msg_id
    try:
        meta = msg.metadata
    except NatsError:  # not from a consumer (no ack subject): nothing more to say
        return attrs
    attrs["messaging.destination.subscription.name"] = meta.consumer
    attrs["messaging.nats.stream.name"] = meta.stream
    attrs["messaging.nats.stream.sequence"] = meta.sequence.stream
    attrs["messaging.nats.consumer.sequence"] = meta.sequence.consumer
    attrs["messaging.nats.message.delivery_count"] = meta.num_delivered
    return attrs


def _headers(msg: JsMsg) -> Any:
    return msg.headers if msg.hdr else None


def received(tracing: Tracing, msgs: Sequence[JsMsg]) -> None:
    """One receive span for the messages a pull call hands out (linked to each)."""
    if not msgs:
        return
    first = msgs[0]
    if len(msgs) == 1:
        attrs = js_attributes(first)
    else:
        attrs = {}
        try:
            meta = first.metadata
        except NatsError:  # not from a consumer (no ack subject)
            pass
        else:
            attrs["messaging.destination.subscription.name"] = meta.consumer
            attrs["messaging.nats.stream.name"] = meta.stream
    same = all(m.subject == first.subject for m in msgs)
    if same:
        attrs["messaging.destination.name"] = first.subject
    name = first.subject if same else str(attrs.get("messaging.nats.stream.name", "(many)"))
    tracing.receive(name, [_headers(m) for m in msgs], attrs)


def process_handler(tracing: Tracing, handler: Handler, stream: object = None) -> Handler:
    """``handler`` run inside a process span for each message (``consume()``); the
    traced ``stream`` that feeds it makes no receive spans then."""
    if isinstance(stream, TracedMessageStream | TracedPushStream):
        stream._receive_spans = False

    async def traced(msg: JsMsg) -> None:
        with tracing.process(msg.subject, _headers(msg), js_attributes(msg)):
            res = handler(msg)
            if res is not None:
                await res

    return traced


class TracedMessageStream(MessageStream):
    """``messages()`` of a pull consumer with a receive span for each message handed
    out (``_take``: both ``async for`` and ``next()`` come through it); under
    ``consume()`` the handler's process span is made instead (``_receive_spans``)."""

    _tracing: Tracing
    _receive_spans = True

    def _take(self) -> JsMsg | None:
        msg = super()._take()
        if msg is not None and self._receive_spans:
            received(self._tracing, [msg])
        return msg


class TracedPushStream(PushStream):
    """``messages()`` of a push consumer, traced as ``TracedMessageStream`` is."""

    _tracing: Tracing
    _receive_spans = True

    def _take(self) -> JsMsg | None:
        msg = super()._take()
        if msg is not None and self._receive_spans:
            received(self._tracing, [msg])
        return msg


def _ack_attributes(ack: PubAck) -> dict[str, Any]:
    return {
        "messaging.nats.stream.name": ack.stream,
        "messaging.nats.stream.sequence": ack.seq,
        "messaging.nats.message.duplicate": ack.duplicate,
    }


async def publish(
    tracing: Tracing,
    subject: str,
    headers: HeadersLike | None,
    size: int,
    attempts: Callable[[HeadersLike | None], Awaitable[PubAck]],
) -> PubAck:
    """``js.publish`` in a send span that ends at the PubAck (or the error):
    ``attempts`` makes the untraced call's attempts, with the headers given it (the
    span's context added)."""
    with tracing.send(subject, headers, size) as (span, h):
        ack = await attempts(h)
        span.set_attributes(_ack_attributes(ack))
        return ack


def end_with(tracing: Tracing, span: Span, fut: asyncio.Future[PubAck]) -> None:
    """End ``publish_async``'s send span when its future resolves."""

    def done(f: asyncio.Future[PubAck]) -> None:
        if f.cancelled():
            tracing.end_send(span, None, asyncio.CancelledError())
            return
        exc = f.exception()
        tracing.end_send(span, None if exc else _ack_attributes(f.result()), exc)

    fut.add_done_callback(done)
