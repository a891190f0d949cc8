"""The client side of services: find them, read their info and stats, call them.

``ping``, ``info`` and ``stats`` send one discovery request and gather the answers of
every instance that replies within ``timeout`` seconds (or the first ``max_answers``).
They read the answers of any client's services, nats.go's included.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

import msgspec

from ..errors import NoRespondersError, ServiceResponseError
from ..protocol.headers import HeadersLike
from .api import (
    ERROR_CODE_HEADER,
    ERROR_HEADER,
    InfoResponse,
    PingResponse,
    StatsResponse,
    control_subject,
    validate_name,
)

if TYPE_CHECKING:
    from ..core.client import Client
    from ..core.message import Msg

__all__ = ["error_of", "info", "ping", "request", "stats"]

_T = TypeVar("_T")
_PING = msgspec.json.Decoder(PingResponse)
_INFO = msgspec.json.Decoder(InfoResponse)
_STATS = msgspec.json.Decoder(StatsResponse)


async def _gather(
    nc: Client,
    verb: str,
    decoder: msgspec.json.Decoder[_T],
    name: str | None,
    id: str | None,
    timeout: float,
    max_answers: int | None,
) -> list[_T]:
    if name is not None:
        validate_name(name)
    subject = control_subject(verb, name, id)
    if id is not None:
        max_answers = 1
    try:
        replies = await nc.request_many(subject, timeout=timeout, max_msgs=max_answers)
    except NoRespondersError:
        return []
    out: list[_T] = []
    for msg in replies:
        try:
            out.append(decoder.decode(msg.data))
        except msgspec.DecodeError:
            continue  # not a service's answer: something else listens on $SRV
    return out


async def ping(
    nc: Client,
    name: str | None = None,
    id: str | None = None,
    *,
    timeout: float = 1.0,
    max_answers: int | None = None,
) -> list[PingResponse]:
    """Ping the services (all, those called ``name``, or the instance ``id`` of them) and
    return the answers that came within ``timeout`` seconds (``[]`` when none runs).

    Raises:
        ServiceConfigError: ``name`` is not a valid service name.
    """
    return await _gather(nc, "PING", _PING, name, id, timeout, max_answers)


async def info(
    nc: Client,
    name: str | None = None,
    id: str | None = None,
    *,
    timeout: float = 1.0,
    max_answers: int | None = None,
) -> list[InfoResponse]:
    """The INFO answers of the services (see ``ping``): descriptions and endpoints."""
    return await _gather(nc, "INFO", _INFO, name, id, timeout, max_answers)


async def stats(
    nc: Client,
    name: str | None = None,
    id: str | None = None,
    *,
    timeout: float = 1.0,
    max_answers: int | None = None,
) -> list[StatsResponse]:
    """The STATS answers of the services (see ``ping``): each endpoint's counts and times."""
    return await _gather(nc, "STATS", _STATS, name, id, timeout, max_answers)


def error_of(msg: Msg, subject: str | None = None) -> ServiceResponseError | None:
    """The error a service answered with (its ``Nats-Service-Error-Code`` header), or
    ``None`` for an ordinary answer. ``subject``: the one the request went to."""
    headers = msg.headers
    code = headers.get(ERROR_CODE_HEADER)
    if code is None:
        return None
    try:
        number = int(code)
    except ValueError:
        number = 0
    return ServiceResponseError(
        subject or msg.subject, number, headers.get(ERROR_HEADER, ""), msg.data
    )


async def request(
    nc: Client,
    subject: str,
    data: bytes = b"",
    *,
    timeout: float = 1.0,
    headers: HeadersLike | None = None,
) -> Msg:
    """``nc.request`` to a service endpoint that raises its error answers.

    Raises:
        ServiceResponseError: the service answered with an error (code, description, data).
        NoRespondersError: no service listens on ``subject``.
        TimeoutError: no answer within ``timeout`` seconds.
    """
    msg = await nc.request(subject, data, timeout=timeout, headers=headers)
    error = error_of(msg, subject)
    if error is not None:
        raise error
    return msg
