"""Tracing helpers for the application (the ``otel`` extra; see the tracing page).

``connect(tracing=True)`` (or ``tracing=provider``) makes the spans of publishing and
receiving. These helpers are for what the client cannot do on its own:

- ``context_of(msg)``: the trace context a received message carries, to start the
  application's own span as a child of the producer's (after ``next``, ``fetch`` or
  ``messages()``, which hand a message out rather than run a handler on it);
- ``trace_headers()``: the current context as message headers, to hand to code that
  publishes elsewhere (the Spark sink's ``traceparent`` option, another client).

Importing this module imports no OpenTelemetry; calling a helper without it installed
raises ``TracingUnavailableError``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from ._version import install_hint
from .errors import TracingUnavailableError
from .message import JsMsg, Msg

if TYPE_CHECKING:
    from opentelemetry.context import Context

__all__ = ["context_of", "trace_headers"]


def _otel() -> None:
    try:
        import opentelemetry.propagate  # noqa: F401
    except ImportError as exc:
        raise TracingUnavailableError.missing(exc, install_hint("otel")) from None


def context_of(msg: Msg | JsMsg, base: Context | None = None) -> Context:
    """The context ``msg`` was published in (read from its headers by the application's
    configured propagator), on top of ``base`` (default: the current context): pass it
    as ``context=`` of ``tracer.start_as_current_span`` to continue the producer's trace.
    ``base`` itself when the message carries no trace context.

    Raises:
        TracingUnavailableError: OpenTelemetry's API is not installed.
    """
    _otel()
    from .core.tracing import extract

    headers: Mapping[str, str] | None = msg.headers if msg.hdr else None
    return extract(headers, base)


def trace_headers(context: Context | None = None) -> dict[str, str]:
    """The headers (``traceparent``, ``tracestate``... as the configured propagator
    writes them) that carry ``context`` (default: the current one); empty when there is
    no span to continue.

    Raises:
        TracingUnavailableError: OpenTelemetry's API is not installed.
    """
    _otel()
    from opentelemetry import propagate

    carrier: dict[str, str] = {}
    propagate.inject(carrier, context=context)
    return carrier
