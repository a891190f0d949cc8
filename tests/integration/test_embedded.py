"""jetstream.embedded against the real nats-server, spoken to over raw sockets.

These tests do not use the client: they check the harness every other test relies on.
"""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import sysconfig
import time
from pathlib import Path
from typing import Any

import pytest

from jetstream.__main__ import main
from jetstream.embedded import (
    ClusterOptions,
    EmbeddedServerError,
    NatsCluster,
    NatsServer,
    find_nats_server,
)
from jetstream.errors import NatsError
from jetstream.testing import server as embedded
from tests.certs import CertPaths

REPO_ROOT = Path(__file__).resolve().parents[2]


class RawConn:
    """A blocking NATS protocol connection, just enough to poke at a server."""

    def __init__(self, port: int, *, timeout: float = 5.0, sock: socket.socket | None = None):
        self.sock = sock or socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.settimeout(timeout)
        self.buf = b""
        self.info = self.read_info()
        self._inbox_ready = False

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawConn:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _fill(self) -> None:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError(f"server closed the connection; unread: {self.buf!r}")
        self.buf += chunk

    def line(self) -> bytes:
        while b"\r\n" not in self.buf:
            self._fill()
        line, _, self.buf = self.buf.partition(b"\r\n")
        return line

    def exact(self, n: int) -> bytes:
        while len(self.buf) < n + 2:
            self._fill()
        data, self.buf = self.buf[:n], self.buf[n + 2 :]
        return data

    def read_info(self) -> dict[str, Any]:
        line = self.line()
        assert line.startswith(b"INFO "), line
        info: dict[str, Any] = json.loads(line[5:])
        return info

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def connect(self, **options: Any) -> bytes:
        """CONNECT then PING; the first answer that is not +OK (PONG or -ERR ...)."""
        opts = {"verbose": False, "pedantic": False, "headers": True, "protocol": 1, **options}
        self.send(b"CONNECT " + json.dumps(opts).encode() + b"\r\nPING\r\n")
        while True:
            line = self.line()
            if line != b"+OK":
                return line

    def request(self, subject: str, payload: bytes) -> dict[str, Any]:
        """Publish with a reply inbox and decode the JSON answer."""
        if not self._inbox_ready:
            self.send(b"SUB _INBOX.raw 1\r\n")
            self._inbox_ready = True
        self.send(f"PUB {subject} _INBOX.raw {len(payload)}\r\n".encode() + payload + b"\r\n")
        while True:
            line = self.line()
            if line == b"PING":
                self.send(b"PONG\r\n")
            elif line.startswith(b"MSG "):
                size = int(line.split()[-1])
                answer: dict[str, Any] = json.loads(self.exact(size))
                return answer
            elif line.startswith(b"HMSG "):
                parts = line.split()
                block = self.exact(int(parts[-1]))
                raise AssertionError(f"status instead of an answer: {block!r}")
            elif line.startswith(b"-ERR"):
                raise AssertionError(line)


def info_of(port: int) -> dict[str, Any]:
    with RawConn(port) as conn:
        return conn.info


def refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1.0).close()
    except OSError:
        return True
    return False


def create_stream(conn: RawConn, name: str, subjects: list[str]) -> dict[str, Any]:
    body = json.dumps({"name": name, "subjects": subjects, "storage": "file"}).encode()
    return conn.request(f"$JS.API.STREAM.CREATE.{name}", body)


def stream_info(port: int, name: str) -> dict[str, Any]:
    with RawConn(port) as conn:
        assert conn.connect() == b"PONG"
        return conn.request(f"$JS.API.STREAM.INFO.{name}", b"")


# --------------------------------------------------------------------------- binary


def test_find_binary_prefers_the_env_var(monkeypatch: pytest.MonkeyPatch) -> None:
    real = find_nats_server()
    monkeypatch.setenv("NATS_SERVER_BIN", real)
    assert find_nats_server() == real
    monkeypatch.setenv("NATS_SERVER_BIN", "/nonexistent/nats-server")
    with pytest.raises(EmbeddedServerError, match="NATS_SERVER_BIN"):
        find_nats_server()


def test_missing_binary_names_what_was_tried(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NATS_SERVER_BIN", raising=False)
    monkeypatch.setattr(sys, "executable", "/nonexistent/bin/python")
    monkeypatch.setattr(sysconfig, "get_path", lambda name: "/nonexistent/scripts")
    monkeypatch.setenv("PATH", "/nonexistent/path")
    with pytest.raises(EmbeddedServerError) as info:
        NatsServer()
    assert isinstance(info.value, NatsError)
    message = str(info.value)
    for tried in ("NATS_SERVER_BIN", "/nonexistent/bin/nats-server", "PATH"):
        assert tried in message


# --------------------------------------------------------------------------- one server


def test_start_stop_close() -> None:
    server = NatsServer()
    assert not server.running and server.pid is None
    assert server.url == f"nats://127.0.0.1:{server.port}"
    server.start()
    try:
        assert server.running and server.pid
        assert info_of(server.port)["port"] == server.port
        assert server.monitor("healthz") == {"status": "ok"}
        server.stop()
        assert not server.running and server.pid is None
        assert server.returncode is not None
        assert refused(server.port)
        server.stop()  # stopping twice is fine
    finally:
        server.close()
    assert not Path(server.store_dir).exists()
    assert not Path(server.log_path).exists()
    with pytest.raises(EmbeddedServerError, match="closed"):
        server.start()


def test_info_has_jetstream_and_max_payload() -> None:
    with NatsServer(max_payload=4096, server_name="solo") as server:
        info = info_of(server.port)
        assert info["jetstream"] is True
        assert info["max_payload"] == 4096
        assert info["server_name"] == "solo"
        assert server.varz()["version"]
        assert not server.jsz().get("disabled")
        assert "Server is ready" in server.log_tail(200)


def test_without_jetstream() -> None:
    with NatsServer(jetstream=False) as server:
        assert not info_of(server.port).get("jetstream")
        assert server.jsz().get("disabled") is True


def test_given_store_dir_is_kept(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with NatsServer(store_dir=store) as server:
        assert server.store_dir == str(store)
    assert (store / "jetstream").is_dir()


@pytest.mark.parametrize("kind", ["user", "token", "nkey"])
def test_auth_config(kind: str) -> None:
    if kind == "user":
        server = NatsServer(user="alice", password="s3cret")
        good: dict[str, Any] = {"user": "alice", "pass": "s3cret"}
        bad: dict[str, Any] = {"user": "alice", "pass": "wrong"}
    elif kind == "token":
        server = NatsServer(token="tok-en")
        good, bad = {"auth_token": "tok-en"}, {"auth_token": "nope"}
    else:
        nkeys = pytest.importorskip("nkeys")
        seed = nkeys.encode_seed(os.urandom(32), nkeys.PREFIX_BYTE_USER)
        keypair = nkeys.from_seed(bytearray(seed))
        public = keypair.public_key.decode()
        server = NatsServer(nkeys=[public])
        good, bad = {"nkey": public}, {"nkey": public, "sig": "AAAA"}
    with server:
        with RawConn(server.port) as conn:
            assert conn.info["auth_required"] is True
            if kind == "nkey":
                sig = keypair.sign(conn.info["nonce"].encode())
                good["sig"] = base64.urlsafe_b64encode(sig).rstrip(b"=").decode()
            assert conn.connect(**good) == b"PONG"
        with RawConn(server.port) as conn:
            assert b"Authorization Violation" in conn.connect(**bad)


def test_start_failure_reports_the_log() -> None:
    server = NatsServer(extra_config="this is { not valid")
    try:
        with pytest.raises(EmbeddedServerError, match="exited with status") as info:
            server.start(timeout=5)
        assert server.log_path in str(info.value)
        assert not server.running
    finally:
        server.close()


def test_taken_port_is_replaced_on_first_start(monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = socket.socket()
    blocker.bind(("127.0.0.1", 0))
    blocker.listen()
    taken = blocker.getsockname()[1]
    real = embedded._free_ports
    calls: list[int] = []

    def first_taken(count: int) -> list[int]:
        calls.append(count)
        ports = real(count)
        return [taken, *ports[1:]] if len(calls) == 1 else ports

    monkeypatch.setattr(embedded, "_free_ports", first_taken)
    try:
        with NatsServer() as server:
            assert server.port != taken
            assert len(calls) == 2
            assert "address already in use" in server.log_tail(200)
    finally:
        blocker.close()


def test_restart_keeps_port_and_store() -> None:
    with NatsServer() as server:
        port, store = server.port, server.store_dir
        with RawConn(port) as conn:
            assert conn.connect() == b"PONG"
            created = create_stream(conn, "KEEP", ["keep.>"])
            assert created["config"]["name"] == "KEEP", created
            conn.send(b"PUB keep.1 5\r\nhello\r\nPING\r\n")
            assert conn.line() == b"PONG"
        before = sorted(p.name for p in Path(store).rglob("*"))
        assert "KEEP" in before

        server.restart()
        assert (server.port, server.store_dir) == (port, store)
        assert set(before) <= {p.name for p in Path(store).rglob("*")}
        info = stream_info(port, "KEEP")
        assert info["config"]["name"] == "KEEP", info

        server.kill()
        assert not server.running and refused(port)
        assert server.returncode == -signal.SIGKILL
        server.restart()
        assert server.port == port
        assert stream_info(port, "KEEP")["config"]["name"] == "KEEP"
        assert server.log_tail(500).count("--- jetstream.embedded:") == 3  # one per start


def test_pause_and_resume() -> None:
    with NatsServer() as server:
        server.pause()
        assert server.paused and server.running
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=0.3)
        try:
            with pytest.raises(TimeoutError):
                sock.recv(10)  # the kernel accepted; the frozen server says nothing
            server.resume()
            assert not server.paused
            sock.settimeout(5)
            with RawConn(server.port, sock=sock) as conn:
                assert conn.info["port"] == server.port
        finally:
            sock.close()
        server.pause()
        server.stop(grace=5)  # a paused server still stops gracefully
        assert server.returncode == 0


def test_lame_duck_tells_clients() -> None:
    with NatsServer(lame_duck_duration=30, lame_duck_grace_period=10) as server:
        with RawConn(server.port) as conn:
            assert conn.connect() == b"PONG"
            server.lame_duck()
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                line = conn.line()
                if line.startswith(b"INFO ") and json.loads(line[5:]).get("ldm"):
                    break
            else:
                pytest.fail("no INFO with ldm")
        server.stop(grace=5)
        assert not server.running


def test_lame_duck_without_clients_exits() -> None:
    with NatsServer() as server:
        # nats-server traps its signals in NewServer, before its logger is configured: a
        # server that logged "Starting nats-server" (start() waits for much later, /healthz)
        # takes SIGUSR2 into lame duck and never dies of it
        assert "Starting nats-server" in server.log_tail(200)
        # the readiness check's own TCP connection to the client port can still count as
        # a client for a moment: lame duck would then wait out its grace period for it
        deadline = time.monotonic() + 10
        while server.monitor("varz")["connections"] and time.monotonic() < deadline:
            time.sleep(0.02)
        assert server.monitor("varz")["connections"] == 0
        server.lame_duck()
        assert server.wait_exit(10) == 0
        assert 'Trapped "user defined signal 2" signal' in server.log_tail(200)
        assert not server.running
        with pytest.raises(EmbeddedServerError, match="not running"):
            server.pause()


def test_tls_start(tls_certs: CertPaths) -> None:
    with NatsServer(tls_cert=tls_certs.server_cert, tls_key=tls_certs.server_key) as server:
        assert info_of(server.port)["tls_required"] is True
    context = ssl.create_default_context(cafile=tls_certs.ca_cert)
    context.load_cert_chain(tls_certs.client_cert, tls_certs.client_key)
    with NatsServer(
        tls_cert=tls_certs.server_cert,
        tls_key=tls_certs.server_key,
        tls_ca=tls_certs.ca_cert,
        tls_verify=True,
        tls_first=True,
    ) as server:
        for host in ("127.0.0.1", "localhost"):
            raw = socket.create_connection(("127.0.0.1", server.port), timeout=5)
            with context.wrap_socket(raw, server_hostname=host) as tls:
                conn = RawConn(server.port, sock=tls)
                assert conn.info["tls_required"] is True
                assert conn.connect() == b"PONG"


def test_options_are_checked() -> None:
    with pytest.raises(ValueError, match="password given without user"):
        NatsServer(password="x")
    with pytest.raises(ValueError, match="token cannot be combined with user/password"):
        NatsServer(token="t", user="u")
    with pytest.raises(ValueError, match="tls_cert and tls_key go together"):
        NatsServer(tls_cert="c.pem")
    with pytest.raises(ValueError, match="tls_first need tls_cert and tls_key"):
        NatsServer(tls_first=True)


def test_config_text() -> None:
    server = NatsServer(
        domain="edge",
        lame_duck_duration=30,
        cluster=ClusterOptions(name="c", routes=["nats-route://127.0.0.1:1"]),
        server_name='we"ird',
    )
    try:
        text = server.render_config()
        assert 'domain: "edge"' in text
        assert 'lame_duck_duration: "30000ms"' in text
        assert f'listen: "127.0.0.1:{server.cluster_port}"' in text
        assert 'server_name: "we\\"ird"' in text
    finally:
        server.close()


# --------------------------------------------------------------------------- fixtures


def test_fixture_server(nats_server: NatsServer, nats_url: str) -> None:
    assert nats_server.running
    assert nats_url == nats_server.url
    assert info_of(nats_server.port)["jetstream"] is True


def test_module_fixture_server(module_nats_server: NatsServer, nats_server: NatsServer) -> None:
    # the module's server answers at its URL, with JetStream, and is not the test's own
    info = info_of(module_nats_server.port)
    assert info["jetstream"] is True
    assert module_nats_server.url == f"nats://127.0.0.1:{info['port']}"
    assert info["server_id"] != info_of(nats_server.port)["server_id"]


@pytest.mark.asyncio
async def test_async_lifecycle() -> None:
    async with NatsServer() as server:
        varz = await server.monitor_async("varz")
        assert varz["port"] == server.port
        port, pid = server.port, server.pid
        await server.restart_async()
        assert server.port == port and server.pid != pid
        await server.stop_async()
        assert not server.running
        await server.start_async()
        assert (await server.monitor_async("healthz"))["status"] == "ok"
    assert not server.running


# --------------------------------------------------------------------------- cluster


@pytest.mark.slow
def test_cluster_elects_and_survives_a_kill() -> None:
    with NatsCluster(3) as cluster:
        assert [s.server_name for s in cluster.servers] == ["n1", "n2", "n3"]
        assert len(set(cluster.urls)) == 3
        leader = cluster.leader_name()
        assert leader in {"n1", "n2", "n3"}
        for server in cluster.servers:
            meta = server.jsz()["meta_cluster"]
            assert meta["cluster_size"] == 3 and meta["leader"] == leader
        # ready for R3 assets: the leader counts both other servers as current peers
        meta_leader = cluster.leader()
        assert meta_leader is not None
        peers = meta_leader.jsz()["meta_cluster"]["replicas"]
        assert sorted(p["name"] for p in peers if p["current"]) == sorted(
            {"n1", "n2", "n3"} - {leader}
        )
        assert info_of(cluster[0].port)["jetstream"] is True

        victim = next(i for i, s in enumerate(cluster.servers) if s.server_name == leader)
        cluster.kill(victim)
        new_leader = cluster.wait_for_leader()
        assert new_leader != leader
        cluster.restart(victim)
        # back as a current peer of the meta leader when restart() returns (R3 placeable)
        meta_leader = cluster.leader()
        assert meta_leader is not None and meta_leader.server_name == new_leader
        peers = meta_leader.jsz()["meta_cluster"]["replicas"]
        assert leader in [p["name"] for p in peers if p["current"] and not p.get("offline")]
        assert cluster.wait_for_leader() == new_leader
        assert cluster[victim].monitor("healthz")["status"] == "ok"
    assert not any(s.running for s in cluster.servers)


# --------------------------------------------------------------------------- command line


def test_cli_server_runs_until_sigint(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "jetstream", "server", "--store-dir", str(tmp_path / "js")],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline()]
        match = re.search(r"nats://127\.0\.0\.1:(\d+)", lines[0])
        assert match, (lines, proc.stderr.read() if proc.poll() is not None else "")
        while "Ctrl-C" not in lines[-1]:
            lines.append(proc.stdout.readline())
            assert lines[-1], lines
        port = int(match.group(1))
        assert info_of(port)["jetstream"] is True
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=20)
        assert proc.returncode == 0, err
        assert "stopping" in out
        assert refused(port)
        assert (tmp_path / "js" / "jetstream").is_dir()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def test_cli_demo(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "nats://127.0.0.1:" in out
    assert "JetStream enabled" in out
    assert re.search(r"nats-server \d+\.\d+\.\d+", out)


def test_cli_requires_a_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main([])
