"""jetstream: a fast, hard-to-break asyncio client for NATS and JetStream."""

from __future__ import annotations

__version__ = "0.1.0.dev0"

from . import errors
from ._connect import connect
from ._events import ConnectionEvent, EventKind, Statistics
from .api import (
    AccountInfo,
    AckPolicy,
    ConsumerConfig,
    ConsumerInfo,
    DeliverPolicy,
    DiscardPolicy,
    PriorityPolicy,
    PubAck,
    ReplayPolicy,
    RetentionPolicy,
    StorageType,
    StoreCompression,
    StreamConfig,
    StreamInfo,
)
from .client import Client
from .consumer import Consumer
from .errors import (
    AuthorizationError,
    BadHeaderError,
    BadSubjectError,
    ConnectionClosedError,
    ConsumerDeletedError,
    ConsumerNotFoundError,
    DisconnectedError,
    JetStreamApiError,
    JetStreamError,
    MaxPayloadError,
    MessageNotFoundError,
    MsgAlreadyAckedError,
    NatsError,
    NoHeartbeatError,
    NoRespondersError,
    NoServersError,
    PermissionsError,
    ProtocolError,
    SlowConsumerError,
    StreamNotFoundError,
    TimeoutError,
)
from .js import JetStream
from .message import JsMsg, Msg, MsgMetadata
from .ordered import OrderedConsumer
from .protocol.headers import Headers
from .stream import Stream, StreamMsg
from .subscription import Subscription
from .tls import make_ssl_context

__all__ = [
    "AccountInfo",
    "AckPolicy",
    "AuthorizationError",
    "BadHeaderError",
    "BadSubjectError",
    "Client",
    "ConnectionClosedError",
    "ConnectionEvent",
    "Consumer",
    "ConsumerConfig",
    "ConsumerDeletedError",
    "ConsumerInfo",
    "ConsumerNotFoundError",
    "DeliverPolicy",
    "DiscardPolicy",
    "DisconnectedError",
    "EventKind",
    "Headers",
    "JetStream",
    "JetStreamApiError",
    "JetStreamError",
    "JsMsg",
    "MaxPayloadError",
    "MessageNotFoundError",
    "Msg",
    "MsgAlreadyAckedError",
    "MsgMetadata",
    "NatsError",
    "NoHeartbeatError",
    "NoRespondersError",
    "NoServersError",
    "OrderedConsumer",
    "PermissionsError",
    "PriorityPolicy",
    "ProtocolError",
    "PubAck",
    "ReplayPolicy",
    "RetentionPolicy",
    "SlowConsumerError",
    "Statistics",
    "StorageType",
    "StoreCompression",
    "Stream",
    "StreamConfig",
    "StreamInfo",
    "StreamMsg",
    "StreamNotFoundError",
    "Subscription",
    "TimeoutError",
    "__version__",
    "connect",
    "errors",
    "make_ssl_context",
]
