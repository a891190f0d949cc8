"""Core messages as the user sees them.

``Msg`` is what the parser makes for every MSG/HMSG (a subclass of the
protocol op, so there is one object per message and the payload is sliced once);
the header block is parsed only when ``headers`` is first read.
"""

from __future__ import annotations

from typing import ClassVar, Protocol, Self

from ..protocol.headers import Headers, HeadersLike, encode_headers, parse_headers
from ..protocol.ops import Msg as MsgOp

__all__ = ["Msg", "Responder"]

_EMPTY_HEADERS = Headers()


class Responder(Protocol):
    """What ``Msg.respond`` needs of the client that received the message."""

    def delivery(self, sid: int) -> object: ...

    @property
    def write_paused(self) -> bool: ...

    def write_publish(
        self,
        subject: str,
        data: bytes | bytearray | memoryview,
        reply: bytes,
        hdr: bytes | None,
        now: bool = False,
        pre: bytes | None = None,
    ) -> None: ...

    async def wait_writable(self) -> None: ...


class Msg(MsgOp, gc=False):
    """A message received on a subscription or as a reply.

    The parser makes these directly (one object per message, the payload sliced
    once); headers are parsed only when ``headers`` is first read.

    Attributes:
        subject: the subject it was published to.
        sid: the id of the subscription it arrived on.
        reply: the reply subject, or ``None``.
        payload: the payload (``bytes``); ``data`` is the same.
        hdr: the raw header block, or ``None``.
        status: the status code of a status message (503, 408, ...), else 0.
    """

    #: Set on the per-client subclass each client hands its parser (see
    #: ``Msg.for_client``), so no message stores a reference of its own.
    _client: ClassVar[Responder | None] = None
    _headers: Headers | None = None

    @classmethod
    def for_client(cls, client: Responder) -> type[Self]:
        """A subclass of this class bound to ``client`` (for ``respond``; see
        ``Client.msg_class``)."""
        name = cls.__qualname__
        return type(
            name, (cls,), {"_client": client, "__module__": cls.__module__, "__qualname__": name}
        )

    @property
    def data(self) -> bytes:
        """The payload."""
        return self.payload

    @property
    def headers(self) -> Headers:
        """The message headers (parsed on first access; empty when there are none)."""
        h = self._headers
        if h is None:
            raw = self.hdr
            h = parse_headers(raw)[2] if raw else _EMPTY_HEADERS
            self._headers = h
        return h

    @property
    def raw_headers(self) -> bytes | None:
        """The header block exactly as received, or ``None``."""
        return self.hdr

    @property
    def description(self) -> str:
        """The status description (``'Idle Heartbeat'``, ``'Request Timeout'``...), or ``''``."""
        raw = self.hdr
        return parse_headers(raw)[1] if raw else ""

    async def respond(self, data: bytes = b"", *, headers: HeadersLike | None = None) -> None:
        """Publish ``data`` to this message's reply subject.

        Raises:
            ValueError: the message has no reply subject or was not received by a client.
        """
        client = self._client
        reply = self.reply
        if not reply or client is None:
            raise ValueError(f"message on {self.subject!r} has no reply subject to respond to")
        hdr = encode_headers(headers) if headers else None
        # The requester waits: when this is the last message its subscription holds,
        # the answer (with any buffered before it) is written now, not at the end of
        # this loop iteration; within a burst the answers share one write. The reply
        # subject came from the server: written as it is (like an ack subject).
        sub = client.delivery(self.sid)
        now = not getattr(sub, "_queue", None)
        client.write_publish(reply, data, b"", hdr, now, f"PUB {reply}".encode())
        if client.write_paused:
            await client.wait_writable()

    def __repr__(self) -> str:
        extra = f", status={self.status}" if self.status else ""
        return (
            f"Msg(subject={self.subject!r}, reply={self.reply!r}, "
            f"data={self.data[:32]!r}{'...' if len(self.data) > 32 else ''}{extra})"
        )
