"""Services across clients: our discovery reads a nats.go micro service and calls it, and
nats.go discovers and calls our service (``go_micro/main.go``, built offline in GOPATH
mode against the nats.go sources of Debian's package, like the benchmarks' native
anchor). Marked ``native``: ``make test`` leaves them out; ``make test-native`` installs
Go and those sources when they are missing, then runs them. Without them they fail.

The nats.go of the distribution (1.22) has the first form of its micro package: its
answers carry no ``type``, ``metadata`` or ``endpoints`` yet (INFO names its one
endpoint's ``subject``; STATS counts at the top level). Our decoding takes them with
defaults; its decoding of our v1 answers reads the fields the two forms share.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
import pytest_asyncio

from benchmarks.bench_native import DEBIAN_GOPATH
from jetstream import Client, EndpointConfig, Request, ServiceConfig, ServiceResponseError
from jetstream import service as svc_api

pytestmark = [pytest.mark.asyncio, pytest.mark.native]

HERE = Path(__file__).resolve().parent / "go_micro"
T = 20.0  # bound of every wait: building and starting Go on a loaded machine takes a while


@pytest.fixture(scope="module")
def go_micro(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Go program, built once for the module (a failure says why: no skip)."""
    go = shutil.which("go")
    assert go, "no Go toolchain (`go`) on PATH: `make test-native` installs it (golang-go)"
    gopath = os.environ.get("NATS_GO_GOPATH", DEBIAN_GOPATH)
    assert (Path(gopath) / "src/github.com/nats-io/nats.go/micro").is_dir(), (
        f"no nats.go micro sources under {gopath}/src: `make test-native` installs them "
        "(golang-github-nats-io-go-nats-dev)"
    )
    out = tmp_path_factory.mktemp("go_micro")
    env = {
        **os.environ,
        "GO111MODULE": "off",
        "GOPATH": gopath,
        "GOFLAGS": "",
        "GOCACHE": os.environ.get("GOCACHE") or str(out / "cache"),
    }
    exe = out / "go-micro"
    proc = subprocess.run(
        [go, "build", "-o", str(exe), "."],
        cwd=HERE,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, f"go build failed: {proc.stderr[-3000:]}"
    return exe


@pytest_asyncio.fixture
async def go_service(go_micro: Path, nats_url: str) -> AsyncIterator[dict[str, Any]]:
    """A running nats.go service (name ``gosvc``, endpoint ``go.echo``): its INFO."""
    proc = await asyncio.create_subprocess_exec(
        str(go_micro),
        "-mode",
        "serve",
        "-url",
        nats_url,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    try:
        async with asyncio.timeout(T):
            line = await proc.stdout.readline()
        assert line, (await proc.stderr.read()).decode()
        yield json.loads(line)
    finally:
        proc.stdin.close()
        try:
            async with asyncio.timeout(T):
                await proc.wait()
        except TimeoutError:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0, (await proc.stderr.read()).decode()


async def test_our_discovery_reads_and_calls_a_go_service(
    nc: Client, go_service: dict[str, Any]
) -> None:
    go_id = go_service["id"]
    assert go_service["name"] == "gosvc" and go_service["subject"] == "go.echo"
    pings = await svc_api.ping(nc, "gosvc", timeout=2.0)
    assert [(p.name, p.id, p.version) for p in pings] == [("gosvc", go_id, "0.3.1")]
    assert [p.id for p in await svc_api.ping(nc, timeout=2.0)] == [go_id]
    (info,) = await svc_api.info(nc, "gosvc", go_id, timeout=T)
    # field by field against what the Go service says of itself
    assert (info.name, info.id, info.version, info.description) == (
        go_service["name"],
        go_service["id"],
        go_service["version"],
        go_service["description"],
    )
    reply = await svc_api.request(nc, "go.echo", b"hello", timeout=T)
    assert reply.data == b"go:hello"
    with pytest.raises(ServiceResponseError) as error:
        await svc_api.request(nc, "go.echo", b"fail", timeout=T)
    assert (error.value.code, error.value.description, error.value.data) == (
        422,
        "go refuses",
        b"fail body",
    )
    (stats,) = await svc_api.stats(nc, "gosvc", timeout=T, max_answers=1)
    assert (stats.name, stats.id, stats.version) == ("gosvc", go_id, "0.3.1")
    assert stats.started is not None
    raw = json.loads((await nc.request(f"$SRV.STATS.gosvc.{go_id}", timeout=T)).data)
    # nats.go 1.22 counts at the top level, and as errors only answers it failed to send
    # (later versions, like ours, count error answers too)
    assert (raw["num_requests"], raw["num_errors"]) == (2, 0)


async def test_a_go_client_discovers_and_calls_our_service(go_micro: Path, nc: Client) -> None:
    async def echo(req: Request) -> None:
        if req.data == b"fail":
            await req.respond_error(422, "python refuses", data=b"fail body")
        else:
            await req.respond(b"py:" + req.data)

    config = ServiceConfig(
        name="pysvc",
        version="1.4.0",
        description="ours, for nats.go",
        metadata={"lang": "python"},
        endpoints=[EndpointConfig(name="echo", handler=echo, subject="py.echo")],
    )
    async with await nc.add_service(config) as service:
        await nc.flush(timeout=T)
        url = nc.connected_url
        assert url is not None
        proc = await asyncio.create_subprocess_exec(
            str(go_micro),
            "-mode",
            "discover",
            "-url",
            url,
            "-name",
            "pysvc",
            "-subject",
            "py.echo",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            async with asyncio.timeout(T):
                out, err = await proc.communicate()
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        assert proc.returncode == 0, err.decode()
        got = json.loads(out)
        # what nats.go received is exactly what our service says of itself
        assert got["ping_raw"] == json.loads(msgspec.json.encode(service.ping()))
        assert got["info_raw"] == json.loads(msgspec.json.encode(service.info()))
        assert got["ping_raw"]["type"] == "io.nats.micro.v1.ping_response"
        assert got["info_raw"]["type"] == "io.nats.micro.v1.info_response"
        assert got["info_raw"]["endpoints"] == [
            {"name": "echo", "subject": "py.echo", "queue_group": "q", "metadata": {}}
        ]
        stats_raw = got["stats_raw"]
        assert stats_raw["type"] == "io.nats.micro.v1.stats_response"
        assert stats_raw["id"] == service.id and stats_raw["endpoints"][0]["num_requests"] == 0
        # and what nats.go's own types read of it
        identity = {"name": "pysvc", "id": service.id, "version": "1.4.0"}
        assert got["ping"] == identity
        assert {k: got["info"][k] for k in identity} == identity
        assert got["info"]["description"] == "ours, for nats.go"
        assert {k: got["stats"][k] for k in identity} == identity
        assert got["stats"]["started"] == stats_raw["started"]
        # the endpoint's answers, as nats.go read them
        assert got["reply"] == "py:from go"
        assert got["error"] == {
            "code": "422",
            "description": "python refuses",
            "data": "fail body",
        }
        (ep,) = service.stats().endpoints
        assert (ep.num_requests, ep.num_errors, ep.last_error) == (2, 1, "422:python refuses")
