"""WebSocket (``ws://``, ``wss://``): what is known without the ``ws`` extra.

The NATS protocol rides in binary WebSocket messages (``_wslink.py``, which needs
wsproto: the ``ws`` extra). This module holds what ``connect()`` and the server
pool need before any socket is opened, and imports nothing optional: the errors,
and the check that the extra is installed, made when a ``ws://`` or ``wss://``
URL is given, so that a missing package is named by ``connect()`` itself and not
by a failed reconnect later.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from .._version import install_hint
from ..errors import NatsError

__all__ = [
    "WS_SCHEMES",
    "WebSocketError",
    "WebSocketUnavailableError",
    "require_websocket",
    "ws_header_list",
]

#: the schemes of servers reached over WebSocket (``wss``: with TLS)
WS_SCHEMES = frozenset({"ws", "wss"})


class WebSocketError(NatsError):
    """The WebSocket upgrade failed: the server (or a proxy before it) answered the
    HTTP request with something else than ``101 Switching Protocols``, or the port is
    not a WebSocket listener at all (a NATS client port answers with ``INFO``)."""


class WebSocketUnavailableError(NatsError, ImportError):
    """A ``ws://`` or ``wss://`` server was given but wsproto, which the ``ws`` extra
    installs, is not installed (the message says how to install it)."""


def require_websocket(urls: Iterable[str]) -> None:
    """Raise ``WebSocketUnavailableError`` when one of ``urls`` is ``ws://`` or
    ``wss://`` and wsproto cannot be imported; otherwise do nothing."""
    schemes = [u.strip().partition("://")[0].lower() for u in urls if "://" in u]
    if not WS_SCHEMES.intersection(schemes):
        return
    try:
        import wsproto  # noqa: F401
    except ImportError as exc:
        raise WebSocketUnavailableError(
            f"ws:// and wss:// servers need wsproto ({exc}): {install_hint('ws')}"
        ) from None


def ws_header_list(
    headers: Mapping[str, str | Iterable[str]] | None,
) -> tuple[tuple[str, str], ...]:
    """``ws_headers=`` as (name, value) pairs; a name given several values is sent
    once per value. Raises ``ValueError`` for a name or value that cannot be sent
    (empty, not ASCII, CR or LF in it, or a header the upgrade sets itself)."""
    if not headers:
        return ()
    pairs: list[tuple[str, str]] = []
    for name, values in headers.items():
        if not name or not name.isascii() or any(c in name for c in ":\r\n \t"):
            raise ValueError(f"ws_headers: {name!r} is not a valid HTTP header name")
        if name.lower() in _RESERVED:
            raise ValueError(f"ws_headers: {name!r} is set by the WebSocket upgrade itself")
        for value in [values] if isinstance(values, str) else list(values):
            if not isinstance(value, str) or "\r" in value or "\n" in value:
                raise ValueError(f"ws_headers: the value of {name!r} must be a one-line str")
            pairs.append((name, value))
    return tuple(pairs)


_RESERVED = frozenset(
    {
        "host",
        "upgrade",
        "connection",
        "sec-websocket-key",
        "sec-websocket-version",
        "sec-websocket-extensions",
    }
)
