"""The options ``connect()`` gathers, as the client and each connection read them."""

from __future__ import annotations

import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..protocol.ops import Info
from .auth import Credentials

if TYPE_CHECKING:
    from ._otel import Tracing

__all__ = ["Callback", "_Options"]

Callback = Callable[..., Awaitable[None] | None]


@dataclass(frozen=True)
class _Options:
    name: str | None
    credentials: Credentials
    tls: ssl.SSLContext | None
    tls_hostname: str | None
    tls_first: bool
    connect_timeout: float
    allow_reconnect: bool
    max_reconnect_attempts: int
    reconnect_time_wait: float
    reconnect_jitter: float
    reconnect_jitter_tls: float
    reconnect_buf_size: int
    ping_interval: float
    max_outstanding_pings: int
    no_echo: bool
    retry_on_failed_connect: bool
    pending_msgs_limit: int
    pending_bytes_limit: int
    inbox_prefix: str
    error_cb: Callback | None
    disconnected_cb: Callback | None
    reconnected_cb: Callback | None
    closed_cb: Callback | None
    discovered_server_cb: Callback | None
    lame_duck_cb: Callback | None
    reconnect_to_server_cb: Callable[[list[str], Info | None], tuple[str, float] | None] | None
    #: the spans of publishing and receiving (``connect(tracing=...)``); None: off
    tracing: Tracing | None = None
    #: extra HTTP headers of the WebSocket upgrade request (``ws://``, ``wss://``)
    ws_headers: tuple[tuple[str, str], ...] = ()
    #: ask for permessage-deflate in the WebSocket upgrade
    ws_compression: bool = False
