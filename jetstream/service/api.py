"""The configuration of a service and the JSON of its discovery answers (ADR-32).

The configuration (``ServiceConfig``, ``GroupConfig``, ``EndpointConfig``) is plain
data checked by ``validate_*`` before anything is sent. The answers to ``$SRV.PING``,
``$SRV.INFO`` and ``$SRV.STATS`` are msgspec Structs whose field names and ``type``
strings are those every NATS client shares; they decode the answers of other clients'
services too, older ones included (a field they do not send takes its default).
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from ..errors import ServiceConfigError
from ..protocol.subjects import validate_queue, validate_subscribe_subject
from .request import ERROR_CODE_HEADER, ERROR_HEADER, Handler

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
    "GroupConfig",
    "Handler",
    "InfoResponse",
    "PingResponse",
    "ServiceConfig",
    "StatsResponse",
    "control_subject",
    "validate_name",
    "validate_version",
]

#: The root of every discovery subject: ``$SRV.<VERB>[.<name>[.<id>]]``.
SERVICE_API_PREFIX = "$SRV"
#: The queue group of an endpoint unless the service, a group or the endpoint says another.
DEFAULT_QUEUE_GROUP = "q"

PING_RESPONSE_TYPE = "io.nats.micro.v1.ping_response"
INFO_RESPONSE_TYPE = "io.nats.micro.v1.info_response"
STATS_RESPONSE_TYPE = "io.nats.micro.v1.stats_response"

_NAME = re.compile(r"[A-Za-z0-9_-]+")
# The regular expression semver.org suggests, written out by its parts.
_NUM = r"(?:0|[1-9]\d*)"
_PRE_ID = r"(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)"
_BUILD_ID = r"[0-9a-zA-Z-]+"
_SEMVER = re.compile(
    rf"{_NUM}\.{_NUM}\.{_NUM}(?:-{_PRE_ID}(?:\.{_PRE_ID})*)?(?:\+{_BUILD_ID}(?:\.{_BUILD_ID})*)?"
)


def validate_name(name: str, what: str = "service name") -> None:
    """Check a service or endpoint name: one or more of ``A-Z a-z 0-9 - _``.

    Raises:
        ServiceConfigError: the name is empty or has another character.
    """
    if not isinstance(name, str) or _NAME.fullmatch(name) is None:
        raise ServiceConfigError(
            f"invalid {what} {name!r}: use one or more of the letters A-Z a-z, digits, '-' and '_'"
        )


def validate_version(version: str) -> None:
    """Check a service version: a semantic version (``1.0.0``, ``2.1.0-rc.1+build.5``).

    Raises:
        ServiceConfigError: the version is not a semantic version.
    """
    if not isinstance(version, str) or _SEMVER.fullmatch(version) is None:
        raise ServiceConfigError(
            f"invalid service version {version!r}: it must be a semantic version such as 1.0.0"
        )


def validate_queue_group(queue_group: str) -> None:
    """Check a queue group name (as the server wants it).

    Raises:
        ServiceConfigError: the name is empty or has a space or control character.
    """
    try:
        validate_queue(queue_group)
    except ValueError as exc:
        raise ServiceConfigError(str(exc)) from None


def validate_prefix(prefix: str) -> None:
    """Check a group prefix: a subject (``*`` tokens allowed) without a ``>`` token.

    Raises:
        BadSubjectError: the prefix is not such a subject.
    """
    validate_subscribe_subject(prefix if not prefix.endswith(">") else prefix + ".x")


def control_subject(verb: str, name: str | None = None, id: str | None = None) -> str:
    """The discovery subject of ``verb`` (``PING``, ``INFO`` or ``STATS``): for every
    service, for the services called ``name``, or for the one instance ``id`` of them."""
    if id is not None and name is None:
        raise ValueError("a service id needs the service name too")
    parts = [SERVICE_API_PREFIX, verb.upper()]
    if name is not None:
        parts.append(name)
    if id is not None:
        parts.append(id)
    return ".".join(parts)


# --------------------------------------------------------------------------- configuration


@dataclass(frozen=True, kw_only=True)
class EndpointConfig:
    """One endpoint: a handler listening on a subject.

    Attributes:
        name: the endpoint's name (``A-Z a-z 0-9 - _``), reported by INFO and STATS.
        handler: the async function called with each ``Request``.
        subject: where it listens (wildcards allowed); the name when not given. Inside a
            group the group's prefix comes first.
        metadata: free-form strings reported by INFO; fixed once the endpoint exists.
        queue_group: the queue group of its subscription; the group's or the service's
            when not given.
        no_queue_group: a plain subscription: every instance gets every request.
    """

    name: str
    handler: Handler
    subject: str | None = None
    metadata: Mapping[str, str] = field(default_factory=dict)
    queue_group: str | None = None
    no_queue_group: bool = False


@dataclass(frozen=True, kw_only=True)
class GroupConfig:
    """A subject prefix shared by the endpoints (and groups) inside it.

    Attributes:
        name: the prefix (a subject, ``*`` allowed, no ``>``); a nested group's is
            appended to its parent's with a ``.``.
        queue_group: the default queue group of its endpoints (else its parent's).
        endpoints: the endpoints under the prefix.
        groups: groups nested in this one.
    """

    name: str
    queue_group: str | None = None
    endpoints: Sequence[EndpointConfig] = ()
    groups: Sequence[GroupConfig] = ()


@dataclass(frozen=True, kw_only=True)
class ServiceConfig:
    """A service: what ``nc.add_service()`` starts.

    Attributes:
        name: the kind of the service, shared by all its instances (``A-Z a-z 0-9 - _``).
        version: a semantic version (``1.0.0``).
        description: free text reported by INFO.
        metadata: free-form strings reported by every discovery answer; fixed once set.
        queue_group: the default queue group of its endpoints, ``"q"`` (so instances
            share the requests).
        no_queue_group: endpoints subscribe without a queue group unless they name one.
        endpoints: the endpoints directly on the service.
        groups: groups of endpoints under a subject prefix.
        stats_handler: called with each endpoint's name when STATS is asked; what it
            returns (anything JSON can encode) is that endpoint's ``data``.
    """

    name: str
    version: str
    description: str = ""
    metadata: Mapping[str, str] = field(default_factory=dict)
    queue_group: str = DEFAULT_QUEUE_GROUP
    no_queue_group: bool = False
    endpoints: Sequence[EndpointConfig] = ()
    groups: Sequence[GroupConfig] = ()
    stats_handler: Callable[[str], Any] | None = None


def _check_metadata(metadata: Mapping[str, str], what: str) -> None:
    for key, value in metadata.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise ServiceConfigError(f"{what} metadata must map strings to strings: {key!r}")


def validate_config(config: ServiceConfig) -> None:
    """Check the whole configuration (names, version, queue groups, prefixes, subjects).

    Raises:
        ServiceConfigError: a name, version, queue group or metadata is invalid.
        BadSubjectError: a group prefix or endpoint subject is invalid.
    """
    validate_name(config.name)
    validate_version(config.version)
    validate_queue_group(config.queue_group)
    _check_metadata(config.metadata, "service")
    for endpoint in config.endpoints:
        validate_endpoint(endpoint, "")
    for group in config.groups:
        _validate_group(group, "")


def _validate_group(group: GroupConfig, parent: str) -> None:
    prefix = join_prefix(parent, group.name)
    if group.queue_group is not None:
        validate_queue_group(group.queue_group)
    for endpoint in group.endpoints:
        validate_endpoint(endpoint, prefix)
    for sub in group.groups:
        _validate_group(sub, prefix)


def join_prefix(parent: str, name: str) -> str:
    """A group's prefix under ``parent`` (checked)."""
    prefix = f"{parent}.{name}" if parent and name else parent or name
    if prefix:
        validate_prefix(prefix)
    return prefix


def validate_endpoint(endpoint: EndpointConfig, prefix: str) -> str:
    """Check an endpoint under the group ``prefix``; returns the subject it listens on."""
    validate_name(endpoint.name, "endpoint name")
    if not callable(endpoint.handler):
        raise ServiceConfigError(f"the handler of endpoint {endpoint.name!r} is not callable")
    if endpoint.queue_group is not None:
        validate_queue_group(endpoint.queue_group)
    _check_metadata(endpoint.metadata, f"endpoint {endpoint.name!r}")
    own = endpoint.subject if endpoint.subject is not None else endpoint.name
    subject = f"{prefix}.{own}" if prefix else own
    validate_subscribe_subject(subject)
    return subject


# --------------------------------------------------------------------------- the answers


class _Answer(msgspec.Struct, kw_only=True, frozen=True):
    """The fields of every discovery answer."""

    type: str = ""
    name: str = ""
    id: str = ""
    version: str = ""
    #: The service's metadata (``{}`` when it has none).
    metadata: dict[str, str] | None = None


class PingResponse(_Answer, frozen=True, kw_only=True):
    """The answer to ``$SRV.PING``: who the instance is."""


class EndpointInfo(msgspec.Struct, kw_only=True, frozen=True):
    """One endpoint in an INFO answer."""

    name: str = ""
    subject: str = ""
    queue_group: str = ""
    #: ``None`` when the answering client sends ``null`` for an endpoint without metadata.
    metadata: dict[str, str] | None = None


class InfoResponse(_Answer, frozen=True, kw_only=True):
    """The answer to ``$SRV.INFO``: the service's description and endpoints."""

    description: str = ""
    endpoints: list[EndpointInfo] = msgspec.field(default_factory=list)


class EndpointStats(msgspec.Struct, kw_only=True, frozen=True):
    """One endpoint in a STATS answer. Times are integer nanoseconds, as on the wire."""

    name: str = ""
    subject: str = ""
    queue_group: str = ""
    num_requests: int = 0
    num_errors: int = 0
    #: ``"<code>:<description>"`` of the last error answer, or ``""``.
    last_error: str = ""
    #: Total time spent in the handler, nanoseconds.
    processing_time: int = 0
    #: ``processing_time // num_requests`` (0 before the first request), nanoseconds.
    average_processing_time: int = 0
    #: What the service's stats handler returned for this endpoint (left out when none).
    data: Any = msgspec.UNSET


class StatsResponse(_Answer, frozen=True, kw_only=True):
    """The answer to ``$SRV.STATS``: when the instance started, and each endpoint's counts."""

    #: When the service started (or its stats were last reset), UTC.
    started: _dt.datetime | None = None
    endpoints: list[EndpointStats] = msgspec.field(default_factory=list)
