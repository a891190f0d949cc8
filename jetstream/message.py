"""JetStream messages: ``JsMsg`` and its acks, and the metadata of its ack subject.

``Msg`` (every core message, ``jetstream.core.message``) is what the parser makes;
``JsMsg`` is a ``Msg`` with acks, which the parser makes for the deliveries of a
consumer's subscription (its class registered for the sid), so that each delivery is
one object; what came otherwise is made into one by ``as_js``.
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Awaitable, Iterable
from operator import attrgetter
from typing import TYPE_CHECKING, Any, ClassVar, cast

import msgspec

from .core.message import Msg
from .errors import MsgAlreadyAckedError, NatsError, NoRespondersError
from .errors import TimeoutError as NatsTimeoutError

if TYPE_CHECKING:
    from .core.client import Client
    from .protocol.ops import Msg as MsgOp

# Msg is the core's (jetstream.core.message); it is re-exported here, where it was.
__all__ = [
    "JsMsg",
    "Msg",
    "MsgMetadata",
    "SequencePair",
    "ack_all",
    "ack_sync_all",
    "ack_stream_index",
    "as_js",
    "parse_ack_subject",
]


class SequencePair(msgspec.Struct, frozen=True, gc=False):
    """The stream and consumer sequence of a delivered message."""

    stream: int
    consumer: int


class MsgMetadata(msgspec.Struct, frozen=True, gc=False):
    """What the server says about a delivered JetStream message (from its ack subject)."""

    stream: str
    consumer: str
    num_delivered: int
    sequence: SequencePair
    timestamp_ns: int
    num_pending: int
    domain: str = ""

    @property
    def timestamp(self) -> datetime.datetime:
        """When the message was stored (UTC; microsecond precision, see ``timestamp_ns``)."""
        return datetime.datetime.fromtimestamp(self.timestamp_ns / 1e9, tz=datetime.UTC)


def ack_stream_index(tokens: int) -> int:
    """Where the stream's name is among the ``tokens`` dot-separated tokens of an ack
    subject: 2 in the v1 layout (exactly 9 tokens), 4 in v2 (11 or more); the consumer,
    the delivery count, the stream and consumer sequences, the time and the pending count
    follow it in that order. -1 for any other count: 10 tokens fit neither layout (v2
    adds two tokens before the stream's name), so such a subject is no ack subject.

    The one reading of the layout: ``parse_ack_subject``, the ordered consumer's
    sequence check and the Spark source's columns all place their tokens by it.
    """
    return 2 if tokens == 9 else 4 if tokens >= 11 else -1


def parse_ack_subject(reply: str) -> MsgMetadata:
    """Parse a ``$JS.ACK`` reply subject, in either layout.

    v1 (9 tokens): ``$JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>``;
    v2 (11 or more, servers with ``js_ack_fc_v2``): ``$JS.ACK.<domain>.<account hash>.``
    then the same seven tokens, maybe followed by more. A domain of ``_`` means none.

    Raises:
        NatsError: not a JetStream ack subject.
    """
    t = reply.split(".")
    if len(t) < 9 or t[0] != "$JS" or t[1] != "ACK":
        raise NatsError(f"not a JetStream message: reply subject {reply!r}")
    at = ack_stream_index(len(t))
    if at > 0:
        try:
            return MsgMetadata(
                t[at],
                t[at + 1],
                int(t[at + 2]),
                SequencePair(int(t[at + 3]), int(t[at + 4])),
                int(t[at + 5]),
                int(t[at + 6]),
                "" if at == 2 or t[2] == "_" else t[2],
            )
        except ValueError:
            pass
    raise NatsError(f"not a JetStream message: malformed reply subject {reply!r}")


_ACK = b"+ACK"
_NAK = b"-NAK"
_WPI = b"+WPI"
_TERM = b"+TERM"


class JsMsg(Msg, gc=False):
    """A message delivered by a JetStream consumer, to be acknowledged.

    A ``Msg`` (``subject``, ``reply``, ``data``, ``headers``...), bound to the client it
    came through (``Client.msg_class(JsMsg)``, as the consumers make it; a ``JsMsg``
    made directly is bound to none, and cannot be acknowledged). ``headers`` and
    ``metadata`` are parsed on first access. ``ack``, ``nak`` and ``term`` are
    terminal: a second one raises ``MsgAlreadyAckedError`` instead of sending again.
    ``in_progress`` may be sent any number of times before.
    """

    _client: ClassVar[Client | None] = None
    _acked: bool = False
    _meta: MsgMetadata | None = None
    _size: int = 0

    @property
    def metadata(self) -> MsgMetadata:
        """Stream, consumer, sequences, delivery count, pending count and timestamp."""
        m = self._meta
        if m is None:
            m = self._meta = parse_ack_subject(self.reply or "")
        return m

    @property
    def acked(self) -> bool:
        """True once a terminal acknowledgement (ack, nak, term) was sent."""
        return self._acked

    def _send(self, body: bytes, terminal: bool) -> Client:
        if self._acked:
            raise MsgAlreadyAckedError(
                f"message on {self.subject!r} was already acknowledged; nothing sent"
            )
        client = self._client
        if not self.reply or client is None:
            raise NatsError(
                f"message on {self.subject!r} has no reply subject to acknowledge "
                "(a consumer with ack_policy none?)"
            )
        client.write_reply(self.reply, body)
        if terminal:
            self._acked = True
        return client

    async def ack(self) -> None:
        """Acknowledge: the message is done. Buffered, not confirmed (see ``ack_sync``)."""
        # _send inline (the hot path of fetch + ack); _send itself raises the errors
        client = self._client
        if self._acked or not self.reply or client is None:
            self._send(_ACK, True)
            return
        # formatted as text, then encoded once: one conversion of the reply subject
        # instead of encoding it first and formatting bytes around it
        client.write_formatted(self.reply, f"PUB {self.reply} 4\r\n+ACK\r\n".encode(), 4)
        self._acked = True

    async def nak(self, delay: float | None = None) -> None:
        """Negative ack: redeliver, after ``delay`` seconds when given."""
        if delay is None:
            self._send(_NAK, True)
        else:
            self._send(b'-NAK {"delay": %d}' % round(delay * 1e9), True)

    async def term(self, reason: str | None = None) -> None:
        """Never redeliver this message; ``reason`` shows in the MSG_TERMINATED advisory."""
        self._send(_TERM + b" " + reason.encode() if reason else _TERM, True)

    async def in_progress(self) -> None:
        """Tell the server work goes on: resets the ack wait timer."""
        self._send(_WPI, False)

    def ack_sync(self, timeout: float | None = None) -> Awaitable[None]:
        """Acknowledge and wait until the server confirms it (the "double ack"):
        ``await msg.ack_sync()``.

        The ack is written at once; what is returned is the confirmation to await, an
        ``asyncio.Future`` (not a coroutine), so that ``asyncio.gather`` of many costs no
        task apiece: await it, gather it, or give it to ``asyncio.ensure_future`` (not
        ``create_task``, which takes coroutines only). Cancelled, its request is
        dropped; the ack may have reached the server all the same.

        Raises:
            MsgAlreadyAckedError: already acknowledged; nothing is sent.
            TimeoutError: no confirmation within ``timeout`` (default 5 s); the message
                counts as not acknowledged and ``ack_sync`` may be called again. A
                server that no longer counts the delivery (back from a kill with its
                consumer's state of a moment before) never confirms it, and delivers the
                message again to a later pull.
        """
        loop = asyncio.get_running_loop()
        client = self._client
        reply = self.reply
        wait = 5.0 if timeout is None else timeout
        try:
            if self._acked or not reply or client is None:
                client, reply = self._confirmable()  # raises
            conf = _Confirmation(loop=loop)
            conf.msg = self
            conf.client = client
            conf.wait = wait
            # The ack subject came from the server: written as it is, not validated or
            # cached (like the plain acks). The confirmation is the request's waiter: the
            # reply completes it directly.
            conf.inbox = client.request_nowait(reply, "+ACK", wait, conf)
        except NatsError as exc:
            # raised where it is awaited, as from a coroutine: nothing was sent
            failed: asyncio.Future[None] = loop.create_future()
            failed.set_exception(exc)
            return failed
        return conf

    def _confirmable(self) -> tuple[Client, str]:
        """The client to confirm an ack through, and the ack subject; raises (before
        anything is sent) when the message was acknowledged already or has no reply
        subject."""
        if self._acked:
            raise MsgAlreadyAckedError(
                f"message on {self.subject!r} was already acknowledged; nothing sent"
            )
        client = self._client
        if not self.reply or client is None:
            raise NatsError(f"message on {self.subject!r} has no reply subject to acknowledge")
        return client, self.reply

    def __repr__(self) -> str:
        return f"JsMsg(subject={self.subject!r}, data={self.data[:32]!r}, reply={self.reply!r})"


def as_js(op: MsgOp, cls: type[JsMsg]) -> JsMsg:
    """``op`` as a message of ``cls`` (a consumer's, ``Client.msg_class(JsMsg)``): itself
    when the parser made it so (the common case), else a copy."""
    if isinstance(op, cls):
        return op
    return cls(op.subject, op.sid, op.reply, op.payload, op.hdr, op.status)


class _Confirms:
    """``ack_sync_all``'s one waiter for all its acks (the request mux tells it of each
    reply): marks each message acknowledged as its confirmation comes, and ends when the
    last one came, or at the first error."""

    __slots__ = ("fut", "pending", "timeout", "total")

    def __init__(self, fut: asyncio.Future[None], timeout: float) -> None:
        self.fut = fut
        #: reply subject of the ack -> its message, until confirmed
        self.pending: dict[str, JsMsg] = {}
        self.timeout = timeout
        self.total = 0

    def done(self) -> bool:
        return self.fut.done()

    def set_result(self, reply: Msg, /) -> None:
        msg = self.pending.pop(reply.subject, None)
        if msg is None or self.fut.done():
            return
        if reply.status == 503:
            self.fut.set_exception(
                NoRespondersError(f"no responders on {msg.reply!r}: is the consumer gone?")
            )
            return
        msg._acked = True
        if not self.pending:
            self.fut.set_result(None)

    def set_exception(self, exc: BaseException, /) -> None:
        if self.fut.done():
            return
        if isinstance(exc, NatsTimeoutError):
            exc = NatsTimeoutError(
                f"{len(self.pending)} of {self.total} acks not confirmed within "
                f"{self.timeout}s{_UNCONFIRMED}"
            )
        self.fut.set_exception(exc)


class _Confirmation(asyncio.Future[Any]):
    """What ``ack_sync`` returns: the future of its confirmation, which the client's
    request mux completes itself (it is the request's waiter), with ``None`` once the
    server confirmed the ack. A 503 fails it with ``NoRespondersError``, the mux's
    deadline with the ack's ``TimeoutError``, a lost connection with the mux's error; a
    cancel drops the request."""

    msg: JsMsg
    client: Client
    wait: float
    inbox: str = ""

    def set_result(self, answer: Any, /) -> None:
        if self.done():
            return
        # the reply took the request off the mux
        if answer.status == 503:
            super().set_exception(NoRespondersError(f"no responders on {self.msg.reply!r}"))
            return
        self.msg._acked = True
        super().set_result(None)

    def set_exception(self, exception: BaseException | type[BaseException], /) -> None:
        if self.done():
            return
        # a deadline or a lost connection: the mux still holds the request
        self.client.forget_requests((self.inbox,))
        if isinstance(exception, NatsTimeoutError):
            exception = NatsTimeoutError(
                f"the ack of the message on {self.msg.subject!r} was not confirmed within "
                f"{self.wait}s{_UNCONFIRMED}"
            )
        super().set_exception(exception)

    def cancel(self, msg: Any | None = None) -> bool:
        if not self.done():
            self.client.forget_requests((self.inbox,))
        return super().cancel(msg)


#: what an unconfirmed ack may mean: a server that no longer counts the delivery (back
#: from a kill with its consumer's state of a moment before, or a consumer made again)
#: ignores the ack without an answer, so asking again never succeeds
_UNCONFIRMED = (
    " (a server back from a restart may no longer count that delivery: it ignores the"
    " ack and delivers the message again, so read on rather than only ask again)"
)
_reply_of = attrgetter("reply")
_client_of = attrgetter("_client")
_acked_of = attrgetter("_acked")


def _by_client(msgs: Iterable[JsMsg]) -> dict[int, tuple[Client, list[str], list[JsMsg]]]:
    """The messages to acknowledge by client (by identity): it, their ack subjects and
    them. Raises, before anything is sent, for a message acknowledged already, one
    without a reply subject, or a closed client."""
    batch: dict[int, tuple[Client, list[str], list[JsMsg]]] = {}
    for msg in msgs:
        client, reply = msg._confirmable()
        client.check_open()
        _, replies, group = batch.setdefault(id(client), (client, [], []))
        replies.append(reply)
        group.append(msg)
    return batch


async def ack_all(msgs: Iterable[JsMsg]) -> None:
    """Acknowledge every message of ``msgs`` (``ack`` for a batch): their acks are
    formatted together and buffered as one write, instead of a call a message.
    Buffered, not confirmed (see ``ack_sync_all``).

    Raises:
        MsgAlreadyAckedError: one was acknowledged already; nothing is sent.
        NatsError: one has no reply subject to acknowledge; nothing is sent.
        ConnectionClosedError: the client is closed; nothing is sent.
    """
    group = msgs if isinstance(msgs, list) else list(msgs)
    if not group:
        return
    replies = list(map(_reply_of, group))
    client = group[0]._client
    batches: Iterable[tuple[Client, list[str], list[JsMsg]]]
    if (
        client is not None
        and all(replies)
        and len(set(map(_client_of, group))) == 1
        and not any(map(_acked_of, group))
    ):
        # the common case, checked a column at a time: one client, each with an ack
        # subject, none acknowledged yet
        client.check_open()
        batches = [(client, cast("list[str]", replies), group)]
    else:
        batches = _by_client(group).values()  # raises for the odd one out
    for each_client, each, batch in batches:
        _write_acks(each_client, each)
        for msg in batch:
            msg._acked = True


def _write_acks(client: Client, replies: list[str]) -> None:
    """Buffer ``PUB <reply> 4\\r\\n+ACK\\r\\n`` for each of ``replies``, made in one join
    and one encode. An ack subject came from the server, where the parser split it out
    at whitespace: it is written as it is, as ``ack`` writes it."""
    joined = ("PUB " + " 4\r\n+ACK\r\nPUB ".join(replies) + " 4\r\n+ACK\r\n").encode()
    client.write_formatted(replies[0], joined, 4 * len(replies), len(replies))


async def ack_sync_all(msgs: Iterable[JsMsg], timeout: float | None = None) -> None:
    """Acknowledge every message of ``msgs`` and wait until the server confirmed each:
    ``ack_sync`` for a batch, its acks written together and awaited once, with one
    waiter for the batch where gathered ``ack_sync`` calls have one each.

    Each message counts as acknowledged (``acked``) once its own confirmation came, so
    after an error the ones still unacknowledged may be passed again.

    Raises:
        MsgAlreadyAckedError: one was acknowledged already; nothing is sent.
        NatsError: one has no reply subject to acknowledge; nothing is sent.
        TimeoutError: not every confirmation came within ``timeout`` (default 5 s).
        NoRespondersError: nobody answered an ack (the consumer is gone).
        DisconnectedError: the connection was lost while waiting.
    """
    batch = _by_client(msgs)
    if not batch:
        return
    wait = 5.0 if timeout is None else timeout
    loop = asyncio.get_running_loop()
    confirms = _Confirms(loop.create_future(), wait)
    sent: list[tuple[Client, list[str]]] = []
    try:
        for client, replies, group in batch.values():
            inboxes = client.request_each(replies, _ACK, confirms, wait)
            sent.append((client, inboxes))
            confirms.pending.update(zip(inboxes, group, strict=True))
        confirms.total = len(confirms.pending)
        for client, _ in sent:
            if client.write_paused:
                await client.wait_writable()
        await confirms.fut
    finally:
        for client, inboxes in sent:
            client.forget_requests(inboxes)
        fut = confirms.fut
        if fut.done() and not fut.cancelled():
            fut.exception()  # failed while we were cancelled: retrieved, not logged
        else:
            fut.cancel()
