"""``ws://`` and ``wss://`` against real nats-servers with a ``websocket {}`` listener.

Everything a TCP connection does, over WebSocket: core pub/sub/request, JetStream,
KeyValue, ObjectStore, reconnect, discovery of a cluster's WebSocket URLs, TLS
verification, the auth methods, compression, and nats-py over WebSocket on the
other end. Bad input comes back typed and at once: ``ws://`` to a NATS client port,
an HTTP server that refuses the upgrade, a listener that never answers (the
connect timeout), and ``ws://`` without the ``ws`` extra.
"""

from __future__ import annotations

import asyncio
import hashlib
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import nats
import pytest
import pytest_asyncio

import jetstream
from jetstream import NatsError, NoServersError, SlowConsumerError, StreamConfig, TlsError
from jetstream.core import WebSocketError, WebSocketUnavailableError
from jetstream.core.auth import nkey_public_key
from jetstream.core.tls import make_ssl_context
from jetstream.embedded import NatsCluster, NatsServer
from tests.certs import CertPaths
from tests.jwt_util import OperatorSetup, new_user, operator_setup, write_creds

pytestmark = pytest.mark.asyncio
#: on asyncio's loop and on uvloop's, whose transports differ (no read size to set)
BOTH_LOOPS = True

FAST = {"reconnect_time_wait": 0.1, "reconnect_jitter": 0.05, "connect_timeout": 2.0}
T = 10.0  # bound of every wait


async def wait_for(pred: Any, timeout: float = T, step: float = 0.02) -> None:
    async with asyncio.timeout(timeout):
        while not pred():
            await asyncio.sleep(step)


def compressed(nc: jetstream.Client) -> bool:
    """Whether the connection's WebSocket agreed on permessage-deflate."""
    transport: Any = nc._conn.transport if nc._conn is not None else None
    return bool(transport._link.compressed)


@pytest.fixture(scope="module")
def ws_server() -> Iterator[NatsServer]:
    """JetStream, and a WebSocket listener that offers compression."""
    with NatsServer(websocket=True, websocket_config="compression: true") as server:
        yield server


@pytest_asyncio.fixture
async def nc(ws_server: NatsServer) -> AsyncIterator[jetstream.Client]:
    async with jetstream.connect(ws_server.ws_url) as client:
        yield client


# --------------------------------------------------------------------------- core


async def test_pub_sub_request_over_websocket(nc: jetstream.Client, ws_server: NatsServer) -> None:
    assert nc.connected_url == ws_server.ws_url
    sub = await nc.subscribe("ws.>")
    await nc.flush()
    # many ops in one message, and ops that span messages (a payload larger than a read)
    for i in range(200):
        await nc.publish(f"ws.{i}", str(i).encode(), headers={"n": str(i)} if i % 2 else None)
    big = bytes(range(256)) * 4096  # 1 MiB
    await nc.publish("ws.big", big)
    got = [await sub.next_msg(timeout=T) for _ in range(201)]
    assert [m.data for m in got[:200]] == [str(i).encode() for i in range(200)]
    assert got[1].headers == {"n": "1"}
    assert got[200].data == big

    async def echo(msg: jetstream.Msg) -> None:
        await msg.respond(msg.data[::-1])

    await nc.subscribe("ws.echo", cb=echo)
    reply = await nc.request("ws.echo", b"abc", timeout=T)
    assert reply.data == b"cba"
    # the server counts it among its clients, and TCP clients see its messages
    async with jetstream.connect(ws_server.url) as tcp:
        tsub = await tcp.subscribe("ws.to.tcp")
        await tcp.flush()
        await nc.publish("ws.to.tcp", b"across")
        assert (await tsub.next_msg(timeout=T)).data == b"across"


async def test_slow_consumer_over_websocket(ws_server: NatsServer) -> None:
    errors: list[BaseException] = []
    async with jetstream.connect(ws_server.ws_url, error_cb=errors.append) as nc:
        sub = await nc.subscribe("ws.fast", pending_msgs_limit=100)
        await nc.flush()
        for _ in range(1000):
            await nc.publish("ws.fast", b"x" * 100)
        await nc.flush()
        assert sub.pending_msgs == 100
        assert sub.dropped == 900
        assert len([e for e in errors if isinstance(e, SlowConsumerError)]) == 1
        assert nc.is_connected


async def test_keepalive_pings_over_websocket() -> None:
    """PONGs come back through the WebSocket (else the link would be dropped as stale
    after two intervals), and a server that stops answering is detected by them."""
    async with NatsServer(jetstream=False, websocket=True) as server:
        lost = asyncio.Event()
        async with jetstream.connect(
            server.ws_url,
            ping_interval=0.05,
            max_outstanding_pings=2,
            disconnected_cb=lost.set,
            max_reconnect_attempts=-1,
            **FAST,
        ) as nc:
            await asyncio.sleep(0.5)  # ten intervals
            assert not lost.is_set()
            assert nc.is_connected
            server.pause()
            try:
                async with asyncio.timeout(T):
                    await lost.wait()
            finally:
                server.resume()


# --------------------------------------------------------------------------- JetStream


async def test_jetstream_publish_and_consume(nc: jetstream.Client) -> None:
    js = nc.jetstream()
    stream = await js.create_stream(StreamConfig(name="WS", subjects=["wsjs.>"]))
    try:
        for i in range(50):
            ack = await js.publish(f"wsjs.{i}", f"m{i}".encode(), msg_id=f"id-{i}")
            assert ack.seq == i + 1
        cons = await stream.create_or_update_consumer(
            jetstream.ConsumerConfig(durable_name="C", ack_policy=jetstream.AckPolicy.EXPLICIT)
        )
        seen: list[bytes] = []
        while len(seen) < 50:
            for msg in await cons.fetch(50 - len(seen), expires=T):
                seen.append(msg.data)
                await msg.ack()
        assert seen == [f"m{i}".encode() for i in range(50)]
        info = await cons.info()
        assert info.num_pending == 0
    finally:
        await js.delete_stream("WS")


async def test_key_value_and_object_store(nc: jetstream.Client) -> None:
    js = nc.jetstream()
    kv = await js.create_key_value(bucket="wskv", history=3)
    obj = await js.create_object_store(bucket="wsobj")
    try:
        rev = await kv.put("a.b", b"1")
        await kv.update("a.b", b"2", last=rev)
        assert (await kv.get("a.b")).value == b"2"
        assert [e.value for e in await kv.history("a.b")] == [b"1", b"2"]
        data = hashlib.sha256(b"seed").digest() * (5 * 1024 * 1024 // 32)  # 5 MiB
        info = await obj.put("five", data)
        assert info.size == len(data)
        assert await obj.get_bytes("five") == data
    finally:
        await js.delete_key_value("wskv")
        await js.delete_object_store("wsobj")


# --------------------------------------------------------------------------- reconnect


async def test_reconnect_after_restart() -> None:
    async with NatsServer(jetstream=False, websocket=True) as server:
        reconnected = asyncio.Event()
        async with jetstream.connect(
            server.ws_url, max_reconnect_attempts=-1, reconnected_cb=reconnected.set, **FAST
        ) as nc:
            sub = await nc.subscribe("ws.again")
            await nc.flush()
            await server.restart_async()
            async with asyncio.timeout(T):
                await reconnected.wait()
            assert nc.connected_url == server.ws_url
            await nc.publish("ws.again", b"back")  # the subscription was made again
            assert (await sub.next_msg(timeout=T)).data == b"back"
            assert nc.stats.reconnects == 1


async def test_mixed_server_list() -> None:
    """A pool of ws:// and nats:// servers: a dead one of each kind is passed over."""
    dead = NatsServer(jetstream=False, websocket=True)  # never started
    async with NatsServer(jetstream=False, websocket=True) as server:
        for servers in ([dead.url, server.ws_url], [dead.ws_url, server.url]):
            async with jetstream.connect(servers, dont_randomize=True, **FAST) as nc:
                assert nc.connected_url == servers[1]
                await nc.flush()
    dead.cleanup()


async def test_cluster_announces_websocket_urls() -> None:
    """Discovered servers are reached over WebSocket; a node in lame duck mode is left
    while it still runs, a killed one is failed over."""
    with NatsCluster(3, websocket=True, lame_duck_grace_period=1) as cluster:
        ws_urls = sorted(s.ws_url for s in cluster.servers)
        first = cluster.servers[0]
        lame = asyncio.Event()
        async with jetstream.connect(
            first.ws_url,
            dont_randomize=True,
            max_reconnect_attempts=-1,
            lame_duck_cb=lame.set,
            **FAST,
        ) as nc:
            await wait_for(lambda: len(nc.servers) == 3)
            assert sorted(nc.servers) == ws_urls
            first.lame_duck()
            async with asyncio.timeout(T):
                await lame.wait()
            await wait_for(lambda: nc.is_connected and nc.connected_url != first.ws_url)
            assert first.running  # moved while the old server was still in lame duck
            second = nc.connected_url
            assert second in ws_urls
            await asyncio.to_thread(cluster.kill, [s.ws_url for s in cluster].index(second))
            await wait_for(
                lambda: nc.is_connected and nc.connected_url not in (first.ws_url, second)
            )
            assert nc.connected_url in ws_urls
            await nc.flush()


# --------------------------------------------------------------------------- TLS


@pytest.fixture(scope="module")
def wss_server(tls_certs: CertPaths) -> Iterator[NatsServer]:
    with NatsServer(
        jetstream=False,
        websocket=True,
        tls_cert=tls_certs.server_cert,
        tls_key=tls_certs.server_key,
    ) as server:
        yield server


async def test_wss_with_the_test_ca(wss_server: NatsServer, tls_certs: CertPaths) -> None:
    assert wss_server.ws_url.startswith("wss://")
    ctx = make_ssl_context(ca_file=tls_certs.ca_cert)
    async with jetstream.connect(wss_server.ws_url, tls=ctx) as nc:
        assert nc._conn is not None
        assert nc._conn.transport.get_extra_info("ssl_object") is not None
        sub = await nc.subscribe("wss.x")
        await nc.publish("wss.x", b"secret")
        assert (await sub.next_msg(timeout=T)).data == b"secret"


async def test_the_wrong_scheme_says_so(wss_server: NatsServer, ws_server: NatsServer) -> None:
    """ws:// to a TLS listener, wss:// to a plain one: refused at once, saying why."""
    plain_to_tls = wss_server.ws_url.replace("wss://", "ws://")
    with pytest.raises(NoServersError, match=r"HTTP status 400: .*HTTPS server"):
        await jetstream.connect(plain_to_tls, allow_reconnect=False, **FAST)
    tls_to_plain = ws_server.ws_url.replace("ws://", "wss://")
    with pytest.raises(TlsError, match=r"TLS with wss://.* without TLS: a listener for ws://"):
        await jetstream.connect(tls_to_plain, allow_reconnect=False, **FAST)


async def test_wss_refused_without_the_ca(wss_server: NatsServer) -> None:
    t0 = time.monotonic()
    with pytest.raises(TlsError, match=r"certificate verify failed.*make_ssl_context"):
        await jetstream.connect(
            wss_server.ws_url, allow_reconnect=False, **{**FAST, "connect_timeout": 10.0}
        )
    assert time.monotonic() - t0 < 5.0  # at once, not at the connect timeout (10 s)


# --------------------------------------------------------------------------- auth


@pytest.fixture(scope="module")
def user_seed() -> bytes:
    return new_user().seed


@pytest.fixture(scope="module")
def users_server(user_seed: bytes) -> Iterator[NatsServer]:
    """user/password and an nkey user, over WebSocket (the server's own auth block)."""
    with NatsServer(
        jetstream=False,
        websocket=True,
        user="ws-user",
        password="ws-pass",
        nkeys=[nkey_public_key(user_seed)],
    ) as server:
        yield server


async def round_trip(nc: jetstream.Client) -> None:
    sub = await nc.subscribe("auth.ws")
    await nc.publish("auth.ws", b"in")
    assert (await sub.next_msg(timeout=T)).data == b"in"


async def test_user_password_and_nkey(users_server: NatsServer, user_seed: bytes) -> None:
    url = users_server.ws_url
    async with jetstream.connect(url, user="ws-user", password="ws-pass") as nc:
        await round_trip(nc)
    async with jetstream.connect(url.replace("ws://", "ws://ws-user:ws-pass@")) as nc:
        await round_trip(nc)
    async with jetstream.connect(url, nkeys_seed=user_seed) as nc:
        await round_trip(nc)
    with pytest.raises(jetstream.AuthorizationError, match="Authorization Violation"):
        await jetstream.connect(url, user="ws-user", password="wrong", allow_reconnect=False)


async def test_token() -> None:
    async with NatsServer(jetstream=False, websocket=True, token="ws-token") as server:
        async with jetstream.connect(server.ws_url, token="ws-token") as nc:
            await round_trip(nc)
        with pytest.raises(jetstream.AuthorizationError, match="Authorization Violation"):
            await jetstream.connect(server.ws_url, token="nope", allow_reconnect=False)


@pytest.fixture(scope="module")
def op() -> OperatorSetup:
    return operator_setup()


async def test_creds(op: OperatorSetup, tmp_path: Path) -> None:
    creds = write_creds(tmp_path / "user.creds", op.user_jwt, op.user.seed)
    async with (
        NatsServer(jetstream=False, websocket=True, auth_config=op.server_config()) as server,
        jetstream.connect(server.ws_url, creds=creds) as nc,
    ):
        await round_trip(nc)


# --------------------------------------------------------------------------- compression


async def test_compression_on_and_off(ws_server: NatsServer) -> None:
    """Asked for, the bytes on the wire shrink both ways (counted by a relay); not asked
    for, they are the payload's and more."""
    payload = b"compressible " * 20_000  # 260 kB
    for asked in (True, False):
        counted: dict[str, int] = {}
        relay = await _relay(ws_server.ws_port or 0, counted=counted)
        async with relay:
            port = relay.sockets[0].getsockname()[1]
            url = f"ws://127.0.0.1:{port}"
            async with jetstream.connect(url, ws_compression=asked) as nc:
                assert compressed(nc) is asked
                sub = await nc.subscribe("ws.zip")
                await nc.publish("ws.zip", payload)
                assert (await sub.next_msg(timeout=T)).data == payload
        if asked:
            assert counted["up"] < len(payload) // 10 and counted["down"] < len(payload) // 10
        else:
            assert counted["up"] > len(payload) and counted["down"] > len(payload)
    # a server without compression: asked for, not used, and it works
    async with (
        NatsServer(jetstream=False, websocket=True) as plain,
        jetstream.connect(plain.ws_url, ws_compression=True) as nc,
    ):
        assert not compressed(nc)
        await nc.flush()


async def _relay(
    target_port: int, *, drop_header: bytes | None = None, counted: dict[str, int] | None = None
) -> asyncio.Server:
    """A TCP relay on loopback to ``target_port`` that passes every byte but the lines
    naming ``drop_header`` in the HTTP request and answer (a proxy that drops a header),
    counting the bytes each way after them into ``counted`` ("up", "down")."""
    counts = counted if counted is not None else {}

    def dropped(head: bytes) -> bytes:
        if drop_header is None:
            return head
        lines = head.split(b"\r\n")
        return b"\r\n".join(x for x in lines if not x.lower().startswith(drop_header))

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, way: str) -> None:
        try:
            while data := await reader.read(65536):
                counts[way] = counts.get(way, 0) + len(data)
                writer.write(data)
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", target_port)
        up_writer.write(dropped(await reader.readuntil(b"\r\n\r\n")))
        writer.write(dropped(await up_reader.readuntil(b"\r\n\r\n")))
        await asyncio.gather(pipe(reader, up_writer, "up"), pipe(up_reader, writer, "down"))

    return await asyncio.start_server(handle, "127.0.0.1", 0)


async def test_masked_frames_where_the_answer_does_not_allow_unmasked(
    ws_server: NatsServer,
) -> None:
    """Our frames go unmasked only where the server's answer says it takes them so
    (nats-server's Nats-No-Masking); through a proxy that drops that header, masked."""
    relay = await _relay(ws_server.ws_port or 0, drop_header=b"nats-no-masking")
    async with relay:
        port = relay.sockets[0].getsockname()[1]
        for asked in (False, True):
            async with jetstream.connect(f"ws://127.0.0.1:{port}", ws_compression=asked) as nc:
                link: Any = nc._conn.transport._link if nc._conn is not None else None
                assert link.unmasked is False and link.compressed is asked
                sub = await nc.subscribe("ws.masked")
                payload = b"masked " * 30_000
                await nc.publish("ws.masked", payload)
                assert (await sub.next_msg(timeout=T)).data == payload
    async with jetstream.connect(ws_server.ws_url) as nc:
        link = nc._conn.transport._link if nc._conn is not None else None
        assert link.unmasked is True  # straight to nats-server: unmasked
    # a user's Nats-No-Masking: false keeps them masked
    headers = {"Nats-No-Masking": "false"}
    async with jetstream.connect(ws_server.ws_url, ws_headers=headers) as nc:
        link = nc._conn.transport._link if nc._conn is not None else None
        assert link.unmasked is False
        sub = await nc.subscribe("ws.masked")
        await nc.publish("ws.masked", b"m" * 100_000)
        assert (await sub.next_msg(timeout=T)).data == b"m" * 100_000


# --------------------------------------------------------------------------- nats-py


# nats-py hands aiohttp its connect timeout as a float, which aiohttp 3.12+ deprecates
@pytest.mark.filterwarnings("ignore:parameter 'timeout' of type 'float':DeprecationWarning")
async def test_nats_py_over_websocket(nc: jetstream.Client, ws_server: NatsServer) -> None:
    theirs = await nats.connect(ws_server.ws_url, connect_timeout=T, allow_reconnect=False)
    try:

        async def answer(msg: Any) -> None:
            await msg.respond(b"py:" + msg.data)

        await theirs.subscribe("interop.ws", cb=answer)
        tsub = await theirs.subscribe("interop.to.py")
        await theirs.flush()
        reply = await nc.request("interop.ws", b"hi", timeout=T)
        assert reply.data == b"py:hi"
        await nc.publish("interop.to.py", b"x" * 70_000, headers={"k": "v"})
        got = await tsub.next_msg(timeout=T)
        assert got.data == b"x" * 70_000
        assert got.headers == {"k": "v"}
        ours = await nc.subscribe("interop.from.py")
        await nc.flush()
        await theirs.publish("interop.from.py", b"from nats-py")
        await theirs.flush()
        assert (await ours.next_msg(timeout=T)).data == b"from nats-py"
    finally:
        await theirs.close()


# --------------------------------------------------------------------------- bad input


async def test_ws_to_a_nats_client_port_says_so(ws_server: NatsServer) -> None:
    url = ws_server.url.replace("nats://", "ws://")
    t0 = time.monotonic()
    with pytest.raises(NoServersError, match="not a WebSocket listener") as info:
        await jetstream.connect(url, allow_reconnect=False, **{**FAST, "connect_timeout": 10.0})
    assert isinstance(info.value.__cause__, WebSocketError)
    assert time.monotonic() - t0 < 5.0  # at once, not at the connect timeout (10 s)


async def _http_server(
    answer: bytes, requests: list[bytes], ended: asyncio.Event | None = None
) -> asyncio.Server:
    """A plain HTTP server on loopback: records each request head, sends ``answer``
    (nothing at all when it is empty) and keeps the socket until the peer closes it
    (then sets ``ended``)."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            requests.append(await reader.readuntil(b"\r\n\r\n"))
            if answer:
                writer.write(answer)
                await writer.drain()
            await reader.read()
            if ended is not None:
                ended.set()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    return await asyncio.start_server(handle, "127.0.0.1", 0)


async def test_refused_upgrade_sends_path_and_headers_and_says_why() -> None:
    requests: list[bytes] = []
    answer = b"HTTP/1.1 403 Forbidden\r\nContent-Length: 9\r\nConnection: close\r\n\r\nforbidden"
    server = await _http_server(answer, requests)
    async with server:
        port = server.sockets[0].getsockname()[1]
        with pytest.raises(
            NoServersError, match=r"refused .*'/nats/a\?b=1'.* 403: 'forbidden'"
        ) as info:
            await jetstream.connect(
                f"ws://127.0.0.1:{port}/nats/a?b=1",
                ws_headers={"Authorization": "Bearer t0k3n", "X-Extra": ["1", "2"]},
                allow_reconnect=False,
                **FAST,
            )
    assert isinstance(info.value.__cause__, WebSocketError)
    head = requests[0].decode()
    assert head.startswith("GET /nats/a?b=1 HTTP/1.1\r\n")
    assert f"host: 127.0.0.1:{port}\r\n" in head.lower()
    assert "Authorization: Bearer t0k3n\r\n" in head
    assert head.count("X-Extra: ") == 2


async def test_a_listener_that_never_answers_times_out() -> None:
    requests: list[bytes] = []
    server = await _http_server(b"", requests)
    async with server:
        port = server.sockets[0].getsockname()[1]
        t0 = time.monotonic()
        with pytest.raises(NoServersError, match=r"did not complete within 0\.5s") as info:
            await jetstream.connect(
                f"ws://127.0.0.1:{port}", allow_reconnect=False, connect_timeout=0.5
            )
        assert isinstance(info.value.__cause__, jetstream.TimeoutError)
        assert time.monotonic() - t0 < 0.5 + 4.0  # its timeout, with room for a loaded machine
        assert len(requests) == 1


async def test_cancelling_a_connect_during_the_upgrade_leaves_nothing() -> None:
    """Cancelled while the upgrade waits for its answer: the socket is closed (the
    listener sees its end) and no task is left (the suite's leak check)."""
    requests: list[bytes] = []
    ended = asyncio.Event()
    server = await _http_server(b"", requests, ended)
    async with server:
        port = server.sockets[0].getsockname()[1]
        task = asyncio.ensure_future(jetstream.connect(f"ws://127.0.0.1:{port}", **FAST))
        await wait_for(lambda: requests)  # the upgrade request arrived
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        async with asyncio.timeout(T):
            await ended.wait()
        assert requests[0].startswith(b"GET / HTTP/1.1\r\n")


async def test_bad_ws_headers_are_refused_before_connecting() -> None:
    with pytest.raises(ValueError, match="set by the WebSocket upgrade itself"):
        jetstream.connect("ws://127.0.0.1:1", ws_headers={"Upgrade": "h2c"})
    with pytest.raises(ValueError, match="one-line str"):
        jetstream.connect("ws://127.0.0.1:1", ws_headers={"X-A": "a\r\nB: c"})


_LOADED = """
import asyncio, sys
import jetstream

async def main():
    async with jetstream.connect(sys.argv[1]) as nc:
        await nc.flush()

asyncio.run(main())
print(*(m in sys.modules for m in ("jetstream.core._wslink", "wsproto", "h11")))
"""


async def test_tcp_loads_nothing_of_websocket(ws_server: NatsServer) -> None:
    """A client over TCP imports neither the WebSocket layer nor its packages; one
    over WebSocket imports them when it connects."""
    for url, expected in (
        (ws_server.url, "False False False"),
        (ws_server.ws_url, "True True True"),
    ):
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", _LOADED, url, stdout=asyncio.subprocess.PIPE
        )
        async with asyncio.timeout(30):
            out, _ = await proc.communicate()
        assert proc.returncode == 0
        assert out.decode().strip() == expected, url


async def test_ws_without_the_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "wsproto", None)  # as if it were not installed
    with pytest.raises(WebSocketUnavailableError, match=r"need wsproto.*pip install wsproto"):
        jetstream.connect("wss://127.0.0.1:1")
    assert issubclass(WebSocketUnavailableError, ImportError)
    assert issubclass(WebSocketUnavailableError, NatsError)
    jetstream.connect("nats://127.0.0.1:1")  # TCP needs nothing of it
