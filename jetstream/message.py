"""Messages as the user sees them.

``Msg`` wraps the parser's op without copying it: the payload is the bytes the
parser sliced once, and the header block is parsed only when ``headers`` is
first read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from .protocol.headers import Headers, HeadersLike, parse_headers

if TYPE_CHECKING:
    from .client import Client
    from .protocol.ops import Msg as MsgOp

__all__ = ["Msg"]

_EMPTY_HEADERS = Headers()


class Msg(msgspec.Struct):
    """A message received on a subscription or as a reply.

    Attributes:
        subject: the subject it was published to.
        reply: the reply subject, or ``None``.
        data: the payload (``bytes``).
        sid: the id of the subscription it arrived on.
        status: the status code of a status message (503, 408, ...), else 0.
    """

    subject: str
    reply: str | None
    data: bytes
    sid: int = 0
    status: int = 0
    _raw_headers: bytes | None = None
    _client: Client | None = None
    _headers: Headers | None = None

    @classmethod
    def from_op(cls, op: MsgOp, client: Client | None = None) -> Msg:
        """Wrap a parsed op (no copy of the payload)."""
        return cls(op.subject, op.reply, op.payload, op.sid, op.status, op.headers, client)

    @property
    def headers(self) -> Headers:
        """The message headers (parsed on first access; empty when there are none)."""
        h = self._headers
        if h is None:
            raw = self._raw_headers
            h = parse_headers(raw)[2] if raw else _EMPTY_HEADERS
            self._headers = h
        return h

    @property
    def raw_headers(self) -> bytes | None:
        """The header block exactly as received, or ``None``."""
        return self._raw_headers

    @property
    def description(self) -> str:
        """The status description (``'Idle Heartbeat'``, ``'Request Timeout'``...), or ``''``."""
        raw = self._raw_headers
        return parse_headers(raw)[1] if raw else ""

    async def respond(self, data: bytes = b"", *, headers: HeadersLike | None = None) -> None:
        """Publish ``data`` to this message's reply subject.

        Raises:
            ValueError: the message has no reply subject or was not received by a client.
        """
        if not self.reply or self._client is None:
            raise ValueError(f"message on {self.subject!r} has no reply subject to respond to")
        await self._client.publish(self.reply, data, headers=headers)

    def __repr__(self) -> str:
        extra = f", status={self.status}" if self.status else ""
        return (
            f"Msg(subject={self.subject!r}, reply={self.reply!r}, "
            f"data={self.data[:32]!r}{'...' if len(self.data) > 32 else ''}{extra})"
        )
