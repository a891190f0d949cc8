"""The OpenTelemetry tracing of a connection, for the layers above the core.

A client connected with ``tracing=`` makes its spans with ``Tracing``
(``Client.tracing``); ``extract`` reads a trace context from message headers. Importing
this module imports OpenTelemetry: only code that traces imports it.
"""

from __future__ import annotations

from ._otel import Tracing, extract

__all__ = ["Tracing", "extract"]
