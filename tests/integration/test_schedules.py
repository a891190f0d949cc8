"""Message schedules (ADR-51) against a real nats-server: what fires, when and how often,
the headers on the wire and in the store, cancelling, listing, and which refusals are the
client's (before sending) and which the server's, each naming its field.

Time bounds are generous: the machine is a loaded 2-core box. The server's scheduling
timer fires no sooner than 250 ms after it was last set, and an ``@every`` schedule fires
on whole seconds.
"""

from __future__ import annotations

import asyncio
import datetime as dt

import pytest

from jetstream import (
    ConsumerConfig,
    InvalidScheduleError,
    JetStream,
    Schedule,
    ScheduleRefusedError,
    StreamConfig,
    TimeoutError,
)
from jetstream._schedspec import cron_problem
from jetstream.api import StreamSource
from jetstream.client import Client
from jetstream.consumer import Consumer
from jetstream.stream import Stream

pytestmark = pytest.mark.asyncio
UTC = dt.UTC


async def _stream(js: JetStream, name: str = "SCH", **options: object) -> Stream:
    config = StreamConfig(
        name=name,
        subjects=["sch.>", "out.>"],
        allow_msg_schedules=True,
        allow_msg_ttl=True,
        **options,  # type: ignore[arg-type]
    )
    return await js.create_stream(config)


async def _reader(stream: Stream, subject: str) -> Consumer:
    return await stream.create_or_update_consumer(ConsumerConfig(filter_subjects=[subject]))


async def test_a_message_scheduled_ahead_arrives_once_at_its_time(js: JetStream) -> None:
    stream = await _stream(js)
    reader = await _reader(stream, "out.>")
    at = dt.datetime.now(UTC) + dt.timedelta(seconds=2)
    ack = await js.schedule(
        "sch.once", b"hello", at=at, target="out.once", ttl=300, headers={"X-Order": "42"}
    )
    assert (ack.stream, ack.seq) == ("SCH", 1)
    assert [s.subject for s in await js.list_schedules("SCH", "sch.>")] == ["sch.once"]

    msg = await reader.next(timeout=20)
    stored = msg.metadata.timestamp
    # not before its time (the server fires at the instant, not a second early), and
    # within the loaded machine's patience after it
    assert at - dt.timedelta(milliseconds=50) <= stored < at + dt.timedelta(seconds=10)
    assert (msg.subject, msg.data) == ("out.once", b"hello")
    assert dict(msg.headers) == {
        "X-Order": "42",
        "Nats-Scheduler": "sch.once",
        "Nats-Schedule-Next": "purge",
        "Nats-TTL": "5m",
    }
    await msg.ack()
    # once: nothing more comes, and the schedule is gone from the stream
    with pytest.raises(TimeoutError):
        await reader.next(timeout=2.5)
    assert await js.list_schedules("SCH", "sch.>") == []
    info = await stream.info(subjects_filter=">")
    assert info.state.subjects == {"out.once": 1}


async def test_every_second_fires_several_times_until_cancelled(js: JetStream) -> None:
    stream = await _stream(js)
    reader = await _reader(stream, "out.tick")
    await js.schedule("sch.tick", b"tick", every=1, target="out.tick", stream="SCH")
    got = [await reader.next(timeout=10) for _ in range(3)]
    stamps = [m.metadata.timestamp for m in got]
    nexts = []
    for m in got:
        assert m.headers["Nats-Scheduler"] == "sch.tick"
        nxt = dt.datetime.fromisoformat(m.headers["Nats-Schedule-Next"].replace("Z", "+00:00"))
        assert nxt.microsecond == 0  # on whole seconds
        # the next one is still to come (within the second, or two when the server ran late)
        assert dt.timedelta(0) < nxt - m.metadata.timestamp <= dt.timedelta(seconds=2)
        nexts.append(nxt)
    assert stamps == sorted(stamps) and nexts == sorted(set(nexts))

    assert await js.cancel_schedule("sch.tick") == 1
    assert await js.list_schedules("SCH") == []
    await asyncio.sleep(1.5)  # one firing may have been under way as it was purged
    before = (await stream.info(subjects_filter="out.tick")).state.subjects["out.tick"]
    await asyncio.sleep(3)
    after = (await stream.info(subjects_filter="out.tick")).state.subjects["out.tick"]
    assert after == before >= 3
    assert await js.cancel_schedule("sch.tick") == 0  # nothing left to cancel


async def test_headers_byte_for_byte_as_the_adr_writes_them(nc: Client, js: JetStream) -> None:
    await js.create_stream(
        StreamConfig(
            name="ORDERS",
            subjects=["schedules.>", "orders"],
            allow_msg_schedules=True,
            allow_msg_ttl=True,
            allow_direct=True,
        )
    )
    wire = await nc.subscribe("schedules.>")
    stored_orders = await (await js.stream("ORDERS")).create_or_update_consumer(
        ConsumerConfig(filter_subjects=["orders"])
    )
    # the ADR's two examples: a single message (in the past: published at once) ...
    await js.schedule(
        "schedules.orders.single",
        b"body",
        at=dt.datetime(2009, 11, 10, 23, 0, tzinfo=UTC),
        ttl=dt.timedelta(minutes=5),
        target="orders",
    )
    # ... and an hourly one
    await js.schedule("schedules.orders.hourly", b"body", cron="@hourly", ttl=300, target="orders")
    single = await wire.next_msg(timeout=5)
    hourly = await wire.next_msg(timeout=5)
    assert single.raw_headers == (
        b"NATS/1.0\r\n"
        b"Nats-Schedule: @at 2009-11-10T23:00:00Z\r\n"
        b"Nats-Schedule-Target: orders\r\n"
        b"Nats-Schedule-TTL: 5m\r\n"
        b"\r\n"
    )
    assert hourly.raw_headers == (
        b"NATS/1.0\r\n"
        b"Nats-Schedule: @hourly\r\n"
        b"Nats-Schedule-Target: orders\r\n"
        b"Nats-Schedule-TTL: 5m\r\n"
        b"\r\n"
    )
    # stored as sent, with the rollup the server adds to every schedule
    kept = await (await js.stream("ORDERS")).get_msg(last_by_subject="schedules.orders.hourly")
    assert kept.raw_headers is not None
    assert kept.raw_headers.startswith(
        b"NATS/1.0\r\nNats-Schedule: @hourly\r\nNats-Schedule-Target: orders\r\n"
        b"Nats-Schedule-TTL: 5m\r\nNats-Rollup: sub\r\n"
    )
    # a time in the past: published at once, and the schedule removed
    now = await stored_orders.next(timeout=10)
    assert (now.subject, now.data, now.headers["Nats-Scheduler"]) == (
        "orders",
        b"body",
        "schedules.orders.single",
    )
    assert now.headers["Nats-TTL"] == "5m"
    pending = await js.list_schedules("ORDERS", "schedules.>")
    assert [(s.subject, s.cron, s.ttl) for s in pending] == [
        ("schedules.orders.hourly", "@hourly", "5m")
    ]


async def test_the_client_refuses_before_sending(js: JetStream) -> None:
    stream = await _stream(js)
    await js.create_stream(StreamConfig(name="NOTTL", subjects=["nt.>"], allow_msg_schedules=True))
    await js.create_stream(StreamConfig(name="PLAIN", subjects=["plain.>"]))
    cases: list[tuple[str, dict[str, object], str]] = [
        ("sch.a", {"cron": "* * * * *", "target": "out.a"}, "cron"),
        ("sch.a", {"cron": "0 0 0 30 2 *", "target": "out.a"}, "cron"),
        ("sch.a", {"at": dt.datetime(2030, 1, 1), "target": "out.a"}, "at"),
        ("sch.a", {"every": 0.5, "target": "out.a"}, "every"),
        ("sch.a", {"every": 60, "target": "elsewhere"}, "target"),
        ("sch.a", {"every": 60, "target": "out.a", "source": "elsewhere"}, "source"),
        ("sch.a", {"every": 60, "target": "out.a", "time_zone": "UTC"}, "time_zone"),
        ("sch.a", {"cron": "@daily", "target": "out.a", "time_zone": "+01:00"}, "time_zone"),
        ("sch.a", {"every": 60}, "target"),
        ("sch.a", {"every": 60, "target": "sch.a"}, "subject"),
        ("nobody.a", {"every": 60, "target": "out.a"}, "subject"),
        ("nt.a", {"every": 60, "target": "nt.b", "ttl": 60}, "ttl"),
        ("plain.a", {"every": 60, "target": "plain.b"}, "stream"),
        (
            "sch.a",
            {"every": 60, "target": "out.a", "headers": {"Nats-Schedule-TTL": "1m"}},
            "headers",
        ),
    ]
    for subject, kwargs, field in cases:
        with pytest.raises(InvalidScheduleError) as info:
            await js.schedule(subject, b"x", **kwargs)  # type: ignore[arg-type]
        assert info.value.field == field, (subject, kwargs, str(info.value))
    for name in ("SCH", "NOTTL", "PLAIN"):
        assert (await (await js.stream(name)).info()).state.messages == 0
    assert (await stream.info()).state.messages == 0


async def test_the_servers_refusals_are_typed_and_name_their_field(js: JetStream) -> None:
    """What the client does not check, or a publish that skips the client's checks."""
    await _stream(js)
    await js.create_stream(StreamConfig(name="PLAIN", subjects=["plain.>"]))
    daily = Schedule(cron="@daily", target="plain.b")
    cases: list[tuple[str, dict[str, str], int, str]] = [
        ("plain.a", daily.headers(), 10188, "stream"),
        (
            "sch.a",
            {"Nats-Schedule": "@every 500ms", "Nats-Schedule-Target": "out.a"},
            10189,
            "schedule",
        ),
        (
            "sch.a",
            {"Nats-Schedule": "@daily", "Nats-Schedule-Target": "elsewhere"},
            10190,
            "target",
        ),
        (
            "sch.a",
            {**Schedule(cron="@daily", target="out.a").headers(), "Nats-Schedule-TTL": "500ms"},
            10191,
            "ttl",
        ),
        (
            "sch.a",
            {**Schedule(cron="@daily", target="out.a").headers(), "Nats-Rollup": "all"},
            10192,
            "rollup",
        ),
        (
            "sch.a",
            {
                **Schedule(cron="@daily", target="out.a").headers(),
                "Nats-Schedule-Source": "elsewhere",
            },
            10203,
            "source",
        ),
        (
            "sch.a",
            {
                **Schedule(cron="@daily", target="out.a").headers(),
                "Nats-Schedule-Time-Zone": "Mars/Olympus",
            },
            10223,
            "time_zone",
        ),
        ("sch.b", {"Nats-Scheduler": "sch.b", "Nats-Schedule-Next": "purge"}, 10212, "scheduler"),
    ]
    for subject, headers, err_code, field in cases:
        with pytest.raises(ScheduleRefusedError) as info:
            await js.publish(subject, b"", headers=headers)
        assert (info.value.err_code, info.value.field) == (err_code, field), headers
        assert f"({field})" in str(info.value)
    for config, err_code in (
        (StreamConfig(name="M", mirror=StreamSource(name="SCH"), allow_msg_schedules=True), 10186),
        (
            StreamConfig(name="SRC", sources=[StreamSource(name="SCH")], allow_msg_schedules=True),
            10187,
        ),
    ):
        with pytest.raises(ScheduleRefusedError) as info:
            await js.create_stream(config)
        assert (info.value.err_code, info.value.field) == (err_code, "allow_msg_schedules")


@pytest.mark.parametrize(
    "expr",
    [
        "@hourly",
        "@annually",
        "0 0 5 * * *",
        "*/10 * * * * *",
        "0 0 9 * jan-mar mon,wed,FRI",
        "0 0 0 ? * *",
        "5/15 * * * * *",
        "0 0 0 29 2 *",
        "0 0 0 30 2 sun",
        "* * * * *",
        "60 * * * * *",
        "* * 24 * * *",
        "* * * 0 * *",
        "* * * * 13 *",
        "* * * * * 7",
        "* * * * * x",
        "*/0 * * * * *",
        "5-1 * * * * *",
        "1-2-3 * * * * *",
        "0 0 0 30 2 *",
        "0 0 0 31 4,6,9,11 *",
        "@fortnightly",
    ],
)
async def test_the_client_judges_cron_as_the_server_does(js: JetStream, expr: str) -> None:
    await _stream(js)
    headers = {"Nats-Schedule": expr, "Nats-Schedule-Target": "out.a"}
    try:
        await js.publish("sch.cron", b"", headers=headers)
        server_takes = True
    except ScheduleRefusedError as exc:
        assert exc.err_code == 10189
        server_takes = False
    assert (cron_problem(expr) is None) == server_takes, cron_problem(expr)


async def test_listing_the_pending_schedules(js: JetStream) -> None:
    for name, direct in (("LISTD", True), ("LISTA", False)):
        prefix = name.lower()
        await js.create_stream(
            StreamConfig(
                name=name,
                subjects=[f"{prefix}.sch.>", f"{prefix}.out.>"],
                allow_msg_schedules=True,
                allow_direct=direct,
            )
        )
        far = dt.datetime(2099, 1, 2, 3, 4, 5, tzinfo=UTC)
        await js.schedule(
            f"{prefix}.sch.c",
            b"c",
            cron="0 30 4 * * *",
            target=f"{prefix}.out.c",
            time_zone="Europe/Amsterdam",
        )
        await js.schedule(f"{prefix}.sch.a", b"a", at=far, target=f"{prefix}.out.a")
        await js.schedule(
            f"{prefix}.sch.e", b"e", every=3600, target=f"{prefix}.out.e", source=f"{prefix}.out.a"
        )
        await js.publish(f"{prefix}.out.a", b"not a schedule")
        # a new schedule on the same subject replaces the old one
        await js.schedule(f"{prefix}.sch.c", b"c2", cron="0 0 5 * * *", target=f"{prefix}.out.c")
        got = await js.list_schedules(name)
        assert [(s.subject, s.target, s.data) for s in got] == [
            (f"{prefix}.sch.a", f"{prefix}.out.a", b"a"),
            (f"{prefix}.sch.e", f"{prefix}.out.e", b"e"),
            (f"{prefix}.sch.c", f"{prefix}.out.c", b"c2"),
        ]
        a, e, c = got
        assert (a.at, a.schedule) == (far, "@at 2099-01-02T03:04:05Z")
        assert (e.every, e.source) == (3600.0, f"{prefix}.out.a")
        assert (c.cron, c.time_zone) == ("0 0 5 * * *", None)
        assert await js.list_schedules(name, f"{prefix}.sch.a") == [a]
        assert await js.cancel_schedule(f"{prefix}.sch.>") == 3
        assert await js.list_schedules(name) == []


async def test_a_schedule_value_goes_through_plain_publish(js: JetStream) -> None:
    stream = await _stream(js)
    reader = await _reader(stream, "out.now")
    sched = Schedule(at=dt.datetime.now(UTC) - dt.timedelta(seconds=1), target="out.now")
    await js.publish("sch.now", b"now", headers=sched.headers())
    msg = await reader.next(timeout=10)
    assert (msg.data, msg.headers["Nats-Scheduler"]) == (b"now", "sch.now")
    # and js.schedule takes one too
    ack = await js.schedule("sch.daily", b"d", schedule=Schedule(cron="@daily", target="out.d"))
    assert ack.stream == "SCH"
    with pytest.raises(InvalidScheduleError) as info:
        await js.schedule("sch.x", schedule=Schedule(cron="@daily", target="out.d"), every=5)
    assert info.value.field == "schedule"
