"""TLS against real servers: upgrade after INFO, tls:// URLs, verification, client
certificates, handshake-first, and refusals that come back typed and in time.

What the API promises: when the first connect fails only because of TLS (certificate,
hostname, no TLS offered), ``connect()`` raises ``TlsError`` itself, within
``connect_timeout``; with several servers failing for different reasons it raises
``NoServersError`` whose ``__cause__`` is the last failure.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import jetstream
from jetstream import NoServersError
from jetstream.core.tls import make_ssl_context
from jetstream.embedded import NatsServer
from jetstream.errors import TlsError
from tests.certs import CertPaths, make_certs

CONNECT_TIMEOUT = 2.0
# A failure must be reported within connect_timeout plus this margin.
MARGIN = 1.5


async def round_trip(nc: jetstream.Client, subject: str = "tls.check") -> None:
    sub = await nc.subscribe(subject)
    await nc.flush()
    await nc.publish(subject, b"secure hello")
    msg = await sub.next_msg(timeout=5)
    assert msg.data == b"secure hello"
    await sub.unsubscribe()


async def expect_failure(
    expected: type[BaseException], servers: str | list[str], **kw: Any
) -> BaseException:
    """Connect, expecting ``expected`` itself (not wrapped) within the time limit."""
    kw.setdefault("connect_timeout", CONNECT_TIMEOUT)
    t0 = time.monotonic()
    with pytest.raises(jetstream.NatsError) as info:
        await jetstream.connect(servers, **kw)
    elapsed = time.monotonic() - t0
    assert isinstance(info.value, expected), f"{type(info.value).__name__}: {info.value}"
    assert elapsed < kw["connect_timeout"] + MARGIN, f"took {elapsed:.2f}s"
    return info.value


# --------------------------------------------------------------------------- servers


@pytest.fixture(scope="module")
def tls_server(tls_certs: CertPaths) -> Iterator[NatsServer]:
    """Requires TLS; does not ask for client certificates."""
    with NatsServer(
        jetstream=False, tls_cert=tls_certs.server_cert, tls_key=tls_certs.server_key
    ) as s:
        yield s


@pytest.fixture(scope="module")
def mtls_server(tls_certs: CertPaths) -> Iterator[NatsServer]:
    """Requires TLS and a client certificate signed by the test CA."""
    with NatsServer(
        jetstream=False,
        tls_cert=tls_certs.server_cert,
        tls_key=tls_certs.server_key,
        tls_ca=tls_certs.ca_cert,
        tls_verify=True,
    ) as s:
        yield s


@pytest.fixture(scope="module")
def tls_first_server(tls_certs: CertPaths) -> Iterator[NatsServer]:
    """Expects the TLS handshake before it sends INFO."""
    with NatsServer(
        jetstream=False,
        tls_cert=tls_certs.server_cert,
        tls_key=tls_certs.server_key,
        tls_first=True,
    ) as s:
        yield s


@pytest.fixture
def ca_ctx(tls_certs: CertPaths) -> ssl.SSLContext:
    return make_ssl_context(ca_file=tls_certs.ca_cert)


# --------------------------------------------------------------------------- working TLS


@pytest.mark.asyncio
async def test_upgrade_after_info(tls_server: NatsServer, ca_ctx: ssl.SSLContext) -> None:
    # nats:// URL: the server's INFO says tls_required, the client upgrades the socket.
    async with jetstream.connect(tls_server.url, tls=ca_ctx) as nc:
        info = nc.server_info
        assert info is not None and info.tls_required
        await round_trip(nc)


@pytest.mark.asyncio
@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
async def test_tls_url(tls_server: NatsServer, ca_ctx: ssl.SSLContext, host: str) -> None:
    url = f"tls://{host}:{tls_server.port}"
    async with jetstream.connect(url, tls=ca_ctx) as nc:
        await round_trip(nc)
        assert nc.connected_url == url


@pytest.mark.asyncio
async def test_tls_hostname_override(tls_server: NatsServer, ca_ctx: ssl.SSLContext) -> None:
    # Connect by address, verify the certificate against the name it was issued for.
    async with jetstream.connect(tls_server.url, tls=ca_ctx, tls_hostname="localhost") as nc:
        await round_trip(nc)


@pytest.mark.asyncio
async def test_tls_socket_is_really_encrypted(
    tls_server: NatsServer, ca_ctx: ssl.SSLContext
) -> None:
    async with jetstream.connect(tls_server.url, tls=ca_ctx) as nc:
        conn = nc._conn
        assert conn is not None and conn.transport is not None
        ssl_object = conn.transport.get_extra_info("ssl_object")
        assert isinstance(ssl_object, ssl.SSLObject)
        assert ssl_object.version() in ("TLSv1.2", "TLSv1.3")


@pytest.mark.asyncio
async def test_client_certificate(mtls_server: NatsServer, tls_certs: CertPaths) -> None:
    ctx = make_ssl_context(
        ca_file=tls_certs.ca_cert, cert_file=tls_certs.client_cert, key_file=tls_certs.client_key
    )
    async with jetstream.connect(mtls_server.url, tls=ctx) as nc:
        await round_trip(nc)
    async with jetstream.connect(f"tls://localhost:{mtls_server.port}", tls=ctx) as nc:
        await round_trip(nc)


@pytest.mark.asyncio
async def test_handshake_first(tls_first_server: NatsServer, ca_ctx: ssl.SSLContext) -> None:
    async with jetstream.connect(tls_first_server.url, tls=ca_ctx, tls_handshake_first=True) as nc:
        await round_trip(nc)
    url = f"tls://localhost:{tls_first_server.port}"
    async with jetstream.connect(url, tls=ca_ctx, tls_handshake_first=True) as nc:
        await round_trip(nc)


@pytest.mark.asyncio
async def test_reconnect_keeps_tls(tls_certs: CertPaths, ca_ctx: ssl.SSLContext) -> None:
    with NatsServer(
        jetstream=False, tls_cert=tls_certs.server_cert, tls_key=tls_certs.server_key
    ) as server:
        reconnected = asyncio.Event()
        async with jetstream.connect(
            server.url, tls=ca_ctx, reconnect_time_wait=0.1, reconnected_cb=reconnected.set
        ) as nc:
            await round_trip(nc)
            await asyncio.to_thread(server.restart)
            async with asyncio.timeout(10):
                await reconnected.wait()
            await round_trip(nc)


# --------------------------------------------------------------------------- refusals


@pytest.mark.asyncio
async def test_default_verification_rejects_unknown_ca(tls_server: NatsServer) -> None:
    # No CA given: the system store is used, which does not know the test CA.
    exc = await expect_failure(TlsError, f"tls://127.0.0.1:{tls_server.port}")
    assert str(tls_server.port) in str(exc)
    assert "certificate" in str(exc).lower()


@pytest.mark.asyncio
async def test_default_verification_with_explicit_default_context(
    tls_server: NatsServer,
) -> None:
    await expect_failure(TlsError, tls_server.url, tls=make_ssl_context())


@pytest.mark.asyncio
async def test_wrong_hostname(tls_server: NatsServer, ca_ctx: ssl.SSLContext) -> None:
    exc = await expect_failure(TlsError, tls_server.url, tls=ca_ctx, tls_hostname="wrong.example")
    assert "wrong.example" in str(exc)


@pytest.mark.asyncio
async def test_address_not_in_certificate(tls_server: NatsServer, ca_ctx: ssl.SSLContext) -> None:
    # The certificate is for localhost and 127.0.0.1, not for 127.0.0.2.
    exc = await expect_failure(TlsError, tls_server.url, tls=ca_ctx, tls_hostname="127.0.0.2")
    assert "127.0.0.2" in str(exc)


@pytest.mark.asyncio
async def test_client_certificate_missing(mtls_server: NatsServer, ca_ctx: ssl.SSLContext) -> None:
    await expect_failure(TlsError, mtls_server.url, tls=ca_ctx)


@pytest.mark.asyncio
async def test_client_certificate_from_another_ca(
    mtls_server: NatsServer, tls_certs: CertPaths, tmp_path: Path
) -> None:
    other = make_certs(tmp_path / "other")
    ctx = make_ssl_context(
        ca_file=tls_certs.ca_cert, cert_file=other.client_cert, key_file=other.client_key
    )
    await expect_failure(TlsError, mtls_server.url, tls=ctx)


@pytest.mark.asyncio
async def test_plain_client_to_tls_server(tls_server: NatsServer) -> None:
    # No tls= at all: the client follows INFO's tls_required with default verification,
    # which fails here; the error says so instead of hanging.
    exc = await expect_failure(TlsError, tls_server.url)
    assert "certificate" in str(exc).lower()


@pytest.mark.asyncio
async def test_tls_client_to_plain_server(ca_ctx: ssl.SSLContext) -> None:
    with NatsServer(jetstream=False) as server:
        exc = await expect_failure(TlsError, server.url, tls=ca_ctx)
        assert "TLS" in str(exc)
        exc = await expect_failure(TlsError, f"tls://127.0.0.1:{server.port}")
        assert "TLS" in str(exc)


@pytest.mark.asyncio
async def test_handshake_first_without_context_uses_default_verification(
    tls_first_server: NatsServer,
) -> None:
    # tls_handshake_first implies TLS: verified against the system store (which fails),
    # rather than a plain socket waiting for an INFO that never comes.
    await expect_failure(TlsError, tls_first_server.url, tls_handshake_first=True)


@pytest.mark.asyncio
async def test_no_handshake_first_to_tls_first_server(
    tls_first_server: NatsServer, ca_ctx: ssl.SSLContext
) -> None:
    # The client waits for INFO, the server for a ClientHello: bounded by connect_timeout.
    await expect_failure(NoServersError, tls_first_server.url, tls=ca_ctx, connect_timeout=1.0)


@pytest.mark.asyncio
async def test_tls_failure_among_unreachable_servers(
    tls_server: NatsServer, ca_ctx: ssl.SSLContext
) -> None:
    # Mixed failures: NoServersError, with the cause kept.
    dead = NatsServer(jetstream=False)  # never started
    try:
        exc = await expect_failure(
            NoServersError,
            [tls_server.url, dead.url],
            tls=ca_ctx,
            tls_hostname="wrong.example",
            dont_randomize=True,
        )
    finally:
        dead.close()
    assert exc.__cause__ is not None


@pytest.mark.asyncio
async def test_reconnect_reports_tls_errors(tls_server: NatsServer) -> None:
    # retry_on_failed_connect: the client keeps trying in the background and reports why.
    errors: list[BaseException] = []
    nc = await jetstream.connect(
        f"tls://127.0.0.1:{tls_server.port}",
        retry_on_failed_connect=True,
        reconnect_time_wait=0.1,
        max_reconnect_attempts=2,
        error_cb=errors.append,
        connect_timeout=CONNECT_TIMEOUT,
    )
    try:
        async with asyncio.timeout(10):
            await nc.wait_closed()
    finally:
        await nc.close()
    assert isinstance(nc.last_error, NoServersError)
    assert "certificate verify failed" in str(nc.last_error)
    assert errors and errors[-1] is nc.last_error


# --------------------------------------------------------------------------- make_ssl_context


def test_make_ssl_context_defaults() -> None:
    ctx = make_ssl_context()
    assert ctx.verify_mode == ssl.CERT_REQUIRED
    assert ctx.check_hostname
    assert ctx.minimum_version >= ssl.TLSVersion.TLSv1_2


def test_make_ssl_context_no_verify() -> None:
    ctx = make_ssl_context(verify=False)
    assert ctx.verify_mode == ssl.CERT_NONE
    assert not ctx.check_hostname


@pytest.mark.asyncio
async def test_make_ssl_context_no_verify_connects(tls_server: NatsServer) -> None:
    async with jetstream.connect(
        f"tls://127.0.0.1:{tls_server.port}", tls=make_ssl_context(verify=False)
    ) as nc:
        await round_trip(nc)


def test_make_ssl_context_missing_files(tls_certs: CertPaths, tmp_path: Path) -> None:
    missing = str(tmp_path / "missing.pem")
    with pytest.raises(TlsError, match=r"missing\.pem"):
        make_ssl_context(ca_file=missing)
    with pytest.raises(TlsError, match=r"missing\.pem"):
        make_ssl_context(ca_file=tls_certs.ca_cert, cert_file=missing)
    with pytest.raises(TlsError, match=r"missing\.pem"):
        make_ssl_context(cert_file=tls_certs.client_cert, key_file=missing)


def test_make_ssl_context_bad_files(tls_certs: CertPaths, tmp_path: Path) -> None:
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    with pytest.raises(TlsError, match=r"junk\.pem"):
        make_ssl_context(ca_file=junk)
    with pytest.raises(TlsError, match=r"junk\.pem"):
        make_ssl_context(cert_file=junk)
    # A key that does not belong to the certificate.
    with pytest.raises(TlsError, match=r"server-key\.pem"):
        make_ssl_context(cert_file=tls_certs.client_cert, key_file=tls_certs.server_key)


def test_make_ssl_context_key_without_cert(tls_certs: CertPaths) -> None:
    with pytest.raises(ValueError, match="key_file"):
        make_ssl_context(key_file=tls_certs.client_key)
