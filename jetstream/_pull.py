"""Pull consumption: what pulls share, and the continuous ``MessageStream``.

(One-shot fetches, ``_Fetch``, are in ``_fetch.py``.)

Both register themselves in the client's sid table on an inbox of their own and
receive messages straight from the read path (no task, no future per message).
Status messages never reach user code: each is told apart once, by the table of
``_pullstatus.py``, and handed to ``_on_status`` with its kind.

The continuous stream keeps ``outstanding`` (asked, not yet delivered or given up
by the server) and the buffer (delivered, not yet taken by the reader); below the
threshold it pulls ``batch - outstanding - buffered`` more, so memory stays
bounded by one batch however slow the reader is. A reset (a missed heartbeat, a
reconnect, a leader change) pulls again on a fresh inbox; the old inbox stays
subscribed while its requests may live, and what they still deliver is kept
without counting against the new requests. When the stream stops, what is buffered
and what its requests still deliver is given back at once (``_stranded.py``).
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._context import ConsumerHandle
from ._leaders import consumer_key
from ._pullstatus import (
    DELETED,
    ENDED,
    HEARTBEAT,
    LEADER,
    NO_LEADER,
    PIN_STALE,
    REFUSED,
    SHUTDOWN,
    pull_status,
)
from ._reader import ErrorCallback, MessageReader, all_plain, js_msgs, take_first
from ._stranded import Leftover, give_back, needs_acks, wire_size
from .api import PullRequest, encode, encode_pull
from .errors import (
    ConsumerDeletedError,
    JetStreamError,
    MsgAlreadyAckedError,
    NatsError,
    NoHeartbeatError,
    NoRespondersError,
)
from .message import JsMsg, as_js
from .protocol.headers import NATS_PENDING_BYTES, NATS_PENDING_MESSAGES, parse_headers

if TYPE_CHECKING:
    from .protocol.ops import Msg as MsgOp

__all__ = ["HB_TICKS", "MessageStream", "PullOptions"]

PIN_ID_HEADER = "Nats-Pin-Id"
#: heartbeat checks per idle-heartbeat interval (each one reads a flag)
HB_TICKS = 4


@dataclass
class PullOptions:
    """Options of a pull (checked before anything is sent)."""

    batch: int = 500
    max_bytes: int | None = None
    expires: float = 30.0
    heartbeat: float | None = None
    threshold_messages: int | None = None
    threshold_bytes: int | None = None
    no_wait: bool = False
    group: str | None = None
    min_pending: int | None = None
    min_ack_pending: int | None = None
    priority: int | None = None

    def check(self) -> None:
        if self.batch < 1:
            raise ValueError("batch / max_messages must be at least 1")
        if self.max_bytes is not None and self.max_bytes < 1:
            raise ValueError("max_bytes must be positive")
        if not self.no_wait and self.expires < 0.001:
            raise ValueError("expires must be positive")
        if self.heartbeat is not None and not self.no_wait:
            if self.heartbeat <= 0:
                raise ValueError("heartbeat must be positive")
            if self.heartbeat * 2 > self.expires:
                raise ValueError("heartbeat must be at most half of expires")


class _PullBase:
    """An inbox subscription that receives what pull requests deliver."""

    def __init__(self, consumer: ConsumerHandle, opts: PullOptions) -> None:
        opts.check()
        js = consumer.js
        self._consumer = consumer
        self._nc = nc = js.client
        self._loop = nc.loop
        self._opts = opts
        self._next_subject = js.api_subject(
            f"CONSUMER.MSG.NEXT.{consumer.stream_name}.{consumer.name}"
        )
        self.subject = nc.new_inbox()
        self.queue: str | None = None
        self.max_msgs: int | None = None
        self.received = 0
        self._sid = nc.new_sid()
        self._buf: deque[JsMsg] = deque()
        self._seen = False
        self._hb_misses = 0
        self._hb_timer: asyncio.TimerHandle | None = None
        self._closed = False
        self._error: BaseException | None = None
        self._track_bytes = opts.max_bytes is not None
        #: what the consumer delivers is redelivered unless acked: none may be stranded
        self._acks = needs_acks(consumer)
        self._cls = nc.msg_class(JsMsg)  # what the parser makes of our deliveries

    def _subscribe(self) -> None:
        nc = self._nc
        nc.add_delivery(self._sid, self, self._cls)
        nc.send_sub(self.subject, self._sid, None)

    def _unsubscribe(self) -> None:
        nc = self._nc
        if nc.delivery(self._sid) is not None:
            nc.remove_delivery(self._sid)
            nc.send_unsub(self._sid, None)

    def _pull(self, batch: int, max_bytes: int | None, expires: float | None = None) -> None:
        o = self._opts
        # to our own inbox: the reply subject is neither validated nor cached
        reply = self.subject.encode()
        if max_bytes is None and not o.no_wait and o.group is None:
            body = encode_pull(batch, o.expires if expires is None else expires, o.heartbeat)
            self._nc.write_publish(self._next_subject, body, reply, None, now=True)
            return
        req = PullRequest(batch=batch)
        if max_bytes is not None:
            req.max_bytes = max_bytes
        if o.no_wait:
            req.no_wait = True
        else:
            req.expires = o.expires if expires is None else expires
            if o.heartbeat:
                req.idle_heartbeat = o.heartbeat
        if o.group is not None:
            req.group = o.group
            if o.min_pending is not None:
                req.min_pending = o.min_pending
            if o.min_ack_pending is not None:
                req.min_ack_pending = o.min_ack_pending
            if o.priority is not None:
                req.priority = o.priority
            if self._consumer._pin_id:
                req.id = self._consumer._pin_id
        self._nc.write_publish(self._next_subject, encode(req), reply, None, now=True)

    def _ack_next(self, msg: JsMsg) -> None:
        """Acknowledge ``msg`` and ask for the next batch in one message (``+NXT``)."""
        if msg.acked:
            raise MsgAlreadyAckedError(f"message on {msg.subject!r} was already acknowledged")
        if not msg.reply:
            raise NatsError(f"message on {msg.subject!r} has no reply subject to acknowledge")
        o = self._opts
        body = b"+NXT " + encode_pull(o.batch, o.expires, o.heartbeat)
        # an ack subject the server gave us: written as it is, as the plain acks are
        pre = b"PUB %b " % msg.reply.encode()
        self._nc.write_publish(msg.reply, body, self.subject.encode(), None, True, pre)
        msg._acked = True

    def _deliver(self, op: MsgOp) -> None:
        self._seen = True
        if op.status == 0:
            self.received += 1
            msg = as_js(op, self._cls)
            if self._opts.group is not None and op.hdr and b"Nats-Pin-Id" in op.hdr:
                c = self._consumer
                c._pin_id = msg.headers.get(PIN_ID_HEADER) or c._pin_id
            self._on_msg(msg, wire_size(op) if self._track_bytes else 0)
        else:
            _, desc, headers = parse_headers(op.hdr or b"NATS/1.0\r\n\r\n")
            try:
                msgs = int(headers.get(NATS_PENDING_MESSAGES, "0"))
                nbytes = int(headers.get(NATS_PENDING_BYTES, "0"))
            except ValueError:
                msgs = nbytes = 0
            self._on_status(pull_status(op.status, desc), op.status, desc, msgs, nbytes)

    def _deliver_many(self, ops: list[MsgOp], size: int) -> bool:
        """``_deliver`` of a whole feed for this inbox in one ``extend`` (the messages
        made at C speed), when every op is a plain message and no bytes or priority
        group are tracked; else False, and the ops go one by one."""
        if self._track_bytes or self._opts.group is not None or self._closed or not all_plain(ops):
            return False
        self._seen = True
        self.received += len(ops)
        buf: deque[Any] = self._buf
        buf.extend(js_msgs(ops, self._cls))
        self._took(len(ops))
        return True

    def _took(self, n: int) -> None:
        """``n`` plain messages were just added to the buffer by ``_deliver_many``."""
        raise NotImplementedError

    def _on_msg(self, msg: JsMsg, size: int) -> None:
        raise NotImplementedError

    def _on_status(self, kind: int, status: int, desc: str, msgs: int, nbytes: int) -> None:
        """A status of ``kind`` (``_pullstatus``) came; ``msgs`` and ``nbytes``: what
        the request it ended will no longer deliver."""
        raise NotImplementedError

    def _status_error(self, status: int, desc: str) -> NatsError:
        c = self._consumer
        where = f"consumer {c.name!r} of stream {c.stream_name!r}"
        kind = pull_status(status, desc)
        if kind == DELETED:
            return ConsumerDeletedError(f"{where} was deleted")
        if kind == NO_LEADER:
            return NoRespondersError(f"no server answered a pull on {where}")
        return JetStreamError(f"pull on {where} failed: {status} {desc}")

    # heartbeats: one timer per pull, checking a flag; nothing per message

    def _arm_heartbeat(self) -> None:
        # The timer looks HB_TICKS times per heartbeat interval, so two missed heartbeats
        # are noticed within 2 intervals plus a quarter of one.
        hb = self._opts.heartbeat
        if hb and self._hb_timer is None and not self._closed:
            self._hb_timer = self._loop.call_later(hb / HB_TICKS, self._hb_tick)

    def _stop_heartbeat(self) -> None:
        if self._hb_timer is not None:
            self._hb_timer.cancel()
            self._hb_timer = None

    def _hb_tick(self) -> None:
        self._hb_timer = None
        if self._closed:
            return
        if self._seen or not self._expecting() or not self._nc.is_connected:
            self._seen = False
            self._hb_misses = 0
        else:
            self._hb_misses += 1
            if self._hb_misses >= 2 * HB_TICKS:
                self._hb_misses = 0
                self._missed_heartbeat()
        self._arm_heartbeat()

    def _expecting(self) -> bool:
        raise NotImplementedError

    def _missed_heartbeat(self) -> None:
        raise NotImplementedError

    def _missed_error(self) -> NoHeartbeatError:
        c = self._consumer
        hb = self._opts.heartbeat
        return NoHeartbeatError(
            f"no heartbeat from consumer {c.name!r} of stream {c.stream_name!r} "
            f"for {2 * (hb or 0):g}s"
        )

    async def _close(self) -> None:
        """Called by the client on close."""
        self._finish(None)

    def _finish(self, error: BaseException | None) -> None:
        if self._closed:
            return
        self._closed = True
        if error is not None and self._error is None:
            self._error = error
        self._stop_heartbeat()
        self._unsubscribe()

    def _leftover(self, owed: int | None, live: int | None) -> Leftover | None:
        """End, handing the inbox over to a ``Leftover`` that gives back what the requests
        still deliver (None: nothing can come or needs giving back; ended by ``_finish``)."""
        nc = self._nc
        gone = live == 0 or (owed is not None and owed <= 0) or nc.is_closed
        if gone or self._closed or not self._acks or nc.delivery(self._sid) is not self:
            self._finish(None)
            return None
        self._closed = True
        self._stop_heartbeat()
        return Leftover(self._consumer, nc, self.subject, self._sid, owed, live)


# What ends one round of a fetch besides its messages (the result of ``_Fetch._done``).
class MessageStream(_PullBase, MessageReader):
    """Continuous pull consumption: an async iterator of ``JsMsg`` (``Consumer.messages``).

    Keeps its buffer topped up with pull requests at the threshold, watches the idle
    heartbeats, and pulls again after a reconnect or a missed heartbeat (reported to
    ``error_cb`` as ``NoHeartbeatError``). ``ConsumerDeletedError`` (and other
    terminal statuses) end the iteration by being raised. ``stop()`` ends it at once;
    ``drain()`` lets the reader take what is buffered first.
    """

    def __init__(
        self,
        consumer: ConsumerHandle,
        opts: PullOptions,
        error_cb: ErrorCallback | None,
    ) -> None:
        super().__init__(consumer, opts)
        b = opts.batch
        self._thr_msgs = opts.threshold_messages if opts.threshold_messages is not None else b // 2
        mb = opts.max_bytes
        self._thr_bytes = (
            opts.threshold_bytes if opts.threshold_bytes is not None else (mb // 2 if mb else 0)
        )
        self._out_msgs = 0
        self._out_bytes = 0
        self._buf_bytes = 0
        self._waiter: asyncio.Future[None] | None = None
        self._draining = False
        self._error_cb = error_cb
        self._retry_timer: asyncio.TimerHandle | None = None
        self._started = False
        #: inboxes left by resets, still subscribed while their requests may deliver
        self._retired: dict[int, _RetiredInbox] = {}

    @property
    def outstanding(self) -> int:
        """Messages its pull requests may still deliver: asked for, not yet come nor given
        up by the server. It pulls again when this and ``pending`` fall to the threshold."""
        return self._out_msgs

    def _start(self) -> None:
        if self._started:
            return
        self._started = True
        self._subscribe()
        self._nc.add_loss_hook(self._on_loss)
        self._nc.add_reconnect_hook(self._on_reconnect)
        c = self._consumer
        c._js._leaders.add(consumer_key(c.stream_name, c.name), self._on_leader)
        self._refill()
        self._arm_heartbeat()

    # -- accounting -------------------------------------------------------------------

    def _refill(self) -> None:
        if self._closed or self._draining or self._retry_timer is not None:
            return
        o = self._opts
        have = self._out_msgs + self.pending
        if o.max_bytes is None:
            if have <= self._thr_msgs:
                n = o.batch - have
                if n > 0:
                    self._out_msgs += n
                    self._pull(n, None)
        else:
            have_bytes = self._out_bytes + self._buf_bytes
            if have_bytes <= self._thr_bytes or have <= self._thr_msgs:
                nbytes = o.max_bytes - have_bytes
                n = o.batch - have
                if nbytes > 0 and n > 0:
                    self._out_msgs += n
                    self._out_bytes += nbytes
                    self._pull(n, nbytes)

    def _deliver(self, op: MsgOp) -> None:
        # The common case inline: a plain message, no byte accounting, no priority group.
        if op.status or self._track_bytes or self._opts.group is not None:
            super()._deliver(op)
            return
        self._seen = True
        self.received += 1
        if self._closed:
            return
        if self._out_msgs > 0:
            self._out_msgs -= 1
        buf: deque[Any] = self._buf
        buf.append(as_js(op, self._cls))
        if self._waiter is not None:
            self._wake()

    def _took(self, n: int) -> None:
        self._out_msgs = max(self._out_msgs - n, 0)
        self._wake()

    def _on_msg(self, msg: JsMsg, size: int) -> None:
        if self._closed:
            return
        if self._out_msgs > 0:
            self._out_msgs -= 1
        if size:
            self._out_bytes = max(self._out_bytes - size, 0)
        self._keep(msg, size)

    def _keep(self, msg: JsMsg, size: int) -> None:
        """Buffer ``msg`` (``size``: what it counts against max_bytes, or 0)."""
        if size:
            self._buf_bytes += size
            msg._size = size
        self._buf.append(msg)
        if self._waiter is not None:
            self._wake()

    def _on_status(self, kind: int, status: int, desc: str, msgs: int, nbytes: int) -> None:
        if kind == HEARTBEAT:
            return
        if kind in (ENDED, REFUSED):
            self._out_msgs = max(self._out_msgs - msgs, 0)
            self._out_bytes = max(self._out_bytes - nbytes, 0)
            if kind == REFUSED:
                self._report(JetStreamError(f"pull request refused: {desc}"))
            self._refill()
        elif kind in (LEADER, SHUTDOWN):
            if kind == LEADER:
                # A new leader is in place: no need to wait out a 503 backoff.
                self._cancel_retry()
            self._reset()
        elif kind == PIN_STALE:
            self._consumer._pin_id = None
            self._reset()
        elif kind == NO_LEADER:
            # No consumer leader right now (an election, a restart): try again shortly.
            self._report(self._status_error(status, desc))
            self._out_msgs = self._out_bytes = 0
            self._retry_later()
        else:
            self._finish(self._status_error(status, desc))

    def _reset(self) -> None:
        """Forget every outstanding request and pull afresh, on a fresh inbox.

        Requests made before may still be alive on the server (a missed heartbeat, a
        reconnect): what they deliver on the old inbox is kept, but their statuses (a
        408 when they expire) no longer count against the new requests, which would
        make the buffer pull past its bound.
        """
        self._out_msgs = 0
        self._out_bytes = 0
        if self._started and not self._closed:
            self._retire_inbox()
        self._refill()

    def _retire_inbox(self) -> None:
        nc = self._nc
        old = self._sid
        if nc.delivery(old) is not self:
            return
        late = _RetiredInbox(self, self.subject)
        nc.add_delivery(old, late)
        # The longest an old request lives, and a margin for its last bytes in flight.
        late.timer = self._loop.call_later(self._opts.expires + 5.0, self._drop_retired, old)
        self._retired[old] = late
        self.subject = nc.new_inbox()
        self._sid = nc.new_sid()
        self._subscribe()

    def _drop_retired(self, sid: int, cut: bool = False) -> None:
        """Unsubscribe a retired inbox; with ``cut`` (the stream stops), through a
        ``Leftover`` that gives back what its requests still deliver."""
        late = self._retired.pop(sid, None)
        if late is not None:
            if late.timer is not None:
                late.timer.cancel()
            nc = self._nc
            if nc.delivery(sid) is late:
                if cut:
                    Leftover(self._consumer, nc, late.subject, sid, None, None).cut()
                    return
                nc.remove_delivery(sid)
                nc.send_unsub(sid, None)

    def _late(self, op: MsgOp) -> None:
        """What a request from before the last reset delivers: a message is kept (not
        counted against the new requests); a status ends only that old request."""
        self._seen = True
        if op.status:
            if op.status == 409 and op.hdr and b"deleted" in op.hdr.lower():  # DELETED
                self._deliver(op)  # the consumer is gone: that ends us too
            return
        if self._closed:
            return
        self.received += 1
        self._keep(self._message(op), wire_size(op) if self._track_bytes else 0)

    def _message(self, op: MsgOp) -> Any:
        """What the buffer keeps of a plain message ``op``."""
        return as_js(op, self._cls)

    def _retry_later(self, delay: float = 0.5) -> None:
        if self._retry_timer is None and not self._closed:
            self._retry_timer = self._loop.call_later(delay, self._retry_now)

    def _retry_now(self) -> None:
        self._retry_timer = None
        self._refill()

    def _cancel_retry(self) -> None:
        if self._retry_timer is not None:
            self._retry_timer.cancel()
            self._retry_timer = None

    def _expecting(self) -> bool:
        return self._out_msgs > 0

    def _missed_heartbeat(self) -> None:
        self._report(self._missed_error())
        self._reset()

    def _on_loss(self, exc: BaseException) -> None:
        self._seen = True  # no heartbeat judgement across a reconnect

    def _on_reconnect(self) -> None:
        if not self._closed:
            self._seen = True
            self._reset()

    def _on_leader(self) -> None:
        # A new consumer leader: requests parked on the old one may be lost (it died,
        # or froze): pull again now rather than after missed heartbeats.
        if not self._closed:
            self._cancel_retry()
            self._seen = True
            self._reset()

    def _finish(self, error: BaseException | None) -> None:
        self._cancel_retry()
        c = self._consumer
        c._js._leaders.remove(consumer_key(c.stream_name, c.name), self._on_leader)
        # Stopped or drained (not failed, not closed with the client): what the requests
        # still deliver is given back, not left to ack_wait.
        nc = self._nc
        cut = error is None and self._acks and not self._closed and not nc.is_closed
        for sid in list(self._retired):
            self._drop_retired(sid, cut)
        nc.remove_loss_hook(self._on_loss)
        nc.remove_reconnect_hook(self._on_reconnect)
        if cut and self._out_msgs > 0:
            left = self._leftover(self._out_msgs, None)
            if left is not None:
                left.cut()
        super()._finish(error)
        self._wake()

    def stop(self) -> None:
        """Stop now: unsubscribe; what is buffered is given back at once (a nak, for a
        consumer that needs acks), as is what the pull requests still deliver."""
        buf = list(self._buf) if self._acks else []
        super().stop()  # unsubscribed first: what is given back is not served here again
        for msg in buf:
            give_back(msg)

    # -- the reader side -----------------------------------------------------------------

    def _take(self) -> JsMsg | None:
        buf = self._buf
        if not buf:
            return None
        msg = buf.popleft()
        if self._track_bytes:
            self._buf_bytes -= msg._size
            if not self._closed:
                self._refill()
        elif self._out_msgs + len(buf) <= self._thr_msgs and not self._closed:
            self._refill()
        return msg

    def _take_run(self, n: int) -> list[Any]:
        """The first ``n`` buffered messages at once (there are at least ``n``), and the
        pulls topped up once."""
        run = take_first(self._buf, n)
        if self._track_bytes:
            self._buf_bytes -= sum(m._size for m in run)
        if not self._closed:
            self._refill()
        return run


class _RetiredInbox:
    """The sid-table entry of an inbox a ``MessageStream`` left on a reset."""

    def __init__(self, stream: MessageStream, subject: str) -> None:
        self.stream = stream
        self.subject = subject
        self.queue: str | None = None
        self.max_msgs: int | None = None
        self.received = 0
        self.timer: asyncio.TimerHandle | None = None

    def _deliver(self, op: MsgOp) -> None:
        self.received += 1
        self.stream._late(op)
