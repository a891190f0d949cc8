"""Tracing with OpenTelemetry: the spans of publishing and receiving, and the W3C trace
context carried in message headers (the ``otel`` extra: ``opentelemetry-api`` only).

Imported only when ``connect(tracing=...)`` turns tracing on (or by ``jetstream.tracing``):
importing ``jetstream`` imports no OpenTelemetry, and a client without tracing holds
``_tracing = None``, tested once per publish, per subscribe and per pull call, never per
message inside a feed.

Spans follow OpenTelemetry's messaging semantic conventions:

- ``send <subject>`` (PRODUCER) around a publish; for JetStream it ends at the PubAck.
  Its context goes into the message headers through the application's configured
  propagator (``opentelemetry.propagate``; W3C ``traceparent``/``tracestate`` by default).
- ``receive <subject>`` (CONSUMER) when a pull-style call hands messages to the
  application: a child of the application's current span, *linked* to each message's
  creation context (a batch is received in one span with a link per message).
- ``process <subject>`` (CONSUMER) around a handler (``consume()``, a subscription
  callback): a *child* of the message's creation context (one message is processed),
  and linked to it too, as the conventions recommend.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode, TracerProvider
from opentelemetry.util.types import AttributeValue

from .._version import __version__
from ..protocol.headers import NATS_MSG_ID, Headers, HeadersLike, encode_headers
from .message import Msg
from .subscription import MsgHandler, Subscription, SubscriptionOwner

__all__ = ["Attributes", "Tracing", "extract", "links_of"]

Attributes = dict[str, AttributeValue]

SYSTEM = "nats"
_EMPTY = Headers()


def extract(headers: Mapping[str, str] | None, base: Context | None = None) -> Context:
    """The context carried in ``headers`` (by the global propagator), on top of ``base``
    (default: the current context); ``base`` itself when they carry none."""
    return propagate.extract(
        headers if headers else _EMPTY,
        context=otel_context.get_current() if base is None else base,
    )


def _creation(headers: Mapping[str, str] | None) -> trace.SpanContext | None:
    """The span context a message was created in (from its headers), or None."""
    if not headers:
        return None
    sc = trace.get_current_span(propagate.extract(headers, context=Context())).get_span_context()
    return sc if sc.is_valid else None


def links_of(headers: Sequence[Mapping[str, str] | None]) -> list[Link]:
    """A link to the creation context of each message that carries one."""
    out = []
    for h in headers:
        sc = _creation(h)
        if sc is not None:
            out.append(Link(sc))
    return out


def _error(span: Span, exc: BaseException) -> None:
    if span.is_recording():
        span.record_exception(exc)
        span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
        span.set_attribute("error.type", type(exc).__qualname__)


class Tracing:
    """The tracer of a client, and the spans it makes (see the module docstring)."""

    def __init__(self, provider: TracerProvider | None) -> None:
        # provider None: the global one (a proxy that follows a provider set later)
        self.tracer = trace.get_tracer("jetstream", __version__, tracer_provider=provider)

    # -- send -----------------------------------------------------------------------

    @staticmethod
    def send_attributes(
        subject: str, size: int, headers: Mapping[str, str] | None, operation: str = "publish"
    ) -> Attributes:
        attrs: Attributes = {
            "messaging.system": SYSTEM,
            "messaging.destination.name": subject,
            "messaging.operation.type": "send",
            "messaging.operation.name": operation,
            "messaging.message.body.size": size,
        }
        msg_id = headers.get(NATS_MSG_ID) if headers else None
        if msg_id:
            attrs["messaging.message.id"] = msg_id
        return attrs

    @contextmanager
    def send(
        self,
        subject: str,
        headers: HeadersLike | None,
        size: int,
        operation: str = "publish",
    ) -> Iterator[tuple[Span, Headers]]:
        """A current PRODUCER span around a publish, and ``headers`` (copied, never
        changed) with the span's context injected. An exception leaving the block is
        recorded on the span, which ends with an error status."""
        out = Headers(headers) if headers else Headers()
        with self.tracer.start_as_current_span(
            f"send {subject}",
            kind=SpanKind.PRODUCER,
            attributes=self.send_attributes(subject, size, out, operation),
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            propagate.inject(out)
            try:
                yield span, out
            except BaseException as exc:
                _error(span, exc)
                raise

    def start_send(
        self, subject: str, headers: HeadersLike | None, size: int, operation: str
    ) -> tuple[Span, Headers]:
        """A PRODUCER span that the caller ends (``end_send``): for a publish that
        completes later (``publish_async``); ``headers`` copied with its context."""
        out = Headers(headers) if headers else Headers()
        span = self.tracer.start_span(
            f"send {subject}",
            kind=SpanKind.PRODUCER,
            attributes=self.send_attributes(subject, size, out, operation),
        )
        propagate.inject(out, context=trace.set_span_in_context(span))
        return span, out

    @staticmethod
    def end_send(span: Span, attrs: Attributes | None, exc: BaseException | None) -> None:
        if exc is not None:
            _error(span, exc)
        elif attrs:
            span.set_attributes(attrs)
        span.end()

    async def publish(
        self,
        client: Any,
        subject: str,
        data: bytes | bytearray | memoryview,
        reply: str | None,
        headers: HeadersLike | None,
    ) -> None:
        """Core ``publish`` in a send span (it ends once the message is buffered)."""
        with self.send(subject, headers, len(data)) as (_, h):
            client._publish_nowait(subject, data, reply, encode_headers(h))
            conn = client._conn
            if conn is not None and conn.write_paused:
                await client.wait_writable()
            elif not client._wbuf:
                await client._give_a_turn()

    # -- receive and process ----------------------------------------------------------

    def receive(
        self,
        name: str,
        headers: Sequence[Mapping[str, str] | None],
        attrs: Attributes,
    ) -> None:
        """A short CONSUMER span for messages handed to the application by a pull-style
        call: a child of the current context, linked to each message's creation context."""
        attrs["messaging.system"] = SYSTEM
        attrs["messaging.operation.type"] = "receive"
        attrs["messaging.operation.name"] = "receive"
        if len(headers) != 1:
            attrs["messaging.batch.message_count"] = len(headers)
        span = self.tracer.start_span(
            f"receive {name}", kind=SpanKind.CONSUMER, attributes=attrs, links=links_of(headers)
        )
        span.end()

    @contextmanager
    def process(
        self, name: str, headers: Mapping[str, str] | None, attrs: Attributes
    ) -> Iterator[Span]:
        """A current CONSUMER span around a handler of one message: a child of the
        message's creation context (else of the current one), and linked to it."""
        attrs["messaging.system"] = SYSTEM
        attrs["messaging.operation.type"] = "process"
        attrs["messaging.operation.name"] = "process"
        sc = _creation(headers)
        parent = extract(headers) if sc is not None else None
        with self.tracer.start_as_current_span(
            f"process {name}",
            context=parent,
            kind=SpanKind.CONSUMER,
            attributes=attrs,
            links=[Link(sc)] if sc is not None else None,
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                yield span
            except BaseException as exc:
                _error(span, exc)
                raise

    # -- core subscriptions --------------------------------------------------------------

    @staticmethod
    def msg_attributes(msg: Msg, queue: str | None) -> Attributes:
        attrs: Attributes = {
            "messaging.destination.name": msg.subject,
            "messaging.message.body.size": len(msg.payload),
        }
        if queue is not None:
            attrs["messaging.consumer.group.name"] = queue
        if msg.hdr:
            msg_id = msg.headers.get(NATS_MSG_ID)
            if msg_id:
                attrs["messaging.message.id"] = msg_id
        return attrs

    def received_msgs(self, msgs: Sequence[Msg], queue: str | None) -> None:
        """The receive span of core messages handed out by a subscription."""
        if not msgs:
            return
        first = msgs[0]
        attrs = self.msg_attributes(first, queue) if len(msgs) == 1 else {}
        same = all(m.subject == first.subject for m in msgs)
        if same:
            attrs["messaging.destination.name"] = first.subject
        self.receive(
            first.subject if same else "(many)", [m.headers if m.hdr else None for m in msgs], attrs
        )

    def wrap_handler(self, cb: MsgHandler, queue: str | None) -> MsgHandler:
        """``cb`` run inside a process span for each message (plain or async alike)."""
        if inspect.iscoroutinefunction(cb):
            acb: Callable[[Msg], Awaitable[None]] = cb

            async def traced_async(msg: Msg) -> None:
                with self.process(
                    msg.subject, msg.headers if msg.hdr else None, self.msg_attributes(msg, queue)
                ):
                    await acb(msg)

            return traced_async

        def traced(msg: Msg) -> Awaitable[None] | None:
            with self.process(
                msg.subject, msg.headers if msg.hdr else None, self.msg_attributes(msg, queue)
            ):
                return cb(msg)

        return traced

    def subscription(
        self,
        client: SubscriptionOwner,
        sid: int,
        subject: str,
        queue: str | None,
        cb: MsgHandler | None,
        max_msgs: int | None,
        pending_msgs_limit: int,
        pending_bytes_limit: int,
    ) -> Subscription:
        """A subscription whose callback runs in a process span per message, or (when
        iterated) whose messages are each received in a span."""
        if cb is not None:
            return Subscription(
                client,
                sid,
                subject,
                queue,
                self.wrap_handler(cb, queue),
                max_msgs,
                pending_msgs_limit,
                pending_bytes_limit,
            )
        sub = _TracedSubscription(
            client, sid, subject, queue, None, max_msgs, pending_msgs_limit, pending_bytes_limit
        )
        sub._tracing = self
        return sub


class _TracedSubscription(Subscription):
    """A ``Subscription`` (iterated, no callback) making a receive span per message
    handed out; the receive path (``_deliver``) is the plain one."""

    _tracing: Tracing

    async def __anext__(self) -> Msg:
        msg = await super().__anext__()
        self._tracing.received_msgs([msg], self.queue)
        return msg

    async def next_msg(self, timeout: float | None = 1.0) -> Msg:
        if self._queue:
            msg = self._pop()
            self._tracing.received_msgs([msg], self.queue)
            return msg
        return await super().next_msg(timeout)  # through __anext__: received there

    async def take_many(self, timeout: float | None = 30.0) -> list[Msg]:
        if self._cb is not None or not self._queue:
            # nothing queued: the first one comes through __anext__ (received there)
            first = await super().next_msg(timeout)
            return [first, *self._take_queued()]
        return self._take_queued()

    def _take_queued(self) -> list[Msg]:
        q = self._queue
        msgs = list(q)
        q.clear()
        self._pending_bytes = 0
        self._slow = False
        if msgs:
            self._tracing.received_msgs(msgs, self.queue)
        return msgs
