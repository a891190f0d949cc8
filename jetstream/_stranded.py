"""Messages for a pull nobody waits for any more: given back at once.

The server serves a pull request for as long as it lives (its ``expires``) and its
inbox has interest. A fetch or ``next()`` that returned, timed out or was cancelled,
a ``messages()`` iterator that was stopped, a pull left from before a reconnect (the
reconnect hook pulled again while the first request was alive): what such a request
still delivers has no reader, and a message nobody reads waits out the consumer's
``ack_wait`` before it comes again. For a consumer that needs acks (explicit or all),
such a message is given back with a nak at once (``give_back``), and counted in
``Client.stats.stranded_naks``; the server delivers it again to the next pull. A
consumer without acks never redelivers: there is nothing to give back.

(Handing such a message to another fetch of the consumer that waits would spare it a
delivery, but that fetch has a request of its own out, which would then deliver past
its batch in turn: the redelivery only moves to the next message.)

A reader that ends while its pulls may still deliver hands its inbox (its sid) over to
a ``Leftover``, so that nothing is added to the readers' own receive paths:

- ``linger``: the reader returned (a fetch whose batch a second request filled, or
  that a status ended): the inbox stays subscribed until what the requests still owe
  has come or ended, or the last of them has expired;
- ``cut``: the reader was cancelled or stopped: the inbox is unsubscribed at once, so
  the server serves its requests no more, and kept in the sid table until the PONG of
  a PING sent after the UNSUB (what the server sent before is in by then), or
  ``CUT_WAIT`` seconds at most.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from .api import AckPolicy
from .errors import NatsError
from .message import JsMsg, as_js
from .protocol.headers import NATS_PENDING_MESSAGES, parse_headers

if TYPE_CHECKING:
    from ._context import ConsumerHandle
    from .core.client import Client
    from .protocol.ops import Msg as MsgOp

__all__ = ["CUT_WAIT", "LINGER_MARGIN", "Leftover", "give_back", "needs_acks", "wire_size"]

#: seconds a lingering inbox waits past the expiry of the last request it made (the
#: server's 408, or a message, still in flight; a request written while disconnected
#: lives from the reconnect)
LINGER_MARGIN = 5.0
#: seconds at most a cut inbox waits for the PONG after its UNSUB
CUT_WAIT = 5.0
_NAK = b"-NAK"


def needs_acks(consumer: ConsumerHandle) -> bool:
    """The consumer redelivers what is not acknowledged (ack policy explicit or all)."""
    return consumer.cached_info.config.ack_policy in (AckPolicy.EXPLICIT, AckPolicy.ALL)


def wire_size(op: MsgOp) -> int:
    """What a delivered message counts against a pull's ``max_bytes``."""
    return len(op.subject) + len(op.reply or "") + len(op.payload) + (len(op.hdr) if op.hdr else 0)


def give_back(msg: JsMsg) -> None:
    """``msg`` came for a pull nobody waits for: nak it, so that the server delivers it
    again now (not when already acknowledged or the client is closed)."""
    client = msg._client
    if client is None or msg._acked or client.is_closed:
        return
    try:
        msg._send(_NAK, True)
    except NatsError:
        return
    client.count_stranded_nak()


def _ended_count(op: MsgOp) -> int:
    """The messages a status says its request will no longer deliver (ADR-37)."""
    try:
        return int(parse_headers(op.hdr or b"NATS/1.0\r\n\r\n")[2].get(NATS_PENDING_MESSAGES, "0"))
    except ValueError:
        return 0


class Leftover:
    """The sid-table entry of an inbox whose reader ended while its pull requests may
    still deliver (see the module docstring): it gives back what comes."""

    def __init__(
        self,
        consumer: ConsumerHandle,
        nc: Client,
        subject: str,
        sid: int,
        owed: int | None,
        live: int | None,
    ) -> None:
        self.consumer = consumer
        self.nc = nc
        self.subject = subject
        self.sid = sid
        self.queue: str | None = None
        self.max_msgs: int | None = None
        self.received = 0
        #: messages the requests may still deliver, and the requests (None: not known)
        self.owed = owed
        self.live = live
        self._unsubscribed = False
        self._timer: asyncio.TimerHandle | None = None
        self._pong: asyncio.Future[None] | None = None

    def __repr__(self) -> str:
        return f"<Leftover inbox of {self.consumer.name!r} owed={self.owed} live={self.live}>"

    def linger(self, until: float) -> None:
        """Stay subscribed until what is owed came or ended, or (loop time) ``until``."""
        nc = self.nc
        nc.add_delivery(self.sid, self)
        self._timer = nc.loop.call_at(until, self._end)

    def cut(self) -> None:
        """Unsubscribe now; stay in the sid table until the PONG after the UNSUB."""
        nc = self.nc
        loop = nc.loop
        nc.add_delivery(self.sid, self)
        nc.send_unsub(self.sid, None)
        self._unsubscribed = True
        self._timer = loop.call_later(CUT_WAIT, self._end)
        w = nc.send_ping()
        if w is not None:
            w.add_done_callback(self._ponged)
            self._pong = w

    def _ponged(self, w: asyncio.Future[None]) -> None:
        if not w.cancelled():
            w.exception()  # a lost connection: retrieved; nothing more comes either way
        self._end()

    def _deliver(self, op: MsgOp) -> None:
        self.received += 1
        if op.status:
            if op.status == 100:
                return  # an idle heartbeat: the request lives on
            # a status ends one request (408 expired, 409, 404, 503, ...)
            if self.live is not None:
                self.live -= 1
            if self.owed is not None:
                self.owed -= _ended_count(op)
        else:
            msg = as_js(op, self.nc.msg_class(JsMsg))
            if self.owed is not None:
                self.owed -= 1
            give_back(msg)
        live, owed = self.live, self.owed
        if (live is not None and live <= 0) or (owed is not None and owed <= 0):
            self._end()  # nothing more can come

    def _end(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        w = self._pong
        if w is not None:
            self._pong = None
            if not w.done():
                w.cancel()
            elif not w.cancelled():
                w.exception()  # the connection was lost or closed: retrieved
        nc = self.nc
        if nc.delivery(self.sid) is self:
            nc.remove_delivery(self.sid)
            if not self._unsubscribed:
                self._unsubscribed = True
                nc.send_unsub(self.sid, None)

    async def _close(self) -> None:
        """Called by the client on close."""
        self._end()
