"""The core NATS client: one connection, subscriptions, request/reply, events.

It knows nothing of JetStream. ``jetstream.connect()`` returns a subclass of this
``Client`` that adds ``jetstream()`` (``jetstream.client``); ``jetstream.core.connect``
returns the core client alone.
"""

from __future__ import annotations

from ._connect import connect, with_client_type
from ._events import ConnectionEvent, EventKind, EventStream, Statistics
from ._ws import WebSocketError, WebSocketUnavailableError
from .client import Client
from .message import Msg
from .subscription import Subscription
from .tls import make_ssl_context

__all__ = [
    "Client",
    "ConnectionEvent",
    "EventKind",
    "EventStream",
    "Msg",
    "Statistics",
    "Subscription",
    "WebSocketError",
    "WebSocketUnavailableError",
    "connect",
    "make_ssl_context",
    "with_client_type",
]
