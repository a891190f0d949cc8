"""What ``jetstream.connect()`` hands out: the layers, composed at the top.

``Client`` is the core client (``jetstream.core``, which knows nothing of
JetStream) with ``jetstream()``. ``JetStream``, what that returns, is the JetStream
context (``jetstream.js``) with the bucket management of the views built on it,
``jetstream.kv`` and ``jetstream.objectstore``. ``add_service()`` starts a service
(``jetstream.service``, built on the core client alone). No module of the layers below
imports this one.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from .core import connect as _core_connect
from .core import with_client_type
from .core.client import Client as CoreClient
from .counter import CounterManager
from .js import JetStreamContext
from .kv.manager import KeyValueManager
from .objectstore.manager import ObjectStoreManager
from .schedule import Schedules

if TYPE_CHECKING:
    from .service import Service, ServiceConfig

__all__ = ["Client", "JetStream", "connect"]


class JetStream(JetStreamContext, KeyValueManager, ObjectStoreManager, Schedules, CounterManager):
    """The JetStream context of a connection. Make it with ``nc.jetstream()``.

    Streams, publishing and dead letters come from ``JetStreamContext``; the KeyValue
    and ObjectStore bucket management (``create_key_value``, ``key_value``,
    ``create_object_store``, ``object_store``, ...) from ``KeyValueManager`` and
    ``ObjectStoreManager``; message schedules (``schedule``, ``list_schedules``,
    ``cancel_schedule``) from ``Schedules``; distributed counters (``counter``) from
    ``CounterManager``.
    """


class Client(CoreClient):
    """A connection to a NATS system. Make one with ``await jetstream.connect(...)``.

    The core client (``jetstream.core.client.Client``) with ``jetstream()`` and
    ``add_service()``.
    """

    async def add_service(self, config: ServiceConfig | None = None, /, **fields: Any) -> Service:
        """Start a service on this connection (ADR-32; see ``jetstream.service``).

        Give a ``ServiceConfig``, or its fields as keywords
        (``nc.add_service(name="calc", version="1.0.0", endpoints=[...])``); keywords
        beside a config replace its fields. The whole configuration is checked first;
        then the service subscribes its discovery subjects (``$SRV.PING|INFO|STATS``,
        ``.<name>``, ``.<name>.<id>``) and its endpoints. Stop it with ``await
        service.stop()`` (or ``async with``).

        Raises:
            TypeError: a keyword that is not a field of ``ServiceConfig``, or no name or
                version.
            ServiceConfigError: a name, the version, a queue group or metadata is invalid.
            BadSubjectError: a group prefix or endpoint subject is invalid.
        """
        # jetstream.service is imported by the first service, not by every connection.
        from .service import ServiceConfig, start_service

        if config is None:
            config = ServiceConfig(**fields)
        elif fields:
            config = dataclasses.replace(config, **fields)
        return await start_service(self, config)

    def jetstream(
        self,
        *,
        domain: str | None = None,
        api_prefix: str | None = None,
        timeout: float = 5.0,
        publish_async_max_pending: int = 4000,
    ) -> JetStream:
        """The JetStream context of this connection (see ``JetStream``)."""
        return JetStream(
            self,
            domain=domain,
            api_prefix=api_prefix,
            timeout=timeout,
            publish_async_max_pending=publish_async_max_pending,
        )


connect = with_client_type(_core_connect, Client)
"""Connect to NATS: ``await jetstream.connect(...)`` or ``async with jetstream.connect(...)
as nc``. Takes the options of ``jetstream.core.connect`` and returns a ``Client``."""
