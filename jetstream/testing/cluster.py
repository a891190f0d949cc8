"""``NatsCluster``: several embedded nats-servers routed together on loopback.

Re-exported by ``jetstream.testing`` (and ``jetstream.embedded``); see ``NatsServer``
(``server.py``) for one server.
"""

from __future__ import annotations

import asyncio
import http.client
import time
from typing import Any, Self

from ._support import (
    _START_ATTEMPTS,
    LOOPBACK,
    ClusterOptions,
    EmbeddedServerError,
    _free_ports,
    _PortInUseError,
)
from .server import NatsServer

__all__ = ["NatsCluster"]


class NatsCluster:
    """``size`` JetStream servers on 127.0.0.1, routed to each other, named n1..nN.

    Each server has its own client, route and monitoring ports and its own store directory.
    ``start()`` returns once every server is ready and all agree on a JetStream meta leader.

    Args:
        size: number of servers (3 keeps a quorum when one is lost).
        name: the cluster name.
        start_timeout: default seconds for ``start()``, ``restart()``, ``wait_for_leader()``.
        **server_options: passed to every ``NatsServer`` (``max_payload``, ``extra_config``,
            ...), but not ``port``, ``http_port``, ``server_name``, ``cluster``, ``store_dir``.
    """

    def __init__(
        self,
        size: int = 3,
        *,
        name: str = "jetstream-cluster",
        start_timeout: float = 30.0,
        **server_options: Any,
    ) -> None:
        if size < 1:
            raise ValueError("a cluster needs at least one server")
        reserved = {"port", "http_port", "server_name", "cluster", "store_dir"}
        if reserved & server_options.keys():
            raise ValueError(f"NatsCluster chooses {sorted(reserved & server_options.keys())}")
        self.size, self.name, self.start_timeout = size, name, start_timeout
        self._server_options = server_options
        self.servers: list[NatsServer] = self._build()

    def _build(self) -> list[NatsServer]:
        n = self.size
        ports = _free_ports(3 * n)
        client, route, http = ports[:n], ports[n : 2 * n], ports[2 * n :]
        servers: list[NatsServer] = []
        try:
            for i in range(n):
                peers = [f"nats-route://{LOOPBACK}:{route[j]}" for j in range(n) if j != i]
                options = ClusterOptions(name=self.name, port=route[i], routes=peers)
                servers.append(
                    NatsServer(
                        port=client[i],
                        http_port=http[i],
                        server_name=f"n{i + 1}",
                        cluster=options,
                        **self._server_options,
                    )
                )
        except BaseException:
            for server in servers:
                server.close()
            raise
        return servers

    def __repr__(self) -> str:
        up = sum(s.running for s in self.servers)
        return f"<NatsCluster {self.name} {up}/{self.size} running>"

    @property
    def urls(self) -> list[str]:
        """The client URLs of all servers, n1..nN."""
        return [s.url for s in self.servers]

    def __getitem__(self, i: int) -> NatsServer:
        return self.servers[i]

    def __len__(self) -> int:
        return len(self.servers)

    def _launch_all(self) -> None:
        # Every process first: a node's /healthz waits for a meta leader, which needs peers.
        for server in self.servers:
            server._launch()

    def _start_failed(self, exc: BaseException, attempt: int) -> None:
        self.kill_all()
        if not isinstance(exc, _PortInUseError) or attempt + 1 >= _START_ATTEMPTS:
            raise exc
        for server in self.servers:  # the peers know each other's ports: all new ones
            server.close()
        self.servers = self._build()

    def start(self, timeout: float | None = None) -> Self:
        """Start every server; wait until each is ready and they agree on a meta leader
        that counts every other server as a current peer (so R3 assets can be placed).

        Raises:
            EmbeddedServerError: a server failed, or no leader after ``timeout`` seconds
                (default ``start_timeout``).
        """
        timeout = self.start_timeout if timeout is None else timeout
        for attempt in range(_START_ATTEMPTS):
            try:
                self._launch_all()
                for server in self.servers:
                    server._wait_ready(timeout)
                self.wait_for_leader(timeout)
                return self
            except BaseException as exc:
                self._start_failed(exc, attempt)
        raise AssertionError("unreachable")  # pragma: no cover

    async def start_async(self, timeout: float | None = None) -> Self:
        """``start()`` without blocking the event loop."""
        timeout = self.start_timeout if timeout is None else timeout
        for attempt in range(_START_ATTEMPTS):
            try:
                self._launch_all()
                for server in self.servers:
                    await server._wait_ready_async(timeout)
                await self.wait_for_leader_async(timeout)
                return self
            except BaseException as exc:
                self._start_failed(exc, attempt)
        raise AssertionError("unreachable")  # pragma: no cover

    def _leader_check(self) -> tuple[str | None, str]:
        """(leader, '') when the live servers agree on a live leader that counts every
        other live server as a current peer, else (None, why not)."""
        alive = {str(s.server_name): s for s in self.servers if s.running and not s.paused}
        seen: dict[str, str] = {}
        for name, server in alive.items():
            try:
                seen[name] = str((server.jsz().get("meta_cluster") or {}).get("leader") or "")
            except (OSError, ValueError, http.client.HTTPException) as exc:
                return None, f"{name}: /jsz failed: {exc}"
        leaders = set(seen.values())
        if len(leaders) != 1 or (leader := leaders.pop()) not in alive:
            return None, f"meta leader as each live node sees it: {seen}"
        # The leader places replicated assets only on peers it counts as online: until it
        # has heard from every live one, an R3 stream may be refused ("peer offline").
        try:
            meta = alive[leader].jsz().get("meta_cluster") or {}
        except (OSError, ValueError, http.client.HTTPException) as exc:
            return None, f"{leader}: /jsz failed: {exc}"
        peers = {
            str(r.get("name")): bool(r.get("current")) and not r.get("offline")
            for r in meta.get("replicas") or []
        }
        waiting = sorted(n for n in alive if n != leader and not peers.get(n))
        if waiting:
            return None, f"meta leader {leader} does not count {waiting} as current: {peers}"
        return leader, ""

    def _no_leader(self, timeout: float, why: str) -> EmbeddedServerError:
        tails = "".join(f"\n--- {s.server_name} log ---\n{s.log_tail(15)}" for s in self.servers)
        return EmbeddedServerError(
            f"no agreed JetStream meta leader after {timeout:g} s: {why}{tails}"
        )

    def wait_for_leader(self, timeout: float | None = None) -> str:
        """Wait until every live server names the same live meta leader, which counts
        every other live server as a current peer; its name.

        Raises:
            EmbeddedServerError: no agreement after ``timeout`` seconds (default
                ``start_timeout``); the message has what each node sees and log tails.
        """
        timeout = self.start_timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while True:
            leader, why = self._leader_check()
            if leader is not None:
                return leader
            if time.monotonic() >= deadline:
                raise self._no_leader(timeout, why)
            time.sleep(0.1)

    async def wait_for_leader_async(self, timeout: float | None = None) -> str:
        """``wait_for_leader()`` without blocking the event loop."""
        timeout = self.start_timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while True:
            leader, why = await asyncio.to_thread(self._leader_check)
            if leader is not None:
                return leader
            if time.monotonic() >= deadline:
                raise self._no_leader(timeout, why)
            await asyncio.sleep(0.1)

    def leader_name(self) -> str | None:
        """The meta leader the live servers agree on right now, or None."""
        return self._leader_check()[0]

    def leader(self) -> NatsServer | None:
        """The server that is the meta leader right now, or None."""
        name = self.leader_name()
        return next((s for s in self.servers if s.server_name == name), None)

    def kill(self, i: int) -> None:
        """SIGKILL server ``i`` (0-based); its ports and store are kept."""
        self.servers[i].kill()

    def stop(self, i: int) -> None:
        """Stop server ``i`` gracefully."""
        self.servers[i].stop()

    def restart(self, i: int, timeout: float | None = None) -> NatsServer:
        """Restart server ``i`` on its ports and store; wait until it is ready and the
        meta leader counts it as a current peer again (as ``start()`` does: until then
        an R3 asset may be refused, "peer offline")."""
        timeout = self.start_timeout if timeout is None else timeout
        server = self.servers[i].restart(timeout)
        self.wait_for_leader(timeout)
        return server

    async def restart_async(self, i: int, timeout: float | None = None) -> NatsServer:
        """``restart()`` without blocking the event loop."""
        timeout = self.start_timeout if timeout is None else timeout
        server = await self.servers[i].restart_async(timeout)
        await self.wait_for_leader_async(timeout)
        return server

    def kill_all(self) -> None:
        """SIGKILL every server."""
        for server in self.servers:
            server.kill()

    def close(self) -> None:
        """Stop every server (all at once) and remove their temporary directories."""
        for server in self.servers:
            server._terminate()
        for server in self.servers:
            server.close()

    async def close_async(self) -> None:
        """``close()`` without blocking the event loop."""
        for server in self.servers:
            server._terminate()
        for server in self.servers:
            await server.close_async()

    def __enter__(self) -> Self:
        try:
            return self.start()
        except BaseException:
            self.close()  # no __exit__ follows a failed __enter__
            raise

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        try:
            return await self.start_async()
        except BaseException:
            self.close()
            raise

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close_async()
