"""Dead letters: the MAX_DELIVERIES and MSG_TERMINATED advisories of consumers.

JetStream does not move a message it gave up on anywhere; it publishes an
advisory naming the stream sequence. The pattern of the consumers documentation:
listen to the advisories (or capture them in a stream of their own), then read the
message from the stream by sequence while it is still there (or from a mirror).

The server notices ``max_deliver`` when it would deliver the message once more: for
a pull consumer that is when a pull is waiting after the last ``ack_wait`` ran out,
so the MAX_DELIVERIES advisory may come only with the consumer's next pull.

    async with js.dead_letters("ORDERS", "worker") as letters:
        async for adv in letters:
            msg = await js.dead_letter_message(adv)
"""

from __future__ import annotations

import asyncio
import datetime as _dt
from typing import TYPE_CHECKING, Self

import msgspec

from .errors import ProtocolError
from .errors import TimeoutError as NatsTimeoutError

if TYPE_CHECKING:
    from .core.client import Client
    from .core.subscription import Subscription
    from .stream import Stream, StreamMsg

__all__ = [
    "MAX_DELIVERIES_SUBJECT",
    "MSG_TERMINATED_SUBJECT",
    "AdvisoryStream",
    "DeadLetterAdvisory",
    "MaxDeliveriesAdvisory",
    "TerminatedAdvisory",
]

MAX_DELIVERIES_SUBJECT = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES"
MSG_TERMINATED_SUBJECT = "$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED"
MAX_DELIVERIES_TYPE = "io.nats.jetstream.advisory.v1.max_deliver"
TERMINATED_TYPE = "io.nats.jetstream.advisory.v1.terminated"


class _Advisory(msgspec.Struct, kw_only=True, frozen=True):
    type: str = ""
    id: str = ""
    timestamp: _dt.datetime | None = None
    stream: str
    consumer: str
    stream_seq: int
    deliveries: int = 0
    domain: str = ""


class MaxDeliveriesAdvisory(_Advisory, frozen=True):
    """A message reached the consumer's ``max_deliver`` without being acknowledged."""


class TerminatedAdvisory(_Advisory, frozen=True):
    """A message was terminated with ``term()`` (``reason`` is what was given)."""

    consumer_seq: int = 0
    reason: str = ""


DeadLetterAdvisory = MaxDeliveriesAdvisory | TerminatedAdvisory

_MAX = msgspec.json.Decoder(MaxDeliveriesAdvisory)
_TERM = msgspec.json.Decoder(TerminatedAdvisory)


def decode_advisory(subject: str, data: bytes) -> DeadLetterAdvisory:
    """Decode the JSON of a MAX_DELIVERIES or MSG_TERMINATED advisory.

    Raises:
        ProtocolError: the payload is not such an advisory.
    """
    try:
        if subject.startswith(MSG_TERMINATED_SUBJECT):
            return _TERM.decode(data)
        return _MAX.decode(data)
    except msgspec.DecodeError as exc:
        raise ProtocolError(f"advisory on {subject!r} is not valid: {exc}") from None


class AdvisoryStream:
    """An async iterator of typed dead-letter advisories (``JetStream.dead_letters``).

    One subscription on ``$JS.EVENT.ADVISORY.CONSUMER.*.<stream>.<consumer>``; the
    other consumer advisories (created, deleted...) are skipped.
    """

    def __init__(self, js: DeadLetters, stream: str, consumer: str, kinds: frozenset[str]) -> None:
        self._js = js
        self._subject = f"$JS.EVENT.ADVISORY.CONSUMER.*.{stream}.{consumer}"
        self._kinds = kinds
        self._sub: Subscription | None = None

    async def _open(self) -> Subscription:
        if self._sub is None:
            nc = self._js.client
            self._sub = await nc.subscribe(self._subject)
            await nc.flush()
        return self._sub

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> DeadLetterAdvisory:
        sub = await self._open()
        while True:
            msg = await sub.__anext__()
            if msg.subject.split(".", 5)[4] in self._kinds:
                return decode_advisory(msg.subject, msg.data)

    async def next(self, timeout: float | None = None) -> DeadLetterAdvisory:
        """The next advisory, waiting at most ``timeout`` seconds.

        Raises:
            TimeoutError: none in time.
        """
        try:
            async with asyncio.timeout(timeout):
                return await self.__anext__()
        except TimeoutError as exc:
            if isinstance(exc, NatsTimeoutError):
                raise
            raise NatsTimeoutError(f"no dead-letter advisory within {timeout}s") from None

    async def close(self) -> None:
        """Unsubscribe."""
        if self._sub is not None:
            await self._sub.unsubscribe()

    async def __aenter__(self) -> Self:
        await self._open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class DeadLetters:
    """Mixed into ``JetStream``: the dead-letter helpers."""

    if TYPE_CHECKING:

        @property
        def client(self) -> Client: ...

        async def stream(self, name: str) -> Stream: ...

    def dead_letters(
        self,
        stream: str = "*",
        consumer: str = "*",
        *,
        max_deliveries: bool = True,
        terminated: bool = True,
    ) -> AdvisoryStream:
        """Advisories of messages a consumer gave up on (``*`` matches any)."""
        kinds = set()
        if max_deliveries:
            kinds.add("MAX_DELIVERIES")
        if terminated:
            kinds.add("MSG_TERMINATED")
        if not kinds:
            raise ValueError("ask for max_deliveries, terminated or both")
        return AdvisoryStream(self, stream, consumer, frozenset(kinds))

    async def dead_letter_message(
        self,
        advisory: DeadLetterAdvisory,
        *,
        from_stream: str | None = None,
    ) -> StreamMsg:
        """The message an advisory is about, read by sequence from its stream (or from
        ``from_stream``, e.g. a mirror that keeps messages longer).

        Raises:
            MessageNotFoundError: it is gone (acked away on a work queue, purged, aged out).
        """
        stream = await self.stream(from_stream or advisory.stream)
        return await stream.get_msg(advisory.stream_seq)
