"""jetstream: a fast, hard-to-break asyncio client for NATS and JetStream."""

from __future__ import annotations

__version__ = "0.1.0.dev0"

from . import errors
from ._connect import connect
from ._events import ConnectionEvent, EventKind, Statistics
from .client import Client
from .errors import (
    AuthorizationError,
    BadHeaderError,
    BadSubjectError,
    ConnectionClosedError,
    DisconnectedError,
    MaxPayloadError,
    NatsError,
    NoRespondersError,
    NoServersError,
    PermissionsError,
    ProtocolError,
    SlowConsumerError,
    TimeoutError,
)
from .message import Msg
from .protocol.headers import Headers
from .subscription import Subscription
from .tls import make_ssl_context

__all__ = [
    "AuthorizationError",
    "BadHeaderError",
    "BadSubjectError",
    "Client",
    "ConnectionClosedError",
    "ConnectionEvent",
    "DisconnectedError",
    "EventKind",
    "Headers",
    "MaxPayloadError",
    "Msg",
    "NatsError",
    "NoRespondersError",
    "NoServersError",
    "PermissionsError",
    "ProtocolError",
    "SlowConsumerError",
    "Statistics",
    "Subscription",
    "TimeoutError",
    "__version__",
    "connect",
    "errors",
    "make_ssl_context",
]
