"""service ls|info|stats against services running in the test's process, text and --json."""

from __future__ import annotations

import asyncio
import json

import pytest

import jetstream
from jetstream import EndpointConfig, GroupConfig, Request, ServiceConfig
from jetstream.embedded import NatsServer

from .conftest import Cli

pytestmark = pytest.mark.asyncio


async def echo(req: Request) -> None:
    await req.respond(req.data)


async def test_service_verbs(cli: Cli, module_nats_server: NatsServer) -> None:
    config = ServiceConfig(
        name="cli-svc",
        version="2.1.0",
        description="for the CLI",
        metadata={"zone": "a"},
        endpoints=[EndpointConfig(name="echo", handler=echo, subject="cli.echo")],
        groups=[GroupConfig(name="cli.g", endpoints=[EndpointConfig(name="x", handler=echo)])],
    )
    async with (
        jetstream.connect(module_nats_server.url) as nc,
        await nc.add_service(config) as one,
        await nc.add_service(config) as two,
    ):
        await nc.request("cli.echo", b"hi", timeout=10)
        await nc.flush(timeout=10)

        async def run(*args: str, status: int = 0) -> str:
            proc = await asyncio.to_thread(cli, *args, "--plain", status=status)
            return proc.stdout + proc.stderr

        listed = await run("service", "ls")
        assert "Services (2)" in listed and one.id in listed and two.id in listed
        docs = json.loads(await run("service", "ls", "cli-svc", "--json"))
        assert sorted(d["id"] for d in docs) == sorted([one.id, two.id])
        assert docs[0]["type"] == "io.nats.micro.v1.info_response"
        assert [e["subject"] for e in docs[0]["endpoints"]] == ["cli.echo", "cli.g.x"]

        info = await run("service", "info", "cli-svc", one.id)
        assert f"Service cli-svc 2.1.0 ({one.id})" in info and "zone=a" in info
        assert "cli.g.x" in info and two.id not in info

        stats = json.loads(await run("service", "stats", "cli-svc", "--json", "--wait", "2"))
        counts = {d["id"]: d["endpoints"][0]["num_requests"] for d in stats}
        assert counts == {one.id: counts[one.id], two.id: counts[two.id]}
        assert sum(counts.values()) == 1  # the one request went to one instance
        table = await run("service", "stats", "cli-svc")
        assert "Stats of cli-svc (2 instances)" in table and "cli.g" not in table

        missing = await run("service", "info", "no-such", "--wait", "0.3", status=1)
        assert "no service no-such answered within 0.3s" in missing
