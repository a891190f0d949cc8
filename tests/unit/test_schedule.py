"""Schedules without a server: the header values as ADR-51 writes them, and what the
client refuses before sending (``InvalidScheduleError`` naming the field). Whether the
server agrees is checked against a real one in tests/integration/test_schedules.py."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jetstream import InvalidScheduleError, Schedule, StreamConfig
from jetstream._schedspec import (
    cron_problem,
    format_at,
    go_duration,
    parse_at,
    parse_go_duration,
)
from jetstream.protocol.headers import encode_headers
from jetstream.schedule import ScheduledMessage
from jetstream.stream import StreamMsg

UTC = dt.UTC
ADR_AT = dt.datetime(2009, 11, 10, 23, 0, tzinfo=UTC)


def test_the_adrs_single_message_example() -> None:
    # nats pub 'schedules.orders.single' -H "Nats-Schedule: @at 2009-11-10T23:00:00Z"
    #   -H "Nats-Schedule-TTL: 5m" -H "Nats-Schedule-Target: orders"
    s = Schedule(at=ADR_AT, ttl=300, target="orders")
    assert encode_headers(s.headers()) == (
        b"NATS/1.0\r\n"
        b"Nats-Schedule: @at 2009-11-10T23:00:00Z\r\n"
        b"Nats-Schedule-Target: orders\r\n"
        b"Nats-Schedule-TTL: 5m\r\n"
        b"\r\n"
    )


def test_the_adrs_cron_and_sampling_examples() -> None:
    assert Schedule(cron="@hourly", ttl=dt.timedelta(minutes=5), target="orders").headers() == {
        "Nats-Schedule": "@hourly",
        "Nats-Schedule-Target": "orders",
        "Nats-Schedule-TTL": "5m",
    }
    sampled = Schedule(
        every=dt.timedelta(minutes=5),
        source="sensors.cnc.temperature",
        target="sensors.sampled.cnc.temperature",
    )
    assert sampled.headers() == {
        "Nats-Schedule": "@every 5m",
        "Nats-Schedule-Target": "sensors.sampled.cnc.temperature",
        "Nats-Schedule-Source": "sensors.cnc.temperature",
    }


def test_every_header_in_the_adrs_order() -> None:
    s = Schedule(
        cron="0 30 4 1,15 * fri",
        target="t",
        source="s",
        ttl="never",
        time_zone="Europe/Amsterdam",
        rollup=True,
    )
    assert list(s.headers().items()) == [
        ("Nats-Schedule", "0 30 4 1,15 * fri"),
        ("Nats-Schedule-Target", "t"),
        ("Nats-Schedule-Source", "s"),
        ("Nats-Schedule-TTL", "never"),
        ("Nats-Schedule-Time-Zone", "Europe/Amsterdam"),
        ("Nats-Schedule-Rollup", "sub"),
    ]


@pytest.mark.parametrize(
    ("when", "text"),
    [
        (ADR_AT, "2009-11-10T23:00:00Z"),
        (dt.datetime(2030, 1, 2, 3, 4, 5, 250000, tzinfo=UTC), "2030-01-02T03:04:05.25Z"),
        (dt.datetime(2030, 1, 2, 3, 4, 5, 1, tzinfo=UTC), "2030-01-02T03:04:05.000001Z"),
        # another zone: the same instant, written in UTC
        (
            dt.datetime(2030, 6, 1, 12, 0, tzinfo=dt.timezone(dt.timedelta(hours=2))),
            "2030-06-01T10:00:00Z",
        ),
    ],
)
def test_at_is_rfc3339_in_utc(when: dt.datetime, text: str) -> None:
    assert format_at(when) == text
    assert Schedule(at=when, target="t").pattern == "@at " + text
    assert parse_at(text) == when


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (1, "1s"),
        (1.5, "1.5s"),
        (0.25, "250ms"),
        (60, "1m"),
        (90, "1m30s"),
        (300, "5m"),
        (3600, "1h"),
        (3661.5, "1h1m1.5s"),
        (86400, "24h"),
    ],
)
def test_go_durations(seconds: float, text: str) -> None:
    assert go_duration(seconds) == text
    assert parse_go_duration(text) == pytest.approx(seconds)


@given(st.integers(min_value=1, max_value=10**12))
def test_go_duration_round_trips(ms: int) -> None:
    assert parse_go_duration(go_duration(ms / 1000)) == pytest.approx(ms / 1000)


def test_every_takes_a_timedelta_or_seconds() -> None:
    assert Schedule(every=dt.timedelta(seconds=90), target="t").pattern == "@every 1m30s"
    assert Schedule(every=1, target="t").pattern == "@every 1s"


@pytest.mark.parametrize(
    "expr",
    [
        "@yearly",
        "@annually",
        "@monthly",
        "@weekly",
        "@daily",
        "@midnight",
        "@hourly",
        "* * * * * *",
        "0 0 5 * * *",
        "0 30 4 1,15 * 5",
        "*/10 * * * * *",
        "0 0-23/2 * * * *",
        "0 0 9 * jan-mar mon,wed,FRI",
        "0 0 0 ? * *",
        "5/15 * * * * *",
        "0 0 0 29 2 *",  # the next leap day is within five years
        "0 0 0 31 * *",
    ],
)
def test_cron_expressions_the_server_takes(expr: str) -> None:
    assert cron_problem(expr) is None
    assert Schedule(cron=expr, target="t").pattern == expr


@pytest.mark.parametrize(
    ("expr", "why"),
    [
        ("* * * * *", "has 5 field(s)"),
        ("* * * * * * *", "has 7 field(s)"),
        ("60 * * * * *", "the seconds field '60': 60 is above 59"),
        ("* * 24 * * *", "above 23"),
        ("* * * 0 * *", "0 is below 1"),
        ("* * * * 13 *", "above 12"),
        ("* * * * * 7", "above 6"),
        ("* * * * * x", "not a number or a name"),
        ("*/0 * * * * *", "a step of 0"),
        ("5-1 * * * * *", "ends before it starts"),
        ("1-2-3 * * * * *", "too many hyphens"),
        ("*/2/2 * * * * *", "too many slashes"),
        ("1,,2 * * * * *", "an empty item"),
        ("-1 * * * * *", "not a number"),
        ("0 0 0 30 2 *", "matches no day within 5 years"),
        ("0 0 0 31 4,6,9,11 *", "matches no day"),
        ("@fortnightly", "is not a predefined schedule"),
    ],
)
def test_cron_expressions_the_server_refuses(expr: str, why: str) -> None:
    problem = cron_problem(expr)
    assert problem is not None and why in problem
    with pytest.raises(InvalidScheduleError) as info:
        Schedule(cron=expr, target="t")
    assert info.value.field == "cron"
    assert why in str(info.value)


def test_both_day_fields_restricted_means_either() -> None:
    # the 30th of February never comes, but Sundays in February do
    assert cron_problem("0 0 0 30 2 sun") is None
    assert cron_problem("0 0 0 30 2 *") is not None


@pytest.mark.parametrize(
    ("kwargs", "field", "says"),
    [
        ({"target": "t"}, "at", "exactly one of at, every and cron"),
        ({"target": "t", "cron": "@daily", "every": 5}, "cron", "exactly one"),
        ({"target": "t", "at": dt.datetime(2030, 1, 1)}, "at", "naive"),
        ({"target": "t", "at": "2030-01-01"}, "at", "a datetime"),
        ({"target": "t", "every": 0.5}, "every", "at least 1 second"),
        ({"target": "t", "every": dt.timedelta(milliseconds=999)}, "every", "at least 1"),
        ({"target": "t", "every": "1m"}, "every", "a timedelta or seconds"),
        ({"target": "t", "cron": "@every 1m"}, "cron", "use at= or every="),
        ({"target": "t.*", "cron": "@daily"}, "target", "no wildcards"),
        ({"target": "", "cron": "@daily"}, "target", "invalid subject"),
        ({"target": "t", "cron": "@daily", "ttl": 0.5}, "ttl", "at least 1 second"),
        ({"target": "t", "cron": "@daily", "ttl": "5m"}, "ttl", "'never'"),
        ({"target": "t", "every": 60, "time_zone": "UTC"}, "time_zone", "only a cron"),
        ({"target": "t", "at": ADR_AT, "time_zone": "UTC"}, "time_zone", "only a cron"),
        ({"target": "t", "cron": "@daily", "time_zone": ""}, "time_zone", "empty"),
        ({"target": "t", "cron": "@daily", "time_zone": "+02:00"}, "time_zone", "fixed offset"),
        ({"target": "t", "cron": "@daily", "time_zone": "UTC+2"}, "time_zone", "fixed offset"),
        ({"target": "t", "cron": "@daily", "time_zone": "Mars/Olympus"}, "time_zone", "IANA"),
        ({"target": "t", "cron": "@daily", "source": "t"}, "source", "cannot be the target"),
        ({"target": "t", "cron": "@daily", "source": "s.>"}, "source", "no wildcards"),
    ],
)
def test_what_is_refused_names_its_field(kwargs: dict[str, object], field: str, says: str) -> None:
    with pytest.raises(InvalidScheduleError) as info:
        Schedule(**kwargs)  # type: ignore[arg-type]
    assert info.value.field == field
    assert says in str(info.value)
    assert isinstance(info.value, ValueError)


def test_time_zones_the_server_names() -> None:
    for zone in ("UTC", "Local", "Europe/Amsterdam", "America/New_York", "EST"):
        assert (
            Schedule(cron="@daily", target="t", time_zone=zone).headers()["Nats-Schedule-Time-Zone"]
            == zone
        )


_STREAM = StreamConfig(
    name="S", subjects=["sch.>", "out.*"], allow_msg_schedules=True, allow_msg_ttl=True
)


@pytest.mark.parametrize(
    ("schedule", "subject", "config", "field", "says"),
    [
        (
            Schedule(cron="@daily", target="out.a"),
            "sch.a",
            StreamConfig(name="P", subjects=["sch.>", "out.*"]),
            "stream",
            "allow_msg_schedules",
        ),
        (Schedule(cron="@daily", target="else.a"), "sch.a", _STREAM, "target", "not store"),
        (Schedule(cron="@daily", target="out.a.b"), "sch.a", _STREAM, "target", "not store"),
        (
            Schedule(cron="@daily", target="out.a", source="src.x"),
            "sch.a",
            _STREAM,
            "source",
            "not store",
        ),
        (Schedule(cron="@daily", target="sch.a"), "sch.a", _STREAM, "subject", "target too"),
        (Schedule(cron="@daily", target="out.a"), "x.a", _STREAM, "subject", "not store"),
        (
            Schedule(cron="@daily", target="out.a", ttl=60),
            "sch.a",
            StreamConfig(name="N", subjects=["sch.>", "out.*"], allow_msg_schedules=True),
            "ttl",
            "allow_msg_ttl",
        ),
    ],
)
def test_checked_against_the_stream(
    schedule: Schedule, subject: str, config: StreamConfig, field: str, says: str
) -> None:
    with pytest.raises(InvalidScheduleError) as info:
        schedule.check(subject, config)
    assert info.value.field == field
    assert says in str(info.value)


def test_a_stream_that_takes_it() -> None:
    Schedule(cron="@daily", target="out.a", source="sch.src", ttl=60).check("sch.a", _STREAM)


def test_a_stored_schedule_reads_back() -> None:
    raw = (
        b"NATS/1.0\r\nNats-Schedule: @every 1m30s\r\nNats-Schedule-Target: out.a\r\n"
        b"Nats-Schedule-TTL: 5m\r\nNats-Rollup: sub\r\nX-Id: 7\r\n\r\n"
    )
    when = dt.datetime(2030, 1, 1, tzinfo=UTC)
    got = ScheduledMessage.from_msg(StreamMsg("sch.a", 4, b"body", when, raw))
    assert got is not None
    assert (got.subject, got.seq, got.schedule, got.target) == ("sch.a", 4, "@every 1m30s", "out.a")
    assert (got.every, got.at, got.cron, got.ttl, got.data) == (90.0, None, None, "5m", b"body")
    assert got.headers["X-Id"] == "7"
    at = ScheduledMessage.from_msg(
        StreamMsg(
            "sch.b", 5, b"", when, b"NATS/1.0\r\nNats-Schedule: @at 2030-01-01T00:00:00Z\r\n\r\n"
        )
    )
    assert at is not None and at.at == when
    assert ScheduledMessage.from_msg(StreamMsg("out.a", 6, b"", when, None)) is None
