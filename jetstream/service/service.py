"""A running service: its endpoints, its discovery subscriptions, its statistics.

Each endpoint is one subscription (in its queue group, ``"q"`` unless configured) with
an async callback: the core client runs it in one task per subscription, so an
endpoint handles its requests one after another, as a nats.go endpoint does. Nine
more subscriptions answer ``$SRV.PING``, ``$SRV.INFO`` and ``$SRV.STATS``, each for all
services, for the service's name and for its id.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import msgspec

from ..errors import ServiceConfigError
from ..protocol.subjects import next_nuid
from .api import (
    INFO_RESPONSE_TYPE,
    PING_RESPONSE_TYPE,
    STATS_RESPONSE_TYPE,
    EndpointConfig,
    EndpointInfo,
    EndpointStats,
    GroupConfig,
    InfoResponse,
    PingResponse,
    ServiceConfig,
    StatsResponse,
    control_subject,
    join_prefix,
    validate_config,
    validate_endpoint,
    validate_queue_group,
)
from .request import Handler, Request

if TYPE_CHECKING:
    from ..core.client import Client
    from ..core.message import Msg
    from ..core.subscription import Subscription

__all__ = ["Group", "Request", "Service", "start_service"]

log = logging.getLogger("jetstream.service")
_encode = msgspec.json.Encoder().encode


def _utcnow() -> _dt.datetime:
    return _dt.datetime.now(_dt.UTC)


class _Endpoint:
    """An endpoint's configuration, subscription and counts."""

    def __init__(self, config: EndpointConfig, subject: str, queue_group: str | None) -> None:
        self.config = config
        self.name = config.name
        self.subject = subject
        self.queue_group = queue_group
        self.metadata = dict(config.metadata)
        self.handler: Handler = config.handler
        self.sub: Subscription | None = None
        self.reset()

    def reset(self) -> None:
        self.num_requests = 0
        self.num_errors = 0
        self.last_error = ""
        self.processing_time = 0

    def info(self) -> EndpointInfo:
        return EndpointInfo(
            name=self.name,
            subject=self.subject,
            queue_group=self.queue_group or "",
            metadata=self.metadata,
        )

    def stats(self, data: Any) -> EndpointStats:
        n = self.num_requests
        return EndpointStats(
            name=self.name,
            subject=self.subject,
            queue_group=self.queue_group or "",
            num_requests=n,
            num_errors=self.num_errors,
            last_error=self.last_error,
            processing_time=self.processing_time,
            average_processing_time=self.processing_time // n if n else 0,
            data=data,
        )

    async def handle(self, msg: Msg) -> None:
        """The subscription's callback: run the handler, answer 500 if it raised, count."""
        request = Request(msg)
        start = time.perf_counter_ns()
        try:
            await self.handler(request)
        except Exception as exc:  # a handler's failure is the caller's error answer
            log.warning("service endpoint %r failed on %r: %r", self.name, msg.subject, exc)
            request._error = "500:internal server error"
            if not request.responded and msg.reply:
                try:
                    await request.respond_error(
                        500, "internal server error", headers={"Nats-Service-Recover": repr(exc)}
                    )
                except Exception as again:  # the connection is going: count it all the same
                    log.warning("service endpoint %r could not answer: %r", self.name, again)
        self.processing_time += time.perf_counter_ns() - start
        self.num_requests += 1
        if request._error is not None:
            self.num_errors += 1
            self.last_error = request._error


class Group:
    """A subject prefix for endpoints: ``group.add_endpoint(...)`` listens on
    ``<prefix>.<subject>``; ``group.add_group(name)`` nests ``<prefix>.<name>``."""

    def __init__(self, service: Service, prefix: str, queue_group: str | None) -> None:
        self._service = service
        #: The subject prefix of its endpoints.
        self.prefix = prefix
        #: The queue group of its endpoints unless they name one (``None``: no queue group).
        self.queue_group = queue_group

    def add_group(self, name: str, *, queue_group: str | None = None) -> Group:
        """A group nested in this one, its prefix ``<this prefix>.<name>``.

        Raises:
            BadSubjectError: the prefix is not a subject (or has a ``>``).
            ServiceConfigError: the queue group is invalid.
        """
        if queue_group is not None:
            validate_queue_group(queue_group)
        prefix = join_prefix(self.prefix, name)
        return Group(self._service, prefix, queue_group or self.queue_group)

    async def add_endpoint(
        self,
        name: str,
        handler: Handler,
        *,
        subject: str | None = None,
        metadata: Mapping[str, str] | None = None,
        queue_group: str | None = None,
        no_queue_group: bool = False,
    ) -> None:
        """Add an endpoint under this group's prefix (see ``EndpointConfig``).

        Raises:
            ServiceConfigError: the name or queue group is invalid, or the service stopped.
            BadSubjectError: the subject is invalid.
        """
        config = EndpointConfig(
            name=name,
            handler=handler,
            subject=subject,
            metadata=metadata or {},
            queue_group=queue_group,
            no_queue_group=no_queue_group,
        )
        await self._service._add(config, self.prefix, self.queue_group)


class Service(Group):
    """A service started by ``nc.add_service(config)``.

    ``info()`` and ``stats()`` are what INFO and STATS answer; ``reset()`` zeroes the
    counts; ``stop()`` drains every subscription of the service. ``add_endpoint`` and
    ``add_group`` add endpoints while it runs.
    """

    def __init__(self, client: Client, config: ServiceConfig) -> None:
        queue = None if config.no_queue_group else config.queue_group
        super().__init__(self, "", queue)
        self._client = client
        self.config = config
        #: The unique id of this instance.
        self.id = next_nuid()
        self.name = config.name
        self.version = config.version
        self.metadata = dict(config.metadata)
        self.started = _utcnow()
        self._endpoints: list[_Endpoint] = []
        self._control: list[Subscription] = []
        self._stopped = False

    @property
    def stopped(self) -> bool:
        """True once ``stop()`` was called (or starting failed)."""
        return self._stopped

    async def _add(self, config: EndpointConfig, prefix: str, inherited: str | None) -> None:
        if self._stopped:
            raise ServiceConfigError(f"service {self.name!r} is stopped: no endpoint can be added")
        subject = validate_endpoint(config, prefix)
        if config.no_queue_group:
            queue = None
        elif config.queue_group is not None:
            queue = config.queue_group
        else:
            queue = inherited
        endpoint = _Endpoint(config, subject, queue)
        endpoint.sub = await self._client.subscribe(subject, queue, cb=endpoint.handle)
        self._endpoints.append(endpoint)

    async def _add_group(self, group: GroupConfig, parent: Group) -> None:
        child = parent.add_group(group.name, queue_group=group.queue_group)
        for endpoint in group.endpoints:
            await self._add(endpoint, child.prefix, child.queue_group)
        for sub in group.groups:
            await self._add_group(sub, child)

    async def _start(self) -> None:
        for verb, answer in (("PING", self._ping), ("INFO", self._info), ("STATS", self._stats)):
            for subject in (
                control_subject(verb),
                control_subject(verb, self.name),
                control_subject(verb, self.name, self.id),
            ):
                self._control.append(await self._client.subscribe(subject, cb=answer))
        for endpoint in self.config.endpoints:
            await self._add(endpoint, "", self.queue_group)
        for group in self.config.groups:
            await self._add_group(group, self)
        self.started = _utcnow()

    # -- discovery answers -----------------------------------------------------------

    def ping(self) -> PingResponse:
        """What this instance answers to PING."""
        return PingResponse(
            type=PING_RESPONSE_TYPE,
            name=self.name,
            id=self.id,
            version=self.version,
            metadata=self.metadata,
        )

    def info(self) -> InfoResponse:
        """What this instance answers to INFO: its description and endpoints."""
        return InfoResponse(
            type=INFO_RESPONSE_TYPE,
            name=self.name,
            id=self.id,
            version=self.version,
            metadata=self.metadata,
            description=self.config.description,
            endpoints=[e.info() for e in self._endpoints],
        )

    def stats(self) -> StatsResponse:
        """What this instance answers to STATS: each endpoint's counts and times."""
        handler = self.config.stats_handler
        return StatsResponse(
            type=STATS_RESPONSE_TYPE,
            name=self.name,
            id=self.id,
            version=self.version,
            metadata=self.metadata,
            started=self.started,
            endpoints=[
                e.stats(handler(e.name) if handler is not None else msgspec.UNSET)
                for e in self._endpoints
            ],
        )

    def reset(self) -> None:
        """Zero every endpoint's counts and times; ``started`` becomes now."""
        for endpoint in self._endpoints:
            endpoint.reset()
        self.started = _utcnow()

    async def _ping(self, msg: Msg) -> None:
        await self._answer(msg, self.ping())

    async def _info(self, msg: Msg) -> None:
        await self._answer(msg, self.info())

    async def _stats(self, msg: Msg) -> None:
        await self._answer(msg, self.stats())

    async def _answer(self, msg: Msg, value: msgspec.Struct) -> None:
        if msg.reply:
            await msg.respond(_encode(value))

    # -- stopping --------------------------------------------------------------------

    async def stop(self, timeout: float = 30.0) -> None:
        """Stop the service: drain its endpoint and discovery subscriptions (the requests
        already received are handled and answered). Calling it again does nothing."""
        if self._stopped:
            return
        self._stopped = True
        subs = [e.sub for e in self._endpoints if e.sub is not None] + self._control
        self._control = []
        await asyncio.gather(*(sub.drain(timeout) for sub in subs))

    async def __aenter__(self) -> Service:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def __repr__(self) -> str:
        return f"<Service {self.name} {self.version} id={self.id} endpoints={len(self._endpoints)}>"


async def start_service(client: Client, config: ServiceConfig) -> Service:
    """Check ``config`` whole, then subscribe the service's discovery subjects and
    endpoints (what ``Client.add_service`` does).

    Raises:
        ServiceConfigError: a name, the version, a queue group or metadata is invalid.
        BadSubjectError: a group prefix or an endpoint subject is invalid.
    """
    validate_config(config)
    service = Service(client, config)
    try:
        await service._start()
    except BaseException:
        await service.stop()
        raise
    return service
