"""The command line over WebSocket: ``--server ws://...`` and ``wss://`` with ``--tls-ca``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from jetstream.embedded import NatsServer
from tests.certs import CertPaths

from .conftest import Cli


@pytest.fixture(scope="module")
def wss_server(tls_certs: CertPaths) -> Iterator[NatsServer]:
    """JetStream, with TLS on its WebSocket listener (and on its client port)."""
    with NatsServer(
        websocket=True, tls_cert=tls_certs.server_cert, tls_key=tls_certs.server_key
    ) as server:
        yield server


@pytest.fixture
def ws_cli(tmp_path: Path) -> Iterator[Cli]:
    """The command line against a server of its own, reached with ws://."""
    with NatsServer(jetstream=False, websocket=True) as server:
        runner = Cli(server.ws_url, tmp_path)
        try:
            yield runner
        finally:
            runner.close()


def test_sub_pub_and_req_over_ws(ws_cli: Cli) -> None:
    sub = ws_cli.spawn("sub", "cli.ws", "--count", "1", "--wait", "20")
    reply = ws_cli.spawn("reply", "cli.ws.svc", "pong", "--count", "1")
    sub.ready("Subscribing on")
    reply.ready("Listening on")
    pub = ws_cli("pub", "cli.ws", "over WebSocket")
    assert 'Published 1 message (14 bytes) to "cli.ws"' in pub.stdout
    assert "over WebSocket" in sub.wait().stdout
    assert "pong" in ws_cli("req", "cli.ws.svc", "ping").stdout
    reply.wait()


def test_wss_with_the_ca_and_without(
    wss_server: NatsServer, tls_certs: CertPaths, tmp_path: Path
) -> None:
    cli = Cli(wss_server.ws_url, tmp_path)
    try:
        out = cli("--tls-ca", tls_certs.ca_cert, "stream", "ls").stdout
        assert "No streams defined" in out
        err = cli("pub", "cli.wss", "x", status=1).stderr
        assert "certificate verify failed" in err
    finally:
        cli.close()
