"""Message schedules (ADR-51): a message the stream holds and publishes into a target
subject when it is due, once (``at``), on an interval (``every``) or on a cron schedule.

A stream with ``allow_msg_schedules`` stores a message whose ``Nats-Schedule`` header
holds the schedule and whose ``Nats-Schedule-Target`` names a subject of the same stream;
when it is due the server stores a copy of the body and of the other headers on the
target, adding ``Nats-Scheduler`` (the schedule's subject) and ``Nats-Schedule-Next``
(the next time, or ``purge`` for an ``@at`` schedule, which is then removed). Each
schedule has a subject of its own: a new one on the same subject replaces it (the server
adds ``Nats-Rollup: sub``). A schedule is cancelled by removing its message: purge its
subject.

``js.schedule(...)`` checks what the server would refuse before sending, against the
stream's config too, and raises ``InvalidScheduleError`` naming the argument at fault;
what the server refuses still raises ``ScheduleRefusedError``. ``Schedule`` is the same
schedule as a value, whose ``headers()`` a plain ``js.publish`` can send.
"""

from __future__ import annotations

import datetime as _dt
from functools import cache
from typing import TYPE_CHECKING

import msgspec

from ._schedspec import cron_problem, format_at, go_duration, parse_at, parse_go_duration
from .errors import BadSubjectError, InvalidScheduleError, StreamNotFoundError
from .protocol.headers import (
    NATS_LAST_SEQUENCE,
    NATS_NUM_PENDING,
    NATS_SEQUENCE,
    NATS_STREAM,
    NATS_SUBJECT,
    NATS_TIME_STAMP,
    Headers,
    HeadersLike,
)
from .protocol.subjects import subject_matches, validate_subject

if TYPE_CHECKING:
    from .api import PubAck, StreamConfig
    from .stream import Stream, StreamMsg

__all__ = [
    "NATS_SCHEDULE",
    "NATS_SCHEDULER",
    "NATS_SCHEDULE_NEXT",
    "NATS_SCHEDULE_ROLLUP",
    "NATS_SCHEDULE_SOURCE",
    "NATS_SCHEDULE_TARGET",
    "NATS_SCHEDULE_TIME_ZONE",
    "NATS_SCHEDULE_TTL",
    "Schedule",
    "ScheduledMessage",
    "Schedules",
]

NATS_SCHEDULE = "Nats-Schedule"
NATS_SCHEDULE_TARGET = "Nats-Schedule-Target"
NATS_SCHEDULE_SOURCE = "Nats-Schedule-Source"
NATS_SCHEDULE_TTL = "Nats-Schedule-TTL"
NATS_SCHEDULE_TIME_ZONE = "Nats-Schedule-Time-Zone"
NATS_SCHEDULE_ROLLUP = "Nats-Schedule-Rollup"
#: set by the server on the messages a schedule produces
NATS_SCHEDULER = "Nats-Scheduler"
NATS_SCHEDULE_NEXT = "Nats-Schedule-Next"


def _seconds(field: str, value: float | _dt.timedelta) -> float:
    if isinstance(value, _dt.timedelta):
        return value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidScheduleError(field, f"a timedelta or seconds, not {value!r}")
    return float(value)


def _literal(field: str, subject: str) -> None:
    if not isinstance(subject, str):
        raise InvalidScheduleError(field, f"a subject, not {subject!r}")
    try:
        validate_subject(subject)
    except BadSubjectError as exc:
        raise InvalidScheduleError(field, f"{exc} (a literal subject, no wildcards)") from None


@cache
def _known_zones() -> frozenset[str]:
    import zoneinfo

    return frozenset(zoneinfo.available_timezones())


def _zone_problem(name: str) -> str | None:
    if not isinstance(name, str) or not name.strip():
        return "empty; leave it out for UTC"
    if name[0] in "+-" or name[:4] in ("UTC+", "UTC-", "GMT+", "GMT-") or name[0].isdigit():
        return f"{name!r} is a fixed offset; give an IANA name such as 'Europe/Amsterdam'"
    if name in ("UTC", "Local"):
        return None
    if not name.isprintable() or " " in name:
        return f"{name!r} is not a time zone name"
    import zoneinfo  # (the first schedule with a time zone: not every JetStream needs it)

    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        # the server reads its own tzdata; the check needs this host to have one
        if _known_zones():
            return f"{name!r} is not a time zone of the IANA database"
    return None


class Schedule(msgspec.Struct, frozen=True, kw_only=True):
    """One schedule: exactly one of ``at``, ``every`` and ``cron``, and its ``target``.

    Checked when made (``InvalidScheduleError`` names the field at fault):

    * ``at``: a timezone-aware datetime; once. A time in the past is published at once
      (the ADR's rule; a server that was down publishes what fell due meanwhile).
    * ``every``: a ``timedelta`` or seconds, at least 1 s.
    * ``cron``: six fields (seconds minutes hours day-of-month month day-of-week) or
      ``@hourly``, ``@daily``... (see ``jetstream._schedspec``).
    * ``target``: the literal subject it publishes to, a subject of the same stream.
    * ``ttl``: the ``Nats-TTL`` of what it publishes (seconds, at least 1, or
      ``"never"``; the stream needs ``allow_msg_ttl``).
    * ``time_zone``: of a ``cron`` schedule only: an IANA name (``Europe/Amsterdam``),
      ``UTC`` or ``Local``; default UTC.
    * ``source``: publish the last message of this subject instead (sampling; the
      schedule's own body when the subject has none).
    * ``rollup``: what it publishes rolls up the target subject (``Nats-Rollup: sub``;
      server 2.14+).
    """

    target: str
    at: _dt.datetime | None = None
    every: _dt.timedelta | float | None = None
    cron: str | None = None
    ttl: float | _dt.timedelta | str | None = None
    time_zone: str | None = None
    source: str | None = None
    rollup: bool = False

    def __post_init__(self) -> None:
        given = [n for n in ("at", "every", "cron") if getattr(self, n) is not None]
        if len(given) != 1:
            field = given[-1] if given else "at"
            raise InvalidScheduleError(
                field, f"give exactly one of at, every and cron (got {given or 'none'})"
            )
        _literal("target", self.target)
        if self.at is not None:
            if not isinstance(self.at, _dt.datetime):
                raise InvalidScheduleError("at", f"a datetime, not {self.at!r}")
            try:
                format_at(self.at)
            except ValueError as exc:
                raise InvalidScheduleError("at", str(exc)) from None
        if self.every is not None and _seconds("every", self.every) < 1:
            raise InvalidScheduleError("every", f"at least 1 second, not {self.every!r}")
        if self.cron is not None:
            if not isinstance(self.cron, str) or self.cron.startswith(("@at", "@every")):
                raise InvalidScheduleError(
                    "cron", f"a cron expression, not {self.cron!r} (use at= or every=)"
                )
            problem = cron_problem(self.cron)
            if problem is not None:
                raise InvalidScheduleError("cron", problem)
        ttl = self.ttl
        if (
            ttl is not None
            and ttl != "never"
            and (isinstance(ttl, str) or _seconds("ttl", ttl) < 1)
        ):
            raise InvalidScheduleError("ttl", f"at least 1 second or 'never', not {self.ttl!r}")
        if self.time_zone is not None:
            if self.cron is None:
                raise InvalidScheduleError(
                    "time_zone", "only a cron schedule takes a time zone (at and every are UTC)"
                )
            problem = _zone_problem(self.time_zone)
            if problem is not None:
                raise InvalidScheduleError("time_zone", problem)
        if self.source is not None:
            _literal("source", self.source)
            if self.source == self.target:
                raise InvalidScheduleError("source", "the source cannot be the target")

    @property
    def pattern(self) -> str:
        """The ``Nats-Schedule`` value: ``@at <RFC 3339>``, ``@every <duration>`` or the cron."""
        if self.at is not None:
            return "@at " + format_at(self.at)
        if self.every is not None:
            return "@every " + go_duration(_seconds("every", self.every))
        assert self.cron is not None
        return self.cron

    def headers(self) -> dict[str, str]:
        """The schedule's headers, in the ADR's order (``Nats-Schedule``, ``-Target``,
        ``-Source``, ``-TTL``, ``-Time-Zone``, ``-Rollup``)."""
        h = {NATS_SCHEDULE: self.pattern, NATS_SCHEDULE_TARGET: self.target}
        if self.source is not None:
            h[NATS_SCHEDULE_SOURCE] = self.source
        if self.ttl is not None:
            ttl = self.ttl
            h[NATS_SCHEDULE_TTL] = (
                ttl if isinstance(ttl, str) else go_duration(_seconds("ttl", ttl))
            )
        if self.time_zone is not None:
            h[NATS_SCHEDULE_TIME_ZONE] = self.time_zone
        if self.rollup:
            h[NATS_SCHEDULE_ROLLUP] = "sub"
        return h

    def check(self, subject: str, config: StreamConfig) -> None:
        """What the stream of ``config`` would refuse of this schedule on ``subject``.

        Raises:
            InvalidScheduleError: ``field`` ``stream`` (no ``allow_msg_schedules``),
                ``subject`` (the target's or source's own, or not the stream's),
                ``target``/``source`` (not a subject of the stream), ``ttl`` (no
                ``allow_msg_ttl``).
        """
        name = config.name
        if not config.allow_msg_schedules:
            raise InvalidScheduleError(
                "stream", f"stream {name!r} does not allow schedules (allow_msg_schedules)"
            )
        if subject in (self.target, self.source):
            what = "target" if subject == self.target else "source"
            raise InvalidScheduleError("subject", f"{subject!r} is the schedule's {what} too")
        subjects = config.subjects or []
        for field, value in (
            ("subject", subject),
            ("target", self.target),
            ("source", self.source),
        ):
            if value is not None and not any(subject_matches(p, value) for p in subjects):
                raise InvalidScheduleError(
                    field, f"stream {name!r} does not store {value!r} (its subjects: {subjects})"
                )
        if self.ttl is not None and not config.allow_msg_ttl:
            raise InvalidScheduleError(
                "ttl", f"stream {name!r} does not allow message TTLs (allow_msg_ttl)"
            )


_DIRECT_GET_HEADERS = (
    NATS_STREAM,
    NATS_SUBJECT,
    NATS_SEQUENCE,
    NATS_TIME_STAMP,
    NATS_NUM_PENDING,
    NATS_LAST_SEQUENCE,
)


class ScheduledMessage(msgspec.Struct, frozen=True, kw_only=True):
    """A pending schedule, as the stream holds it (``js.list_schedules``).

    ``schedule`` is the raw ``Nats-Schedule`` value; ``at``, ``every`` (seconds) and
    ``cron`` the one it is, read from it. ``headers`` are the stored message's headers
    (the schedule's, the server's ``Nats-Rollup: sub`` and those given with it).
    """

    subject: str
    seq: int
    time: _dt.datetime
    schedule: str
    target: str
    at: _dt.datetime | None = None
    every: float | None = None
    cron: str | None = None
    source: str | None = None
    ttl: str | None = None
    time_zone: str | None = None
    data: bytes = b""
    headers: Headers = msgspec.field(default_factory=Headers)

    @classmethod
    def from_msg(cls, msg: StreamMsg) -> ScheduledMessage | None:
        """The schedule ``msg`` holds, or None when it has no ``Nats-Schedule``."""
        pattern = msg.headers.get(NATS_SCHEDULE)
        if not pattern:
            return None
        h = Headers(msg.headers)
        for key in _DIRECT_GET_HEADERS:  # what a direct get adds: not the message's own
            h.pop(key, None)
        at = every = cron = None
        if pattern.startswith("@at "):
            at = parse_at(pattern[4:])
        elif pattern.startswith("@every "):
            every = parse_go_duration(pattern[7:])
        else:
            cron = pattern
        return cls(
            subject=msg.subject,
            seq=msg.seq,
            time=msg.time,
            schedule=pattern,
            target=h.get(NATS_SCHEDULE_TARGET, ""),
            at=at,
            every=every,
            cron=cron,
            source=h.get(NATS_SCHEDULE_SOURCE),
            ttl=h.get(NATS_SCHEDULE_TTL),
            time_zone=h.get(NATS_SCHEDULE_TIME_ZONE),
            data=msg.data,
            headers=h,
        )


class Schedules:
    """Mixed into ``JetStream``: ``schedule``, ``list_schedules``, ``cancel_schedule``."""

    if TYPE_CHECKING:

        async def publish(
            self,
            subject: str,
            data: bytes | bytearray | memoryview = b"",
            *,
            headers: HeadersLike | None = None,
            msg_id: str | None = None,
            timeout: float | None = None,
        ) -> PubAck: ...

        async def stream(self, name: str, *, timeout: float | None = None) -> Stream: ...

        async def find_stream(self, subject: str) -> str: ...

    async def _stream_of(self, subject: str, stream: str | None) -> Stream:
        if stream is None:
            try:
                stream = await self.find_stream(subject)
            except StreamNotFoundError:
                raise InvalidScheduleError("subject", f"no stream stores {subject!r}") from None
        return await self.stream(stream)

    async def schedule(
        self,
        subject: str,
        payload: bytes | bytearray | memoryview = b"",
        *,
        target: str | None = None,
        at: _dt.datetime | None = None,
        every: _dt.timedelta | float | None = None,
        cron: str | None = None,
        ttl: float | _dt.timedelta | str | None = None,
        time_zone: str | None = None,
        source: str | None = None,
        rollup: bool = False,
        schedule: Schedule | None = None,
        headers: HeadersLike | None = None,
        stream: str | None = None,
        msg_id: str | None = None,
        timeout: float | None = None,
    ) -> PubAck:
        """Store a schedule on ``subject`` (its own subject: a schedule already there is
        replaced) that publishes ``payload`` and ``headers`` into ``target`` when due.

        Give the schedule as keywords (see ``Schedule`` for each) or as ``schedule=``.
        Before sending, the schedule is checked, and so is the stream that stores
        ``subject`` (``stream`` names it, saving one lookup): that it allows schedules,
        stores the target (and source), and allows TTLs when ``ttl`` is given.

        Returns:
            The ``PubAck`` of the schedule's message.

        Raises:
            InvalidScheduleError: what the server would refuse, found before sending;
                ``field`` names the argument (``at``, ``every``, ``cron``, ``target``,
                ``source``, ``ttl``, ``time_zone``, ``subject``, ``stream``, ``headers``).
            ScheduleRefusedError: the server refused it (``field`` says what).
        """
        if schedule is None:
            if target is None:
                raise InvalidScheduleError("target", "the subject to publish into is required")
            schedule = Schedule(
                target=target,
                at=at,
                every=every,
                cron=cron,
                ttl=ttl,
                time_zone=time_zone,
                source=source,
                rollup=rollup,
            )
        elif any(v is not None for v in (target, at, every, cron, ttl, time_zone, source)):
            raise InvalidScheduleError("schedule", "give schedule= or the keywords, not both")
        _literal("subject", subject)
        h: HeadersLike = schedule.headers()
        if headers:
            extra = Headers(headers)
            clash = [k for k in extra if k.lower().startswith("nats-schedule")]
            if clash:
                raise InvalidScheduleError("headers", f"{clash}: give the schedule as arguments")
            both = Headers(h)
            for key in extra:
                for value in extra.get_all(key):
                    both.add(key, value)
            h = both
        s = await self._stream_of(subject, stream)
        schedule.check(subject, s.cached_info.config)
        return await self.publish(subject, payload, headers=h, msg_id=msg_id, timeout=timeout)

    async def list_schedules(
        self, stream: str, subject: str = ">", *, timeout: float | None = None
    ) -> list[ScheduledMessage]:
        """The pending schedules of ``stream`` on subjects matching ``subject`` (a
        filter, e.g. ``"schedules.>"``), in stream order: the last message of each
        matching subject that holds a ``Nats-Schedule``. One batched direct get a
        page when the stream has ``allow_direct``; else one get per subject.
        """
        from ._lastmsgs import LastMsgs

        s = await self.stream(stream, timeout=timeout)
        reader = LastMsgs(s, [subject], timeout)
        out: list[ScheduledMessage] = []
        while page := await reader.page():
            out.extend(m for m in map(ScheduledMessage.from_msg, page) if m is not None)
        out.sort(key=lambda m: m.seq)
        return out

    async def cancel_schedule(self, subject: str, *, stream: str | None = None) -> int:
        """Cancel the schedule on ``subject`` by purging the subject; returns how many
        messages were purged (0: there was none). A filter (``schedules.orders.>``)
        cancels every schedule under it, and purges anything else stored there too.

        Raises:
            InvalidScheduleError: no stream stores ``subject`` (``field`` ``subject``).
        """
        s = await self._stream_of(subject, stream)
        return await s.purge(filter=subject)
