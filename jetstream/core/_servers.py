"""The server pool: URL parsing, order, discovery and reconnect bookkeeping."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

from ._ws import require_websocket

# a generator of its own: the shuffles and jitter neither move nor follow the global `random`
# state that an application (or a test framework) seeds
_rng = random.Random()

__all__ = ["EXPECTED_FORM", "Server", "ServerPool", "parse_server"]

DEFAULT_PORT = 4222
#: the port of a URL that names none, by scheme (WebSocket's are HTTP's)
DEFAULT_PORTS = {"nats": DEFAULT_PORT, "tls": DEFAULT_PORT, "ws": 80, "wss": 443}
SCHEMES = tuple(DEFAULT_PORTS)


@dataclass(eq=False)
class Server:
    """One server address, with the secrets its URL carried kept out of repr and str."""

    scheme: str
    host: str
    port: int
    user: str | None = None
    password: str | None = None
    token: str | None = None
    #: the URL's path and query (``ws://`` and ``wss://`` send it in the upgrade request)
    path: str = ""
    discovered: bool = False
    did_connect: bool = False
    #: failed attempts since the last successful connect
    attempts: int = 0
    #: loop time of the last attempt
    last_attempt: float = -1e9

    @property
    def key(self) -> tuple[str, int]:
        return (self.host.lower(), self.port)

    @property
    def tls(self) -> bool:
        return self.scheme in ("tls", "wss")

    @property
    def websocket(self) -> bool:
        """Reached over WebSocket (``ws://``, or ``wss://`` with TLS)."""
        return self.scheme in ("ws", "wss")

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"

    def __repr__(self) -> str:
        return f"<Server {self}>"


#: what a server URL looks like, quoted by every refusal
EXPECTED_FORM = (
    "expected nats://host:port, tls://host:port, ws://host:port, wss://host:port or "
    "host:port (user:password@ before the host, an IPv6 host in brackets, the port 4222 "
    "when none is given, 80 for ws:// and 443 for wss://)"
)


def _shown(url: str) -> str:
    """``url`` as an error may quote it: its userinfo, if any, becomes ``***``."""
    head, sep, rest = url.partition("://")
    if not sep:
        if "@" in url:  # no scheme to find the host by: keep what follows the last "@"
            return repr("***@" + url.rpartition("@")[2])
        head, rest = "", url
    else:
        head += sep
    ends = [i for i in (rest.find(c) for c in "/?#") if i >= 0]
    end = min(ends, default=len(rest))
    netloc = rest[:end]
    if "@" in netloc:
        netloc = "***@" + netloc.rpartition("@")[2]
    return repr(head + netloc + rest[end:])


def _refuse(url: str, why: str) -> ValueError:
    return ValueError(f"bad server URL {_shown(url)}: {why}; {EXPECTED_FORM}")


def _port_text(netloc: str) -> str | None:
    """What follows the host's ``:`` in ``netloc`` (None when there is no ``:``)."""
    hostport = netloc.rpartition("@")[2]
    if hostport.startswith("["):
        hostport = hostport.partition("]")[2]
    if ":" not in hostport:
        return None
    return hostport.rpartition(":")[2]


def _missing_slashes(url: str) -> str | None:
    """What is wrong with a URL that names a scheme but lacks part of ``://``
    (``nats:/host``, ``tls:host``, ``nats//host``), else None; ``nats:4222`` is the host
    "nats" at a port, and ``nats:secret@host`` the user "nats" with a password."""
    scheme, colon, rest = url.partition(":")
    if colon and scheme.lower() in SCHEMES:
        if rest.isdigit() or ("@" in rest and not rest.startswith("/")):
            return None
        fixed = _shown(f"{scheme}://{rest.lstrip('/')}")
        return f"'{scheme}:' is not followed by '//' (write {fixed})"
    for name in SCHEMES:
        if url.lower().startswith(name + "//"):
            fixed = _shown(f"{url[: len(name)]}:{url[len(name) :]}")
            return f"the ':' after {url[: len(name)]!r} is missing (write {fixed})"
    return None


def parse_server(url: str) -> Server:
    """Parse ``nats://[user[:pass]@]host[:port]``, ``tls://...``, ``ws://...[/path]``,
    ``wss://...``, ``host:port`` or ``host``.

    IPv6 literals go in brackets (``nats://[::1]:4222``). A lone userinfo part
    without a password is a token. Nothing is looked up: a URL that cannot be right
    (whitespace in it, a port that is not a number from 1 to 65535, no host, another
    scheme) is refused here, before any connection attempt.

    Raises:
        ValueError: the URL cannot be understood; the message quotes it (its userinfo
            blanked out) and the expected form.
    """
    shown = url.strip()
    if not shown:
        raise _refuse(url, "it is empty")
    if any(c.isspace() or not c.isprintable() for c in shown):
        raise _refuse(shown, "it holds whitespace or a control character")
    if "://" not in shown:
        missing = _missing_slashes(shown)
        if missing is not None:
            raise _refuse(shown, missing)
    text = shown if "://" in shown else "nats://" + shown
    try:
        parts = urlsplit(text)
    except ValueError as exc:  # an unclosed IPv6 bracket
        raise _refuse(shown, str(exc)) from None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS:
        raise _refuse(
            shown, f"unsupported scheme {scheme!r} (use nats://, tls://, ws:// or wss://)"
        )
    port_text = _port_text(parts.netloc)
    if port_text is not None and not (
        port_text.isascii() and port_text.isdigit() and 0 < int(port_text) < 65536
    ):
        raise _refuse(shown, f"the port {port_text!r} is not a number from 1 to 65535")
    try:
        _ = parts.port  # raises for what is left: a host with a ":" outside brackets
    except ValueError:
        raise _refuse(shown, "a ':' in the host (an IPv6 host goes in brackets)") from None
    host = parts.hostname
    if not host:
        raise _refuse(shown, "it has no host")
    port = int(port_text) if port_text is not None else DEFAULT_PORTS[scheme]
    user = password = token = None
    if parts.username is not None:
        if parts.password is not None:
            user, password = unquote(parts.username), unquote(parts.password)
        else:
            token = unquote(parts.username)
    path = parts.path + (f"?{parts.query}" if parts.query else "")
    return Server(scheme, host, port, user, password, token, path)


class ServerPool:
    """The servers the client may connect to, in the order it tries them."""

    def __init__(self, urls: Sequence[str], *, randomize: bool = True) -> None:
        servers = [parse_server(u) for u in urls]
        if not servers:
            raise ValueError(f"no server given; {EXPECTED_FORM}")
        require_websocket(urls)
        if randomize:
            _rng.shuffle(servers)
        self.servers: list[Server] = []
        for s in servers:
            if self._find(s.key) is None:
                self.servers.append(s)
        self.randomize = randomize

    def _find(self, key: tuple[str, int]) -> Server | None:
        for s in self.servers:
            if s.key == key:
                return s
        return None

    def find(self, url: str) -> Server | None:
        """The pool's entry for ``url``, if any."""
        return self._find(parse_server(url).key)

    def next(self, max_attempts: int) -> Server | None:
        """Rotate: the first server that may still be tried moves to the back and is returned."""
        for _ in range(len(self.servers)):
            s = self.servers.pop(0)
            self.servers.append(s)
            if max_attempts < 0 or s.attempts < max_attempts:
                return s
        # Every server ran out of attempts.
        return None

    def pick(
        self,
        *,
        max_attempts: int,
        wait: float,
        jitter: Callable[[Server], float],
        now: float,
        chooser: Callable[[list[str], Any], tuple[str, float] | None] | None = None,
        info: Any = None,
    ) -> tuple[Server | None, float]:
        """The server to try next and how long to wait first.

        ``chooser`` (the user's reconnect-to-server hook) may name a server of the pool
        and a delay; otherwise the pool rotates, skipping servers out of attempts, and
        waits until ``wait`` seconds have passed since that server's last attempt, plus
        up to ``jitter(server)`` seconds at random.
        """
        if chooser is not None:
            choice = chooser(self.urls(), info)
            if choice is not None:
                server = self.find(choice[0])
                if server is not None:
                    return server, max(choice[1], 0.0)
        server = self.next(max_attempts)
        if server is None:
            return None, 0.0
        delay = max(wait - (now - server.last_attempt), 0.0)
        if delay > 0:
            delay += _rng.random() * jitter(server)
        return server, delay

    def add_discovered(self, urls: Iterable[str], *, template: Server | None) -> list[Server]:
        """Add servers learned from INFO connect_urls; returns the new ones."""
        added: list[Server] = []
        for u in urls:
            try:
                s = parse_server(u)
            except ValueError:
                continue
            if self._find(s.key) is not None or any(a.key == s.key for a in added):
                continue
            s.discovered = True
            if template is not None:
                s.scheme = template.scheme
            added.append(s)
        if added:
            if self.randomize:
                _rng.shuffle(added)
            self.servers.extend(added)
        return added

    def replace(self, urls: Sequence[str]) -> None:
        """Set a new list of servers (keeping the bookkeeping of those already known)."""
        new: list[Server] = []
        for u in urls:
            s = parse_server(u)
            old = self._find(s.key)
            new.append(old if old is not None else s)
        if not new:
            raise ValueError("no server given")
        require_websocket(urls)
        self.servers = new

    def urls(self) -> list[str]:
        """The pool as URLs without credentials."""
        return [str(s) for s in self.servers]
