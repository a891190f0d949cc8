"""Services (ADR-32) against a real nats-server: endpoints, groups, error answers, the
discovery JSON, stats, queue groups, stop."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import urllib.request
from typing import Any

import pytest

import jetstream
from jetstream import (
    BadSubjectError,
    Client,
    EndpointConfig,
    GroupConfig,
    Request,
    ServiceConfig,
    ServiceConfigError,
    ServiceResponseError,
)
from jetstream import service as svc_api
from jetstream.embedded import NatsServer

pytestmark = pytest.mark.asyncio

T = 10.0  # generous bound for every wait: the CI machine is loaded


async def echo(req: Request) -> None:
    await req.respond(req.data, headers={"Echo-Subject": req.subject})


async def fail(req: Request) -> None:
    await req.respond_error(418, "teapot", data=b"no coffee", headers={"X-Why": "tea"})


async def boom(req: Request) -> None:
    raise RuntimeError("handler blew up")


async def server_subjects(server: NatsServer) -> list[str]:
    """The subjects of every client subscription the server holds (its /connz)."""

    def read() -> list[str]:
        with urllib.request.urlopen(f"{server.http_url}/connz?subs=1", timeout=T) as resp:
            connz = json.load(resp)
        return sorted(s for c in connz["connections"] for s in c.get("subscriptions_list", []))

    return await asyncio.to_thread(read)


async def raw(nc: Client, subject: str) -> dict[str, Any]:
    """One discovery answer, as the JSON text the service sent."""
    msg = await nc.request(subject, timeout=T)
    decoded: dict[str, Any] = json.loads(msg.data)
    return decoded


async def test_endpoints_and_groups_answer(nc: Client) -> None:
    config = ServiceConfig(
        name="calc",
        version="1.2.3-rc.1+build.7",
        endpoints=[EndpointConfig(name="echo", handler=echo)],
        groups=[
            GroupConfig(
                name="math",
                endpoints=[EndpointConfig(name="twice", handler=echo, subject="double")],
                groups=[GroupConfig(name="v2", endpoints=[EndpointConfig(name="e", handler=echo)])],
            )
        ],
    )
    async with await nc.add_service(config) as service:
        extra = service.add_group("late").add_group("x")
        await extra.add_endpoint("wild", echo, subject="*")
        for subject in ("echo", "math.double", "math.v2.e", "late.x.any"):
            reply = await nc.request(subject, b"hi " + subject.encode(), timeout=T)
            assert reply.data == b"hi " + subject.encode()
            assert reply.headers["Echo-Subject"] == subject
            assert svc_api.error_of(reply) is None
        subjects = [e.subject for e in service.info().endpoints]
        assert subjects == ["echo", "math.double", "math.v2.e", "late.x.*"]
    assert service.stopped


async def test_a_service_from_keywords(nc: Client) -> None:
    """The config's fields as keywords, alone or replacing those of a config."""
    echo_ep = EndpointConfig(name="echo", handler=echo, subject="kw.echo")
    async with await nc.add_service(name="kw", version="0.1.0", endpoints=[echo_ep]) as service:
        assert (await nc.request("kw.echo", b"x", timeout=T)).data == b"x"
        assert (service.info().name, service.info().version) == ("kw", "0.1.0")
    base = ServiceConfig(name="base", version="1.0.0")
    async with await nc.add_service(base, version="2.0.0", description="d") as service:
        assert (service.info().name, service.info().version) == ("base", "2.0.0")
        assert service.info().description == "d"
    with pytest.raises(TypeError, match="versoin"):
        await nc.add_service(name="kw", versoin="1.0.0")


async def test_error_answers_and_handler_exceptions(nc: Client) -> None:
    config = ServiceConfig(
        name="errs",
        version="0.1.0",
        endpoints=[
            EndpointConfig(name="fail", handler=fail),
            EndpointConfig(name="boom", handler=boom),
        ],
    )
    async with await nc.add_service(config) as service:
        reply = await nc.request("fail", b"", timeout=T)
        assert reply.headers["Nats-Service-Error"] == "teapot"
        assert reply.headers["Nats-Service-Error-Code"] == "418"
        assert reply.headers["X-Why"] == "tea"
        assert reply.data == b"no coffee"
        with pytest.raises(ServiceResponseError) as info:
            await svc_api.request(nc, "fail", timeout=T)
        assert (info.value.code, info.value.description) == (418, "teapot")
        assert info.value.data == b"no coffee" and info.value.subject == "fail"
        for _ in range(2):  # the service lives on after a handler raised
            reply = await nc.request("boom", b"", timeout=T)
            assert reply.headers["Nats-Service-Error-Code"] == "500"
            assert reply.headers["Nats-Service-Error"] == "internal server error"
            assert "handler blew up" in reply.headers["Nats-Service-Recover"]
        stats = {e.name: e for e in service.stats().endpoints}
        assert (stats["fail"].num_requests, stats["fail"].num_errors) == (2, 2)
        assert stats["fail"].last_error == "418:teapot"
        assert (stats["boom"].num_requests, stats["boom"].num_errors) == (2, 2)
        assert stats["boom"].last_error == "500:internal server error"


async def test_bad_configs_fail_before_anything_is_sent(
    nc: Client, nats_server: NatsServer
) -> None:
    await nc.flush(timeout=T)
    subs_before = await server_subjects(nats_server)
    sent = nc.stats.out_msgs
    bad: list[tuple[ServiceConfig, type[Exception]]] = [
        (ServiceConfig(name="", version="1.0.0"), ServiceConfigError),
        (ServiceConfig(name="a.b", version="1.0.0"), ServiceConfigError),
        (ServiceConfig(name="a b", version="1.0.0"), ServiceConfigError),
        (ServiceConfig(name="ok", version="1.0"), ServiceConfigError),
        (ServiceConfig(name="ok", version="v1.0.0"), ServiceConfigError),
        (ServiceConfig(name="ok", version="01.0.0"), ServiceConfigError),
        (ServiceConfig(name="ok", version="1.0.0", queue_group="a b"), ServiceConfigError),
        (
            ServiceConfig(
                name="ok", version="1.0.0", endpoints=[EndpointConfig(name="a.b", handler=echo)]
            ),
            ServiceConfigError,
        ),
        (
            ServiceConfig(
                name="ok",
                version="1.0.0",
                endpoints=[
                    EndpointConfig(name="good", handler=echo),
                    EndpointConfig(name="e", handler=echo, subject="a..b"),
                ],
            ),
            BadSubjectError,
        ),
        (
            ServiceConfig(
                name="ok",
                version="1.0.0",
                groups=[
                    GroupConfig(name="g.>", endpoints=[EndpointConfig(name="e", handler=echo)])
                ],
            ),
            BadSubjectError,
        ),
    ]
    for config, error in bad:
        with pytest.raises(error):
            await nc.add_service(config)
        assert issubclass(error, ValueError)
    # nothing was sent: no subscription, no message
    await nc.flush(timeout=T)
    assert await server_subjects(nats_server) == subs_before
    assert nc.stats.out_msgs == sent
    assert await svc_api.ping(nc, "ok", timeout=0.5) == []
    service = await nc.add_service(ServiceConfig(name="ok", version="1.0.0"))
    with pytest.raises(ServiceConfigError):
        await service.add_endpoint("no good", echo)
    with pytest.raises(BadSubjectError):
        service.add_group("a.>")
    await service.stop()
    with pytest.raises(ServiceConfigError, match="stopped"):
        await service.add_endpoint("late", echo)


async def test_discovery_json_is_what_adr32_prescribes(nc: Client) -> None:
    config = ServiceConfig(
        name="disc",
        version="2.0.0",
        description="discovery under test",
        metadata={"region": "eu"},
        endpoints=[EndpointConfig(name="echo", handler=echo, metadata={"kind": "echo"})],
        groups=[
            GroupConfig(
                name="g",
                queue_group="gq",
                endpoints=[
                    EndpointConfig(name="a", handler=echo),
                    EndpointConfig(name="b", handler=echo, queue_group="own"),
                ],
            )
        ],
        stats_handler=lambda name: {"endpoint": name},
    )
    before = dt.datetime.now(dt.UTC)
    async with await nc.add_service(config) as service:
        sid = service.id
        assert len(sid) == 22
        identity = {"name": "disc", "id": sid, "version": "2.0.0", "metadata": {"region": "eu"}}
        await nc.request("echo", b"x", timeout=T)
        for subject in ("$SRV.PING", "$SRV.PING.disc", f"$SRV.PING.disc.{sid}"):
            assert await raw(nc, subject) == {"type": "io.nats.micro.v1.ping_response", **identity}
        endpoints = [
            {"name": "echo", "subject": "echo", "queue_group": "q", "metadata": {"kind": "echo"}},
            {"name": "a", "subject": "g.a", "queue_group": "gq", "metadata": {}},
            {"name": "b", "subject": "g.b", "queue_group": "own", "metadata": {}},
        ]
        for subject in ("$SRV.INFO", "$SRV.INFO.disc", f"$SRV.INFO.disc.{sid}"):
            assert await raw(nc, subject) == {
                "type": "io.nats.micro.v1.info_response",
                **identity,
                "description": "discovery under test",
                "endpoints": endpoints,
            }
        for subject in ("$SRV.STATS", "$SRV.STATS.disc", f"$SRV.STATS.disc.{sid}"):
            got = await raw(nc, subject)
            assert set(got) == {"type", "name", "id", "version", "metadata", "started", "endpoints"}
            assert got["type"] == "io.nats.micro.v1.stats_response"
            assert {k: got[k] for k in identity} == identity
            started = dt.datetime.fromisoformat(got["started"])
            assert started.utcoffset() == dt.timedelta(0) and got["started"].endswith("Z")
            assert before <= started <= dt.datetime.now(dt.UTC)
            first = got["endpoints"][0]
            assert set(first) == {
                "name",
                "subject",
                "queue_group",
                "num_requests",
                "num_errors",
                "last_error",
                "processing_time",
                "average_processing_time",
                "data",
            }
            assert (first["name"], first["subject"], first["queue_group"]) == ("echo", "echo", "q")
            assert (first["num_requests"], first["num_errors"], first["last_error"]) == (1, 0, "")
            assert isinstance(first["processing_time"], int) and first["processing_time"] > 0
            assert first["average_processing_time"] == first["processing_time"]
            assert first["data"] == {"endpoint": "echo"}
            assert [e["num_requests"] for e in got["endpoints"][1:]] == [0, 0]
            assert [e["average_processing_time"] for e in got["endpoints"][1:]] == [0, 0]
        # the same through the discovery functions, decoded
        pings = await svc_api.ping(nc, "disc", timeout=1.0)
        assert [(p.name, p.id, p.type) for p in pings] == [
            ("disc", sid, svc_api.PING_RESPONSE_TYPE)
        ]
        (info,) = await svc_api.info(nc, "disc", sid, timeout=T)
        assert info.description == "discovery under test"
        assert [e.queue_group for e in info.endpoints] == ["q", "gq", "own"]
        (stats,) = await svc_api.stats(nc, "disc", sid, timeout=T)
        assert stats.endpoints[0].num_requests == 1 and stats.started is not None
    # stopped: nothing answers any more
    assert await svc_api.ping(nc, "disc", timeout=0.5) == []


async def test_stats_count_and_reset(nc: Client) -> None:
    async def slow(req: Request) -> None:
        await asyncio.sleep(0.01)
        await req.respond(b"ok")

    config = ServiceConfig(name="counted", version="1.0.0")
    async with await nc.add_service(config) as service:
        await service.add_endpoint("slow", slow)
        for _ in range(5):
            await nc.request("slow", b"", timeout=T)
        (ep,) = service.stats().endpoints
        assert (ep.num_requests, ep.num_errors, ep.last_error) == (5, 0, "")
        assert ep.processing_time >= 5 * 10_000_000  # five sleeps of 10 ms, in nanoseconds
        assert ep.average_processing_time == ep.processing_time // 5
        (remote,) = await svc_api.stats(nc, "counted", service.id, timeout=T)
        assert remote.endpoints[0].num_requests == 5
        first_start = service.stats().started
        service.reset()
        (ep,) = service.stats().endpoints
        assert (ep.num_requests, ep.processing_time, ep.average_processing_time) == (0, 0, 0)
        assert ep.name == "slow" and ep.queue_group == "q"
        started = service.stats().started
        assert first_start is not None and started is not None and started >= first_start


async def test_two_instances_share_the_requests(nats_url: str) -> None:
    async with jetstream.connect(nats_url) as a, jetstream.connect(nats_url) as b:
        config = ServiceConfig(name="shared", version="1.0.0")
        services = []
        for client, tag in ((a, b"A"), (b, b"B")):

            async def tagged(req: Request, tag: bytes = tag) -> None:
                await req.respond(tag)

            service = await client.add_service(config)
            await service.add_endpoint("work", tagged)
            services.append(service)
        await a.flush(timeout=T)
        await b.flush(timeout=T)
        pings = await svc_api.ping(a, "shared", timeout=2.0, max_answers=2)
        assert sorted(p.id for p in pings) == sorted(s.id for s in services)
        answers = [(await a.request("work", b"", timeout=T)).data for _ in range(60)]
        counts = {tag: answers.count(tag) for tag in (b"A", b"B")}
        assert sum(counts.values()) == 60
        assert counts[b"A"] > 0 and counts[b"B"] > 0, counts  # one in 2**59 to fail by chance
        assert sum(s.stats().endpoints[0].num_requests for s in services) == 60
        # an endpoint without a queue group gets every request on every instance
        for service in services:
            await service.add_endpoint("all", echo, no_queue_group=True)
        await a.flush(timeout=T)
        await b.flush(timeout=T)
        replies = await a.request_many("all", b"x", timeout=2.0, max_msgs=2)
        assert len(replies) == 2
        info = services[0].info().endpoints[1]
        assert (info.name, info.queue_group) == ("all", "")
        for service in services:
            await service.stop()


async def test_stop_leaves_no_subscription(nc: Client, nats_server: NatsServer) -> None:
    with pytest.raises(jetstream.NoRespondersError):  # no service yet (and the request inbox)
        await nc.request("$SRV.PING", b"", timeout=T)
    await nc.flush(timeout=T)
    baseline = await server_subjects(nats_server)
    config = ServiceConfig(
        name="stopper",
        version="1.0.0",
        endpoints=[EndpointConfig(name="e1", handler=echo)],
        groups=[GroupConfig(name="g", endpoints=[EndpointConfig(name="e2", handler=echo)])],
    )
    service = await nc.add_service(config)
    await nc.flush(timeout=T)
    sid = service.id
    expected = [
        f"$SRV.{verb}{suffix}"
        for verb in ("INFO", "PING", "STATS")
        for suffix in ("", ".stopper", f".stopper.{sid}")
    ]
    assert await server_subjects(nats_server) == sorted([*baseline, *expected, "e1", "g.e2"])
    assert len(await svc_api.ping(nc, timeout=1.0)) == 1
    await service.stop()
    await service.stop()  # a second stop does nothing
    assert service.stopped
    await nc.flush(timeout=T)
    for subject in (
        "e1",
        "g.e2",
        "$SRV.PING",
        "$SRV.INFO.stopper",
        f"$SRV.STATS.stopper.{service.id}",
    ):
        with pytest.raises(jetstream.NoRespondersError):
            await nc.request(subject, b"", timeout=T)
    assert await server_subjects(nats_server) == baseline


async def test_stop_answers_what_was_received(nc: Client) -> None:
    started = asyncio.Event()

    async def slow(req: Request) -> None:
        started.set()
        await asyncio.sleep(0.2)
        await req.respond(b"done")

    service = await nc.add_service(ServiceConfig(name="draining", version="1.0.0"))
    await service.add_endpoint("slow", slow)
    pending = asyncio.ensure_future(nc.request("slow", b"", timeout=T))
    async with asyncio.timeout(T):
        await started.wait()
        await service.stop()
        assert (await pending).data == b"done"
