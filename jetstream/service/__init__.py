"""Services: request handlers that NATS tools can discover and watch (ADR-32, "micro").

svc = await nc.add_service(ServiceConfig(name="calc", version="1.0.0", endpoints=[
    EndpointConfig(name="add", handler=add),          # async def add(req: Request) -> None
]))
found = await jetstream.service.ping(nc, "calc")      # every instance that answers
await svc.stop()

Endpoints subscribe in the queue group ``"q"`` unless told otherwise, so instances of a
service share its requests. Each instance answers ``$SRV.PING``, ``$SRV.INFO`` and
``$SRV.STATS`` (also ``.<name>`` and ``.<name>.<id>``) in the JSON every NATS client uses.
"""

from .api import (
    DEFAULT_QUEUE_GROUP,
    ERROR_CODE_HEADER,
    ERROR_HEADER,
    INFO_RESPONSE_TYPE,
    PING_RESPONSE_TYPE,
    SERVICE_API_PREFIX,
    STATS_RESPONSE_TYPE,
    EndpointConfig,
    EndpointInfo,
    EndpointStats,
    GroupConfig,
    Handler,
    InfoResponse,
    PingResponse,
    ServiceConfig,
    StatsResponse,
    control_subject,
    validate_name,
    validate_version,
)
from .discovery import error_of, info, ping, request, stats
from .request import Request
from .service import Group, Service, start_service

__all__ = [
    "DEFAULT_QUEUE_GROUP",
    "ERROR_CODE_HEADER",
    "ERROR_HEADER",
    "INFO_RESPONSE_TYPE",
    "PING_RESPONSE_TYPE",
    "SERVICE_API_PREFIX",
    "STATS_RESPONSE_TYPE",
    "EndpointConfig",
    "EndpointInfo",
    "EndpointStats",
    "Group",
    "GroupConfig",
    "Handler",
    "InfoResponse",
    "PingResponse",
    "Request",
    "Service",
    "ServiceConfig",
    "StatsResponse",
    "control_subject",
    "error_of",
    "info",
    "ping",
    "request",
    "start_service",
    "stats",
    "validate_name",
    "validate_version",
]
