"""One-shot pulls: ``Consumer.fetch``, ``next``, ``fetch_no_wait`` and ``ack_next``.

A ``_Fetch`` is a ``_PullBase`` (``_pull.py``) that pulls until its batch is
complete or its ``expires`` passes, asking again within that deadline when a pull is
lost (a 503 while the consumer elects a leader, a reconnect, missed heartbeats).

A pull written while the client was disconnected goes out with the reconnect buffer:
the reconnect does not make it lost. A pull asked again may still be alive all the
same (a reconnect to another node, a new consumer leader): a fetch returns at most its
batch, and what its requests deliver past that, or after it returned, timed out or was
cancelled, is given back with a nak (``_stranded.py``), never left to the consumer's
``ack_wait``.
"""

from __future__ import annotations

import asyncio
from collections import deque

from ._context import ConsumerHandle
from ._leaders import consumer_key
from ._pull import PullOptions, _PullBase
from ._pullstatus import ENDED, HEARTBEAT, LEADER, NO_LEADER, PIN_STALE, SHUTDOWN
from ._retry import Backoff
from ._stranded import LINGER_MARGIN, give_back
from .api import ConsumerInfo
from .errors import (
    ConsumerNotFoundError,
    DisconnectedError,
    JetStreamError,
    NatsError,
    NoHeartbeatError,
    NoRespondersError,
    StreamNotFoundError,
)
from .message import JsMsg

__all__ = ["fetch"]

_ENDED = 0  # a status ended the request, or the batch is complete
_PULL_AGAIN = 1  # a reconnect: the request may be lost; pull again at once
_NO_LEADER = 2  # 503: nobody served the pull (an election, a restart); pull again soon
_GAVE_UP = 3  # the server never closed the request: return what came
#: seconds a fetch refused with a 503 waits for the consumer's info (a missing consumer
#: is said at once; while the consumer elects a leader nobody answers)
LEADER_INFO_WAIT = 1.0


class _Fetch(_PullBase):
    """One fetch: pulls until ``expires``. With ``recover`` (a durable consumer), a pull
    that no server answered (503) is asked again with backoff, and one that a reconnect
    or missed heartbeats say is lost at once, within the same deadline (the missed
    heartbeats go to the client's error callback); without it (the ordered consumer,
    which makes its consumer again instead) those end the fetch with an error."""

    def __init__(
        self,
        consumer: ConsumerHandle,
        opts: PullOptions,
        via: JsMsg | None = None,
        recover: bool = True,
    ) -> None:
        super().__init__(consumer, opts)
        self._done: asyncio.Future[int] = self._loop.create_future()
        self._bytes = 0
        self._via = via
        self._recover = recover
        #: the batch (or max_bytes) is complete: what comes now is for nobody
        self._full = False
        #: pull requests made that may still deliver; the messages they asked for, and
        #: those their statuses said they will no longer deliver (``received``: came)
        self._live = 0
        self._asked = 0
        self._ended = 0
        #: when the last request made ends on the server (loop time), and how long it lives
        self._expiry = 0.0
        self._life = 0.0
        #: the last request waits in the reconnect buffer (made while disconnected)
        self._buffered = False

    def _took(self, n: int) -> None:
        buf = self._buf
        extra = len(buf) - self._opts.batch
        if extra >= 0:
            if extra:
                strays = [buf.pop() for _ in range(extra)]
                for msg in reversed(strays):
                    self._stray(msg)
            self._full = True
            self._end(None)

    def _on_msg(self, msg: JsMsg, size: int) -> None:
        if self._full:
            self._stray(msg)
            return
        self._buf.append(msg)
        self._bytes += size
        o = self._opts
        if len(self._buf) >= o.batch or (o.max_bytes is not None and self._bytes >= o.max_bytes):
            self._full = True
            self._end(None)

    def _stray(self, msg: JsMsg) -> None:
        """A message past the batch: given back."""
        if self._acks:
            give_back(msg)

    def _on_status(self, kind: int, status: int, desc: str, msgs: int, nbytes: int) -> None:
        if kind == HEARTBEAT:
            return
        # Every other status ends one request.
        self._live = max(self._live - 1, 0)
        self._ended += msgs
        if kind in (LEADER, SHUTDOWN):
            # The request is gone with the old leader (or server): a durable fetch pulls
            # again within its expires; the ordered consumer makes its consumer again.
            if self._recover and not self._opts.no_wait:
                self._again(_PULL_AGAIN)
            elif kind == LEADER:
                self._end(None)
            else:
                self._end(self._status_error(status, desc))
        elif kind == ENDED:
            self._end(None)
        elif kind == PIN_STALE:  # our pin id is stale: forget it; the next pull competes again
            self._consumer._pin_id = None
            self._end(None)
        elif kind == NO_LEADER and self._recover and not self._opts.no_wait:
            self._again(_NO_LEADER)
        else:
            self._end(self._status_error(status, desc))

    def _end(self, error: BaseException | None) -> None:
        if not self._done.done():
            if error is not None:
                self._done.set_exception(error)
            else:
                self._done.set_result(_ENDED)

    def _again(self, why: int) -> None:
        if not self._done.done():
            self._done.set_result(why)

    def _on_leader(self) -> None:
        # A new consumer leader: a request parked on the old one may be lost.
        self._again(_PULL_AGAIN)

    def _on_reconnect(self) -> None:
        if self._recover and self._buffered:
            # The request went out with the reconnect buffer, on this connection: it is
            # not lost, and lives from now.
            self._buffered = False
            self._expiry = max(self._expiry, self._loop.time() + self._life)
        elif self._recover:
            self._again(_PULL_AGAIN)
        else:
            c = self._consumer
            self._end(
                DisconnectedError(
                    f"reconnected while pulling from consumer {c.name!r} of stream "
                    f"{c.stream_name!r}: the request may be lost"
                )
            )

    def _expecting(self) -> bool:
        return not self._done.done()

    def _missed_heartbeat(self) -> None:
        # The request is lost (its server died, its consumer moved): pull again, and
        # tell the client's error callback; without ``recover`` the caller decides.
        if self._recover and not self._opts.no_wait:
            self._nc.report_error(self._missed_error())
            self._again(_PULL_AGAIN)
        else:
            self._end(self._missed_error())

    def _send_pull(self, expires: float) -> None:
        o = self._opts
        nc = self._nc
        if self._via is not None:
            batch = o.batch
            self._ack_next(self._via)
            self._via = None
        else:
            batch = o.batch - len(self._buf)
            nbytes = None if o.max_bytes is None else o.max_bytes - self._bytes
            self._pull(batch, nbytes, expires)
        self._live += 1
        self._asked += batch
        self._life = 0.0 if o.no_wait else expires
        self._expiry = max(self._expiry, self._loop.time() + self._life)
        # written at once (``now``), unless it waits in the buffer for a connection
        self._buffered = nc.unsent_bytes > 0

    async def run(self) -> list[JsMsg]:
        o = self._opts
        nc = self._nc
        loop = self._loop
        self._subscribe()
        nc.add_reconnect_hook(self._on_reconnect)
        leaders = self._consumer._js._leaders
        key = ""
        give_up: asyncio.TimerHandle | None = None
        if self._recover and leaders.active:
            key = consumer_key(self._consumer.stream_name, self._consumer.name)
            leaders.add(key, self._on_leader)
        returned = cancelled = False
        try:
            self._send_pull(o.expires)
            self._arm_heartbeat()
            end = loop.time() + nc.connect_timeout + (o.expires if not o.no_wait else 0)
            # one timer for the whole fetch (not one per pull within it)
            give_up = loop.call_at(end + 1.0, self._again, _GAVE_UP)
            backoff = Backoff(end, floor=0.0)
            while True:
                try:
                    why = await self._done
                except (NoHeartbeatError, NoRespondersError, JetStreamError, DisconnectedError):
                    if not self._buf or not isinstance(self._done.exception(), NoHeartbeatError):
                        raise
                    break
                if why in (_ENDED, _GAVE_UP) or self._full:
                    break
                if why == _NO_LEADER:
                    # A new leader announced meanwhile (``_on_leader``) ends the wait.
                    self._done = loop.create_future()
                    await self._wait_for_leader(backoff)
                    if self._done.done():
                        continue
                left = end - nc.connect_timeout - loop.time()
                if left < 0.01 or self._closed:
                    break
                self._done = loop.create_future()
                self._seen = True
                self._send_pull(max(left, 0.01))
            returned = True
            return list(self._buf)
        except asyncio.CancelledError:
            cancelled = True
            raise
        finally:
            if give_up is not None:
                give_up.cancel()
            nc.remove_reconnect_hook(self._on_reconnect)
            if key:
                leaders.remove(key, self._on_leader)
            self._leave(returned, cancelled)
            if self._done.done() and not self._done.cancelled():
                self._done.exception()  # retrieved
            else:
                self._done.cancel()

    def _leave(self, returned: bool, cancelled: bool) -> None:
        """End: unsubscribe, unless the requests made may still deliver (a consumer that
        needs acks): then the inbox lingers until they have, or, for a cancelled fetch or
        a request still in the reconnect buffer (the UNSUB follows it there), is cut
        (``_stranded.Leftover``). What was received and not returned (cancelled, or an
        error raised) is given back."""
        owed = self._asked - self.received - self._ended
        left = self._leftover(owed, self._live)
        if left is not None:
            if cancelled or self._buffered:
                left.cut()
            else:
                left.linger(self._expiry + LINGER_MARGIN)
        if not returned and self._acks:
            buf, self._buf = self._buf, deque()
            for msg in buf:
                give_back(msg)

    async def _wait_for_leader(self, backoff: Backoff) -> None:
        """After a 503: a consumer that does not exist ends the fetch with
        ``ConsumerNotFoundError``; else wait a backoff before the next pull, or until
        the consumer's new leader is announced (``_done`` completes). The consumer's info
        is asked after each 503 but waited for ``LEADER_INFO_WAIT`` at most: nobody
        answers it while the consumer elects a leader."""
        c = self._consumer
        left = backoff.left()
        if left > 0.05:
            try:
                await c._js._api(
                    f"CONSUMER.INFO.{c.stream_name}.{c.name}",
                    None,
                    ConsumerInfo,
                    timeout=min(left, c._js.timeout, LEADER_INFO_WAIT),
                )
            except (ConsumerNotFoundError, StreamNotFoundError):
                raise
            except NatsError:
                pass  # no leader yet, a timeout, a lost connection: try again
        delay = backoff.next_pause() or 0.0
        if not self._done.done() and delay > 0:
            await asyncio.wait([self._done], timeout=delay)


async def fetch(
    consumer: ConsumerHandle, opts: PullOptions, via: JsMsg | None = None, recover: bool = True
) -> list[JsMsg]:
    """One pull request: up to ``opts.batch`` messages (see ``Consumer.fetch``); with
    ``via``, the request rides on that message's ``+NXT`` acknowledgement; ``recover``
    as in ``_Fetch``."""
    return await _Fetch(consumer, opts, via, recover).run()
