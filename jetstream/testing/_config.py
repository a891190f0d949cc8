"""The configuration file of an embedded nats-server, rendered from its options."""

from __future__ import annotations

from ._support import LOOPBACK, ClusterOptions, _duration, _q

__all__ = ["ServerConfig"]


class ServerConfig:
    """Mixed into ``NatsServer``: its addresses, and its options as nats-server
    configuration text."""

    server_name: str | None
    max_payload: int | None
    lame_duck_duration: float | None
    lame_duck_grace_period: float | None
    trace: bool
    token: str | None
    user: str | None
    password: str | None
    nkeys: list[str]
    auth_config: str
    tls_cert: str | None
    tls_key: str | None
    tls_ca: str | None
    tls_verify: bool
    tls_first: bool
    jetstream: bool
    store_dir: str
    domain: str | None
    jetstream_config: str
    extra_config: str
    websocket: bool
    websocket_config: str
    cluster: ClusterOptions | None
    _port: int
    _http_port: int
    _cluster_port: int
    _ws_port: int

    @property
    def port(self) -> int:
        """The client port."""
        return self._port

    @property
    def url(self) -> str:
        """``nats://127.0.0.1:PORT``; with TLS on, clients bring their own TLS context."""
        return f"nats://{LOOPBACK}:{self._port}"

    @property
    def ws_port(self) -> int | None:
        """The port of the ``websocket {}`` listener; None without one."""
        return self._ws_port if self.websocket else None

    @property
    def ws_url(self) -> str:
        """``ws://127.0.0.1:WS_PORT``, or ``wss://`` with TLS on (the ``websocket=True`` listener).

        Raises:
            ValueError: the server has no websocket listener.
        """
        if not self.websocket:
            raise ValueError("this server has no websocket listener (NatsServer(websocket=True))")
        scheme = "wss" if self.tls_cert is not None else "ws"
        return f"{scheme}://{LOOPBACK}:{self._ws_port}"

    @property
    def http_port(self) -> int:
        """The monitoring port."""
        return self._http_port

    @property
    def http_url(self) -> str:
        """``http://127.0.0.1:HTTP_PORT``, the monitoring endpoint's base URL."""
        return f"http://{LOOPBACK}:{self._http_port}"

    @property
    def cluster_port(self) -> int | None:
        """The route listen port; None for a standalone server."""
        return self._cluster_port if self.cluster is not None else None

    def render_config(self) -> str:
        """The nats-server configuration text this server runs with."""
        lines = [
            "# written by jetstream.embedded",
            f"listen: {_q(f'{LOOPBACK}:{self._port}')}",
            f"http: {_q(f'{LOOPBACK}:{self._http_port}')}",
        ]
        if self.server_name is not None:
            lines.append(f"server_name: {_q(self.server_name)}")
        if self.max_payload is not None:
            lines.append(f"max_payload: {int(self.max_payload)}")
        if self.lame_duck_duration is not None:
            lines.append(f"lame_duck_duration: {_duration(self.lame_duck_duration)}")
        if self.lame_duck_grace_period is not None:
            lines.append(f"lame_duck_grace_period: {_duration(self.lame_duck_grace_period)}")
        if self.trace:
            lines += ["debug: true", "trace: true"]
        lines += self._auth_lines()
        if self.tls_cert is not None and self.tls_key is not None:
            lines += [
                "tls {",
                f"  cert_file: {_q(self.tls_cert)}",
                f"  key_file: {_q(self.tls_key)}",
            ]
            if self.tls_ca is not None:
                lines.append(f"  ca_file: {_q(self.tls_ca)}")
            if self.tls_verify:
                lines.append("  verify: true")
            if self.tls_first:
                lines.append("  handshake_first: true")
            lines.append("}")
        if self.jetstream:
            lines += ["jetstream {", f"  store_dir: {_q(self.store_dir)}"]
            if self.domain is not None:
                lines.append(f"  domain: {_q(self.domain)}")
            lines += [self.jetstream_config, "}"]
        if self.websocket:
            lines += self._websocket_lines()
        if self.cluster is not None:
            lines += [
                "cluster {",
                f"  name: {_q(self.cluster.name)}",
                f"  listen: {_q(f'{LOOPBACK}:{self._cluster_port}')}",
                "  routes: [",
                *(f"    {_q(route)}" for route in self.cluster.routes),
                "  ]",
                "}",
            ]
        lines += [self.auth_config, self.extra_config]
        return "\n".join(line for line in lines if line) + "\n"

    def _websocket_lines(self) -> list[str]:
        lines = ["websocket {", f"  listen: {_q(f'{LOOPBACK}:{self._ws_port}')}"]
        if self.tls_cert is not None and self.tls_key is not None:
            lines += [
                "  tls {",
                f"    cert_file: {_q(self.tls_cert)}",
                f"    key_file: {_q(self.tls_key)}",
                "  }",
            ]
        else:
            lines.append("  no_tls: true")
        return [*lines, self.websocket_config, "}"]

    def _auth_lines(self) -> list[str]:
        if self.token is not None:
            return ["authorization {", f"  token: {_q(self.token)}", "}"]
        users = [f"    {{ nkey: {_q(key)} }}" for key in self.nkeys]
        if self.user is not None:
            user, password = _q(self.user), _q(self.password or "")
            if not users:
                return ["authorization {", f"  user: {user}", f"  password: {password}", "}"]
            users.insert(0, f"    {{ user: {user}, password: {password} }}")
        return ["authorization {", "  users: [", *users, "  ]", "}"] if users else []
