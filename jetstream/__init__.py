"""jetstream: a fast, hard-to-break asyncio client for NATS and JetStream.

``import jetstream`` loads nothing but this module and the version: each name below is
imported from its module on first use (PEP 562's module ``__getattr__``), so a program
pays for what it touches, a worker that only needs the errors, say, for
``jetstream.errors``. Every name of ``__all__`` is importable from here as before
(``from jetstream import connect, StreamConfig``); ``benchmarks/import_time.py`` measures
the cost.
"""

from __future__ import annotations

import importlib

from ._version import __version__

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (mypy knows the name)
if TYPE_CHECKING:
    from typing import Any

    from . import errors, service
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
    from .client import Client, JetStream, connect
    from .consumer import Consumer
    from .core import ConnectionEvent, EventKind, Msg, Statistics, Subscription, make_ssl_context
    from .counter import Counter, CounterEntry
    from .errors import (
        AuthorizationError,
        BadHeaderError,
        BadSubjectError,
        BucketExistsError,
        BucketNotFoundError,
        ConnectionClosedError,
        ConsumerDeletedError,
        ConsumerNotFoundError,
        CounterDisabledError,
        CounterError,
        CounterNotFoundError,
        CounterRefusedError,
        DigestMismatchError,
        DisconnectedError,
        InvalidScheduleError,
        JetStreamApiError,
        JetStreamError,
        KeyDeletedError,
        KeyExistsError,
        KeyNotFoundError,
        KeyWrongLastSequenceError,
        MaxPayloadError,
        MessageNotFoundError,
        MsgAlreadyAckedError,
        NatsError,
        NoHeartbeatError,
        NoRespondersError,
        NoServersError,
        NoStreamError,
        ObjectNotFoundError,
        PermissionsError,
        ProtocolError,
        ScheduleError,
        ScheduleRefusedError,
        ServiceConfigError,
        ServiceError,
        ServiceResponseError,
        SlowConsumerError,
        StreamNotFoundError,
        TimeoutError,
        TracingUnavailableError,
    )
    from .kv import (
        KeyValue,
        KeyValueConfig,
        KeyValueEntry,
        KeyValueOp,
        KeyValueStatus,
        KeyWatcher,
    )
    from .message import JsMsg, MsgMetadata, ack_all, ack_sync_all
    from .objectstore import (
        ObjectInfo,
        ObjectLink,
        ObjectMeta,
        ObjectMetaOptions,
        ObjectReader,
        ObjectStore,
        ObjectStoreConfig,
        ObjectStoreStatus,
        ObjectWatcher,
    )
    from .ordered import OrderedConsumer
    from .protocol.headers import Headers
    from .schedule import Schedule, ScheduledMessage
    from .service import EndpointConfig, GroupConfig, Request, Service, ServiceConfig
    from .stream import Stream, StreamMsg

#: where each public name lives: the module, relative to this package ("" for a submodule)
_FROM: dict[str, tuple[str, ...]] = {
    "": ("errors", "service"),
    ".api": (
        "AccountInfo",
        "AckPolicy",
        "ConsumerConfig",
        "ConsumerInfo",
        "DeliverPolicy",
        "DiscardPolicy",
        "PriorityPolicy",
        "PubAck",
        "ReplayPolicy",
        "RetentionPolicy",
        "StorageType",
        "StoreCompression",
        "StreamConfig",
        "StreamInfo",
    ),
    ".client": ("Client", "JetStream", "connect"),
    ".consumer": ("Consumer",),
    ".core": (
        "ConnectionEvent",
        "EventKind",
        "Msg",
        "Statistics",
        "Subscription",
        "make_ssl_context",
    ),
    ".counter": ("Counter", "CounterEntry"),
    ".errors": (
        "AuthorizationError",
        "BadHeaderError",
        "BadSubjectError",
        "BucketExistsError",
        "BucketNotFoundError",
        "ConnectionClosedError",
        "ConsumerDeletedError",
        "ConsumerNotFoundError",
        "CounterDisabledError",
        "CounterError",
        "CounterNotFoundError",
        "CounterRefusedError",
        "DigestMismatchError",
        "DisconnectedError",
        "InvalidScheduleError",
        "JetStreamApiError",
        "JetStreamError",
        "KeyDeletedError",
        "KeyExistsError",
        "KeyNotFoundError",
        "KeyWrongLastSequenceError",
        "MaxPayloadError",
        "MessageNotFoundError",
        "MsgAlreadyAckedError",
        "NatsError",
        "NoHeartbeatError",
        "NoRespondersError",
        "NoServersError",
        "NoStreamError",
        "ObjectNotFoundError",
        "PermissionsError",
        "ProtocolError",
        "ScheduleError",
        "ScheduleRefusedError",
        "ServiceConfigError",
        "ServiceError",
        "ServiceResponseError",
        "SlowConsumerError",
        "StreamNotFoundError",
        "TimeoutError",
        "TracingUnavailableError",
    ),
    ".kv": (
        "KeyValue",
        "KeyValueConfig",
        "KeyValueEntry",
        "KeyValueOp",
        "KeyValueStatus",
        "KeyWatcher",
    ),
    ".message": ("JsMsg", "MsgMetadata", "ack_all", "ack_sync_all"),
    ".objectstore": (
        "ObjectInfo",
        "ObjectLink",
        "ObjectMeta",
        "ObjectMetaOptions",
        "ObjectReader",
        "ObjectStore",
        "ObjectStoreConfig",
        "ObjectStoreStatus",
        "ObjectWatcher",
    ),
    ".ordered": ("OrderedConsumer",),
    ".protocol.headers": ("Headers",),
    ".schedule": ("Schedule", "ScheduledMessage"),
    ".service": ("EndpointConfig", "GroupConfig", "Request", "Service", "ServiceConfig"),
    ".stream": ("Stream", "StreamMsg"),
}

_MODULE_OF = {name: module for module, names in _FROM.items() for name in names}


def __getattr__(name: str) -> Any:
    """Import a public name on first use, then keep it in this module's namespace."""
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = (
        importlib.import_module(f".{name}", __name__)
        if module == ""
        else getattr(importlib.import_module(module, __name__), name)
    )
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__all__ = [
    "AccountInfo",
    "AckPolicy",
    "AuthorizationError",
    "BadHeaderError",
    "BadSubjectError",
    "BucketExistsError",
    "BucketNotFoundError",
    "Client",
    "ConnectionClosedError",
    "ConnectionEvent",
    "Consumer",
    "ConsumerConfig",
    "ConsumerDeletedError",
    "ConsumerInfo",
    "ConsumerNotFoundError",
    "Counter",
    "CounterDisabledError",
    "CounterEntry",
    "CounterError",
    "CounterNotFoundError",
    "CounterRefusedError",
    "DeliverPolicy",
    "DigestMismatchError",
    "DiscardPolicy",
    "DisconnectedError",
    "EndpointConfig",
    "EventKind",
    "GroupConfig",
    "Headers",
    "InvalidScheduleError",
    "JetStream",
    "JetStreamApiError",
    "JetStreamError",
    "JsMsg",
    "KeyDeletedError",
    "KeyExistsError",
    "KeyNotFoundError",
    "KeyValue",
    "KeyValueConfig",
    "KeyValueEntry",
    "KeyValueOp",
    "KeyValueStatus",
    "KeyWatcher",
    "KeyWrongLastSequenceError",
    "MaxPayloadError",
    "MessageNotFoundError",
    "Msg",
    "MsgAlreadyAckedError",
    "MsgMetadata",
    "NatsError",
    "NoHeartbeatError",
    "NoRespondersError",
    "NoServersError",
    "NoStreamError",
    "ObjectInfo",
    "ObjectLink",
    "ObjectMeta",
    "ObjectMetaOptions",
    "ObjectNotFoundError",
    "ObjectReader",
    "ObjectStore",
    "ObjectStoreConfig",
    "ObjectStoreStatus",
    "ObjectWatcher",
    "OrderedConsumer",
    "PermissionsError",
    "PriorityPolicy",
    "ProtocolError",
    "PubAck",
    "ReplayPolicy",
    "Request",
    "RetentionPolicy",
    "Schedule",
    "ScheduleError",
    "ScheduleRefusedError",
    "ScheduledMessage",
    "Service",
    "ServiceConfig",
    "ServiceConfigError",
    "ServiceError",
    "ServiceResponseError",
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
    "TracingUnavailableError",
    "__version__",
    "ack_all",
    "ack_sync_all",
    "connect",
    "errors",
    "make_ssl_context",
    "service",
]
