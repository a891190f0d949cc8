"""The request an endpoint's handler receives, and how it answers (ADR-32).

An error answer carries two headers: ``Nats-Service-Error-Code`` (a number) and
``Nats-Service-Error`` (a description to show a user); requesters look for them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import msgspec

from ..protocol.headers import Headers, HeadersLike

if TYPE_CHECKING:
    from ..core.message import Msg

__all__ = ["ERROR_CODE_HEADER", "ERROR_HEADER", "Handler", "Request"]

#: Headers of an error answer: a description, and a code that parses as a number.
ERROR_HEADER = "Nats-Service-Error"
ERROR_CODE_HEADER = "Nats-Service-Error-Code"

_encode = msgspec.json.Encoder().encode


class Request:
    """One request to an endpoint, handed to its handler.

    Answer it with ``respond`` or ``respond_error`` (once). A handler that raises
    answers error 500 instead (unless it already answered) and counts as an error.
    """

    __slots__ = ("_error", "_msg", "responded")

    def __init__(self, msg: Msg) -> None:
        self._msg = msg
        self._error: str | None = None
        #: True once an answer was sent.
        self.responded = False

    @property
    def data(self) -> bytes:
        """The request's payload."""
        return self._msg.data

    @property
    def headers(self) -> Headers:
        """The request's headers (empty when there are none)."""
        return self._msg.headers

    @property
    def subject(self) -> str:
        """The subject the request was sent to (it may differ from a wildcard endpoint's)."""
        return self._msg.subject

    @property
    def reply(self) -> str | None:
        """Where the answer goes (``None`` for a message sent without a reply subject)."""
        return self._msg.reply

    async def respond(self, data: bytes = b"", *, headers: HeadersLike | None = None) -> None:
        """Answer the request with ``data`` (and ``headers``).

        Raises:
            ValueError: the request has no reply subject.
        """
        self.responded = True
        await self._msg.respond(data, headers=headers)

    async def respond_json(self, value: Any, *, headers: HeadersLike | None = None) -> None:
        """Answer with ``value`` encoded as JSON."""
        await self.respond(_encode(value), headers=headers)

    async def respond_error(
        self,
        code: int,
        description: str,
        *,
        data: bytes = b"",
        headers: HeadersLike | None = None,
    ) -> None:
        """Answer with an error: the headers ``Nats-Service-Error-Code: <code>`` and
        ``Nats-Service-Error: <description>`` (with ``headers``, if any) and ``data`` as
        the payload. The endpoint counts an error, its ``last_error`` becomes
        ``"<code>:<description>"``.

        Raises:
            ValueError: ``description`` is empty, or the request has no reply subject.
        """
        if not description:
            raise ValueError("an error answer needs a description")
        merged = Headers(headers) if headers else Headers()
        merged[ERROR_HEADER] = description
        merged[ERROR_CODE_HEADER] = str(int(code))
        self._error = f"{int(code)}:{description}"
        await self.respond(data, headers=merged)


#: An endpoint's handler: an async function of the ``Request``.
Handler = Callable[[Request], Awaitable[None]]
