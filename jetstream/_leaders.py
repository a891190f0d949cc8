"""Leader elections, heard as they happen, for the consumers that read through them.

When a consumer's leader dies (kill -9, a frozen VM), the pull requests parked on
it die too, silently: nothing tells the client but missing heartbeats, seconds
later. The server announces every election on
``$JS.EVENT.ADVISORY.CONSUMER.LEADER_ELECTED.<stream>.<consumer>`` and
``$JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED.<stream>``, so a reader that is waiting
on a consumer registers here and is called back on the election of its consumer
(a durable pull pulls again at once) or of its stream (an ordered consumer, whose
one-replica consumer lived with the old stream leader, is made again).

A publish that found no responders waits the same way (``SubjectStreams``): it asks
once which stream stores its subject, gives up at once when none does, and otherwise
retries as soon as that stream's new leader is announced.

One subscription per JetStream context, made on the first registration and only
when the server is part of a cluster (a single server holds no elections). A
callback runs on the read path: it must not raise or block.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from .errors import NoStreamError

if TYPE_CHECKING:
    from .core.client import Client
    from .protocol.ops import Msg as MsgOp

__all__ = ["ANY_STREAM", "NO_STREAM", "LeaderWatch", "SubjectStreams", "no_stream_error"]

_PREFIX = "$JS.EVENT.ADVISORY."
_CONSUMER = "CONSUMER.LEADER_ELECTED."
_STREAM = "STREAM.LEADER_ELECTED."


def consumer_key(stream: str, consumer: str) -> str:
    return f"{_CONSUMER}{stream}.{consumer}"


def stream_key(stream: str) -> str:
    return f"{_STREAM}{stream}"


#: the key of every stream's elections ('*' is no stream name)
ANY_STREAM = stream_key("*")


class LeaderWatch:
    """Callbacks by election subject (without the advisory prefix)."""

    def __init__(self, nc: Client) -> None:
        self._nc = nc
        self._sid = 0
        self._listeners: dict[str, list[Callable[[], None]]] = {}
        # Delivery protocol: what the client needs to re-make the subscription.
        self.subject = _PREFIX + "*.LEADER_ELECTED.>"
        self.queue: str | None = None
        self.max_msgs: int | None = None
        self.received = 0

    @property
    def active(self) -> bool:
        """True when connected to a cluster (where elections happen)."""
        info = self._nc.server_info
        return info is not None and bool(info.cluster)

    def add(self, key: str, cb: Callable[[], None]) -> None:
        """Call ``cb`` on each election of ``key`` (``consumer_key``, ``stream_key`` or
        ``ANY_STREAM``)."""
        self._listeners.setdefault(key, []).append(cb)
        if not self._sid:
            self._subscribe()

    def remove(self, key: str, cb: Callable[[], None]) -> None:
        cbs = self._listeners.get(key)
        if cbs is not None and cb in cbs:
            cbs.remove(cb)
            if not cbs:
                del self._listeners[key]

    def _subscribe(self) -> None:
        nc = self._nc
        info = nc.server_info
        if info is None or not info.cluster or nc.is_closed:
            return
        self._sid = nc.new_sid()
        nc.add_delivery(self._sid, self)
        nc.send_sub(self.subject, self._sid, None)

    def _deliver(self, op: MsgOp) -> None:
        self.received += 1
        key = op.subject[len(_PREFIX) :]
        cbs = self._listeners.get(key)
        if cbs:
            for cb in list(cbs):
                cb()
        if key.startswith(_STREAM):
            cbs = self._listeners.get(ANY_STREAM)
            if cbs:
                for cb in list(cbs):
                    cb()

    async def _close(self) -> None:
        """Called by the client on close."""
        self._listeners.clear()


# -- publishing through an election ---------------------------------------------------

#: ``SubjectStreams.stream_of``'s answer when no stream stores the subject
NO_STREAM = ""
#: seconds an answer of the API about a subject is kept
CACHE_TTL = 2.0
#: seconds the API gets to answer (a meta leader being elected may not answer at all)
LOOKUP_TIMEOUT = 2.0
_CACHE_MAX = 1024


def no_stream_error(subject: str, attempts: int) -> NoStreamError:
    """What ``publish`` and ``publish_async`` raise when no stream stores ``subject``."""
    exc = NoStreamError(
        f"no stream stores subject {subject!r}: the publish found no responders and no"
        f" stream's subjects match it (list the streams with `jetstream stream ls`, or"
        f" find the one for a subject with `await js.find_stream(subject)`)"
    )
    exc.subject = subject
    exc.attempts = attempts
    return exc


class SubjectStreams:
    """Which stream stores a subject, asked after a publish found no responders, and the
    waits of such publishes, cut short when that stream's new leader is announced.

    A 503 to a publish means that nothing subscribes to its subject: either the stream
    that stores it has no leader now (an election, a restart: worth waiting for), or no
    stream stores it (a typo: waiting is in vain). ``stream_of`` tells them apart with
    ``STREAM.NAMES`` filtered by the subject, asked at most once at a time for the whole
    context and kept ``CACHE_TTL`` seconds (the context forgets it all when it makes,
    changes or deletes a stream); an API that does not answer (a meta leader being
    elected) leaves the subject unknown, and the publish retries as before. Nothing of
    this runs before a publish got a 503: the hot path does not know of it.

    Listeners (``listen``) are called with True when the leader of the stream that stores
    their subject is elected (publish now; while that stream is not known, as when the
    meta leader died with the stream's leader, on the election of any stream) and with
    False when the API said that no stream stores it (give up now). They run on the
    read path: they must not raise.
    """

    def __init__(
        self,
        nc: Client,
        watch: LeaderWatch,
        ask: Callable[[str], Awaitable[str | None]],
        ttl: float = CACHE_TTL,
    ) -> None:
        self._nc = nc
        self._watch = watch
        self._ask = ask
        self._ttl = ttl
        #: subject -> (when asked, the stream that stores it or NO_STREAM)
        self._known: dict[str, tuple[float, str]] = {}
        self._asking: str | None = None
        self._listeners: dict[str, list[Callable[[bool], None]]] = {}
        self._linked: dict[str, str] = {}  # subject -> the stream whose elections it hears
        self._subjects: dict[str, set[str]] = {}  # stream -> its subjects with listeners
        self._relays: dict[str, Callable[[], None]] = {}  # stream -> its LeaderWatch callback
        self._unlinked: set[str] = set()  # subjects with listeners, of a stream not known
        #: questions asked of the API; listeners called on an election
        self.lookups = 0
        self.woken = 0

    def stream_of(self, subject: str) -> str | None:
        """The stream that stores ``subject`` as heard lately (``NO_STREAM``: none does),
        or None when that is not known now; then the API is asked, unless another
        question is out (the next 503 of the subject asks again)."""
        hit = self._known.get(subject)
        if hit is not None and self._nc.loop.time() - hit[0] < self._ttl:
            return hit[1]
        if self._asking is None and not self._nc.is_closed:
            self._asking = subject
            self.lookups += 1
            self._nc.spawn(self._lookup(subject))
        return None

    def forget(self) -> None:
        """Drop every answer (a stream was made, changed or deleted)."""
        self._known.clear()

    async def _lookup(self, subject: str) -> None:
        try:
            answer = await self._ask(subject)
        finally:
            self._asking = None
        if answer is None:
            return
        known = self._known
        if len(known) >= _CACHE_MAX:
            now = self._nc.loop.time()
            for key in [k for k, (t, _) in known.items() if now - t >= self._ttl]:
                del known[key]
            if len(known) >= _CACHE_MAX:
                known.clear()
        known[subject] = (self._nc.loop.time(), answer)
        if answer == NO_STREAM:
            for cb in list(self._listeners.get(subject, ())):
                cb(False)
        elif subject in self._listeners:
            self._link(subject, answer)

    # -- listeners ------------------------------------------------------------------

    def listen(self, subject: str, cb: Callable[[bool], None]) -> None:
        """Call ``cb(True)`` on each election of the leader of the stream that stores
        ``subject`` (of any stream while that one is not known), ``cb(False)`` if no
        stream stores it."""
        cbs = self._listeners.get(subject)
        if cbs is not None:
            cbs.append(cb)
            return
        self._listeners[subject] = [cb]
        hit = self._known.get(subject)
        if hit is not None and hit[1] != NO_STREAM:
            self._link(subject, hit[1])
        else:
            if not self._unlinked:
                self._watch.add(ANY_STREAM, self._elected_any)
            self._unlinked.add(subject)

    def unlisten(self, subject: str, cb: Callable[[bool], None]) -> None:
        cbs = self._listeners.get(subject)
        if cbs is None:
            return
        if cb in cbs:
            cbs.remove(cb)
        if not cbs:
            del self._listeners[subject]
            self._unlink(subject)

    def _link(self, subject: str, stream: str) -> None:
        old = self._linked.get(subject)
        if old == stream:
            return
        self._unlink(subject)
        self._linked[subject] = stream
        subjects = self._subjects.get(stream)
        if subjects is None:
            subjects = self._subjects[stream] = set()

            def relay() -> None:
                self._elected(stream)

            self._relays[stream] = relay
            self._watch.add(stream_key(stream), relay)
        subjects.add(subject)

    def _unlink(self, subject: str) -> None:
        if subject in self._unlinked:
            self._unlinked.discard(subject)
            if not self._unlinked:
                self._watch.remove(ANY_STREAM, self._elected_any)
        stream = self._linked.pop(subject, None)
        if stream is None:
            return
        subjects = self._subjects[stream]
        subjects.discard(subject)
        if not subjects:
            del self._subjects[stream]
            self._watch.remove(stream_key(stream), self._relays.pop(stream))

    def _elected(self, stream: str) -> None:
        self._wake(self._subjects.get(stream, ()))

    def _elected_any(self) -> None:
        self._wake(self._unlinked)

    def _wake(self, subjects: set[str] | tuple[()]) -> None:
        for subject in list(subjects):
            for cb in list(self._listeners.get(subject, ())):
                self.woken += 1
                cb(True)

    async def pause(self, subject: str, delay: float) -> bool | None:
        """Wait ``delay`` seconds, or less: True when the leader of the stream that stores
        ``subject`` was just elected, False when no stream stores it, None when the whole
        delay passed."""
        loop = self._nc.loop
        woken: asyncio.Future[bool | None] = loop.create_future()

        def wake(elected: bool | None) -> None:
            if not woken.done():
                woken.set_result(elected)

        timer = loop.call_later(delay, wake, None)
        self.listen(subject, wake)
        try:
            return await woken
        finally:
            timer.cancel()
            self.unlisten(subject, wake)
