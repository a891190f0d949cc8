"""Push consumption: a subscription on a consumer's deliver subject.

Several subscribers may share a push consumer through its ``deliver_group`` (a
queue group). Flow-control requests are answered once the reader has taken the
messages that came before them, so a slow reader slows the server down instead
of growing the buffer; idle heartbeats are watched (two missed ones are reported
as ``NoHeartbeatError``). A heartbeat's stalled-consumer hint (the server still
waits for a flow-control answer) is answered the same way, once the reader has
caught up, unless that answer is already held back for it.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import TYPE_CHECKING, Any

from ._context import ConsumerHandle
from ._pull import HB_TICKS
from ._reader import ErrorCallback, MessageReader, all_plain, js_msgs, take_first
from .errors import ConsumerDeletedError, NoHeartbeatError
from .message import JsMsg, Msg, as_js
from .protocol.headers import parse_headers

if TYPE_CHECKING:
    from .protocol.ops import Msg as MsgOp

__all__ = ["PushStream"]

_STALLED = "Nats-Consumer-Stalled"


class PushStream(MessageReader):
    """Messages of a push consumer, as an async iterator (``Consumer.messages()``)."""

    def __init__(
        self,
        consumer: ConsumerHandle,
        *,
        error_cb: ErrorCallback | None = None,
        msg_type: type[Msg] | None = None,
    ) -> None:
        cfg = consumer.cached_info.config
        js = consumer.js
        self._consumer = consumer
        self._nc = nc = js.client
        self._loop = nc.loop
        self.subject = str(cfg.deliver_subject)
        self.queue: str | None = str(cfg.deliver_group) if cfg.deliver_group else None
        self.max_msgs: int | None = None
        self.received = 0
        self._hb = float(cfg.idle_heartbeat) if cfg.idle_heartbeat else 0.0
        self._sid = nc.new_sid()
        self._buf: deque[JsMsg] = deque()
        self._taken = 0
        self._fc: deque[tuple[int, str]] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._seen = False
        self._misses = 0
        self._timer: asyncio.TimerHandle | None = None
        self._closed = False
        self._draining = False
        self._error: BaseException | None = None
        self._error_cb = error_cb
        self._started = False
        # what the parser makes of our deliveries: a JsMsg, or the class of a reader
        # that makes each delivery its own object (a KeyValue watcher's entries)
        cls: Any = self._nc.msg_class(msg_type or JsMsg)
        self._cls: type[JsMsg] = cls

    def _start(self) -> None:
        if self._started:
            return
        self._started = True
        nc = self._nc
        nc.add_delivery(self._sid, self, self._cls)
        nc.send_sub(self.subject, self._sid, self.queue)
        if self._hb:
            self._timer = self._loop.call_later(self._hb / HB_TICKS, self._tick)

    # -- receive path ---------------------------------------------------------------

    def _deliver_many(self, ops: list[MsgOp], size: int) -> bool:
        """``_deliver`` of a whole feed in one ``extend`` when no op is a status
        (heartbeat, flow control); else False."""
        if not all_plain(ops):
            return False
        self._seen = True
        self.received += len(ops)
        self._buf.extend(js_msgs(ops, self._cls))
        self._wake()
        return True

    def _deliver(self, op: MsgOp) -> None:
        self._seen = True
        if op.status == 0:
            self.received += 1
            self._buf.append(as_js(op, self._cls))
            if self._waiter is not None:
                self._wake()
            return
        _, desc, headers = parse_headers(op.hdr or b"NATS/1.0\r\n\r\n")
        low = desc.lower()
        if op.status == 100:
            if "flowcontrol" in low.replace(" ", "") and op.reply:
                # Answer once the reader has taken everything received before it.
                self._fc.append((self.received, op.reply))
                self._answer_flow_control()
                return
            stalled = headers.get(_STALLED)
            if stalled and all(reply != stalled for _, reply in self._fc):
                # The server waits for this reply (its request or our answer was lost,
                # or it is one we hold back for a slow reader). Answering at once
                # would let the server push another window at every heartbeat however
                # slow the reader is, so it is held back like a request: until the
                # reader has taken everything received so far.
                self._fc.append((self.received, stalled))
                self._answer_flow_control()
        elif op.status == 409 and "consumer deleted" in low:
            c = self._consumer
            self._finish(ConsumerDeletedError(f"push consumer {c.name!r} was deleted"))

    def _answer_flow_control(self) -> None:
        fc = self._fc
        while fc and fc[0][0] <= self._taken:
            self._nc.write_reply(fc.popleft()[1], b"")

    def _tick(self) -> None:
        self._timer = None
        if self._closed:
            return
        if self._seen or not self._nc.is_connected:
            self._seen = False
            self._misses = 0
        else:
            self._misses += 1
            if self._misses >= 2 * HB_TICKS:
                self._misses = 0
                c = self._consumer
                self._report(
                    NoHeartbeatError(
                        f"no heartbeat from push consumer {c.name!r} for {2 * self._hb:g}s"
                    )
                )
        self._timer = self._loop.call_later(self._hb / HB_TICKS, self._tick)

    # -- reader side -------------------------------------------------------------------

    def _take(self) -> JsMsg | None:
        if not self._buf:
            return None
        msg = self._buf.popleft()
        self._taken += 1
        if self._fc:
            self._answer_flow_control()
        return msg

    def _take_run(self, n: int) -> list[JsMsg]:
        """The first ``n`` buffered messages at once (there are at least ``n``)."""
        run: list[JsMsg] = take_first(self._buf, n)
        self._taken += len(run)
        if self._fc:
            self._answer_flow_control()
        return run

    def _finish(self, error: BaseException | None) -> None:
        if self._closed:
            return
        self._closed = True
        if error is not None:
            self._error = error
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        nc = self._nc
        if nc.delivery(self._sid) is not None:
            nc.remove_delivery(self._sid)
            nc.send_unsub(self._sid, None)
        self._wake()

    async def _close(self) -> None:
        self._finish(None)
