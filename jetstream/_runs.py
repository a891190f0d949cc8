"""Pull consumption in runs, for bulk readers (a Spark source's).

A ``RunStream`` is a ``MessageStream`` whose buffer holds runs of messages
(``protocol.ops.MsgRun``) rather than a ``JsMsg`` each: what a bulk parser took from
a feed in one piece (``Client.use_bulk_parse``), or, where none did, the parser's ops
of a feed (``OpsRun``). Its reader takes a number of messages at once
(``_take_run(n)``), the last run split where the number ends; nothing is made per
message. Pull accounting, heartbeats, statuses and resets are the ``MessageStream``'s.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any

from ._context import ConsumerHandle
from ._pull import MessageStream, PullOptions
from ._reader import ErrorCallback, all_plain
from .protocol.ops import MsgRun, OpsRun

if TYPE_CHECKING:
    from .protocol.ops import Msg as MsgOp

__all__ = ["RunStream"]


class RunStream(MessageStream):
    """A continuous pull whose buffer holds runs of messages; ``pending`` counts the
    messages in them."""

    def __init__(
        self, consumer: ConsumerHandle, opts: PullOptions, error_cb: ErrorCallback | None
    ) -> None:
        if opts.max_bytes is not None or opts.group is not None:
            raise ValueError("a run stream takes neither max_bytes nor a group")
        super().__init__(consumer, opts, error_cb)
        self._runs: deque[MsgRun] = self._buf  # type: ignore[assignment]
        self._count = 0

    @property
    def pending(self) -> int:
        """Messages buffered and not yet taken by the reader."""
        return self._count

    # -- receive path ----------------------------------------------------------------

    def _deliver(self, op: MsgOp) -> None:
        if op.status:
            super()._deliver(op)  # statuses as for any pull
        else:
            self._keep(OpsRun([op]), 0)

    def _deliver_many(self, ops: list[MsgOp], size: int) -> bool:
        if self._closed or not all_plain(ops):
            return False
        self._keep(OpsRun(ops), 0)
        return True

    def _deliver_run(self, run: MsgRun) -> None:
        """A bulk parser's run (the connection's ``_deliver_run``)."""
        self._keep(run, 0)

    def _message(self, op: MsgOp) -> Any:
        return OpsRun([op])

    def _keep(self, msg: Any, size: int) -> None:
        run: MsgRun = msg
        n = len(run)
        self._seen = True
        self.received += n
        if self._closed:
            return
        self._out_msgs = max(self._out_msgs - n, 0)
        self._runs.append(run)
        self._count += n
        if self._waiter is not None:
            self._wake()

    # -- the reader side -----------------------------------------------------------------

    def _take(self) -> Any:
        raise TypeError("a run stream is read a run at a time (_take_run)")

    def _take_run(self, n: int) -> list[Any]:
        """The first ``n`` buffered messages (there are at least ``n``), as runs; the
        pulls topped up once."""
        runs = self._runs
        out: list[MsgRun] = []
        left = n
        while left:
            run = runs[0]
            k = len(run)
            if k <= left:
                out.append(runs.popleft())
                left -= k
            else:
                head, runs[0] = run.split(left)
                out.append(head)
                left = 0
        self._count -= n
        if not self._closed:
            self._refill()
        return out

    def first_reply(self) -> str | None:
        """The reply subject of the first message buffered (there is one)."""
        return self._runs[0].reply(0)

    def last_reply(self) -> str | None:
        """The reply subject of the last message buffered (there is one)."""
        return self._runs[-1].reply(-1)

    def stop(self) -> None:
        self._count = 0
        super().stop()
