"""``connect()``: options in, a connected ``Client`` out."""

from __future__ import annotations

import functools
import ssl
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, TypeVar

from .._version import install_hint
from ..errors import AuthorizationError, TracingUnavailableError
from ..protocol.ops import Info
from ._options import Callback, _Options
from ._servers import ServerPool
from ._ws import ws_header_list
from .auth import Credentials, Secret, Signer, load_creds_file
from .client import Client
from .subscription import DEFAULT_PENDING_BYTES, DEFAULT_PENDING_MSGS

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

    from ._otel import Tracing

__all__ = ["Callback", "connect", "with_client_type"]

C = TypeVar("C", bound=Client)
P = ParamSpec("P")


class _Connect(Generic[C]):
    """What ``connect()`` returns: await it, or use it as ``async with``."""

    def __init__(self, pool: ServerPool, options: _Options, client_type: type[C]) -> None:
        self._pool = pool
        self._options = options
        self._client_type = client_type
        self._client: C | None = None

    async def _run(self) -> C:
        client = self._client_type(self._pool, self._options)
        await client._start()
        return client

    def __await__(self) -> Generator[Any, None, C]:
        return self._run().__await__()

    async def __aenter__(self) -> C:
        self._client = await self._run()
        return self._client

    async def __aexit__(self, *exc: object) -> None:
        if self._client is not None:
            await self._client.close()


def connect(
    servers: str | Sequence[str] = "nats://127.0.0.1:4222",
    *,
    name: str | None = None,
    user: Secret | None = None,
    password: Secret | None = None,
    token: Secret | None = None,
    nkeys_seed: str | bytes | None = None,
    nkeys_seed_file: str | None = None,
    creds: str | None = None,
    jwt: Secret | None = None,
    nkey: Secret | None = None,
    signature_cb: Signer | None = None,
    tls: ssl.SSLContext | None = None,
    tls_hostname: str | None = None,
    tls_handshake_first: bool = False,
    connect_timeout: float = 2.0,
    allow_reconnect: bool = True,
    max_reconnect_attempts: int = 60,
    reconnect_time_wait: float = 2.0,
    reconnect_jitter: float = 0.1,
    reconnect_jitter_tls: float = 1.0,
    reconnect_buf_size: int = 8 * 1024 * 1024,
    ping_interval: float = 120.0,
    max_outstanding_pings: int = 2,
    no_echo: bool = False,
    dont_randomize: bool = False,
    retry_on_failed_connect: bool = False,
    pending_msgs_limit: int = DEFAULT_PENDING_MSGS,
    pending_bytes_limit: int = DEFAULT_PENDING_BYTES,
    inbox_prefix: str = "_INBOX",
    error_cb: Callback | None = None,
    disconnected_cb: Callback | None = None,
    reconnected_cb: Callback | None = None,
    closed_cb: Callback | None = None,
    discovered_server_cb: Callback | None = None,
    lame_duck_cb: Callback | None = None,
    reconnect_to_server_cb: (
        Callable[[list[str], Info | None], tuple[str, float] | None] | None
    ) = None,
    tracing: bool | TracerProvider | None = None,
    ws_headers: Mapping[str, str | Iterable[str]] | None = None,
    ws_compression: bool = False,
) -> _Connect[Client]:
    """Connect to NATS. ``await connect(...)`` or ``async with connect(...) as nc``.

    ``user``, ``password``, ``token``, ``jwt`` and ``nkey`` may be callables (plain or
    async) returning the string, asked at every connect and reconnect (for secrets
    that rotate). One that raises or returns anything but a non-empty string ends the
    connect with ``AuthorizationError`` naming the option.

    Args:
        servers: one URL or several (``nats://``, ``tls://``, ``ws://``, ``wss://``,
            ``host:port``, IPv6 in brackets); tried in random order unless
            ``dont_randomize``. Credentials in a URL (``nats://user:pass@host`` or
            ``nats://token@host``) apply to it. ``ws://`` and ``wss://`` (WebSocket,
            ``wss://`` with TLS verified as for ``tls://``) need the ``ws`` extra; their
            path is sent in the upgrade request.
        user: a user name, with ``password``.
        password: the password of ``user``.
        token: an authorization token.
        nkeys_seed: an nkey user seed (needs the ``nkeys`` extra).
        nkeys_seed_file: a file holding an nkey user seed.
        creds: a ``.creds`` file with a user JWT and its seed.
        jwt: a user JWT, with ``nkeys_seed`` (the two strings of a creds file) or
            with ``signature_cb``.
        nkey: the public nkey (``U...``) that ``signature_cb`` signs for (no JWT).
        signature_cb: signs the server's nonce (bytes in; the raw signature as bytes,
            or base64url as str, out), instead of a seed held by the client: with
            ``jwt`` or ``nkey``.
        tls: an ``SSLContext``; also implied by ``tls://`` or a server requiring TLS.
            Certificates and hostnames are verified by default.
        tls_handshake_first: do TLS before the server's INFO (servers set to handshake_first).
        connect_timeout: seconds for each connection attempt, handshake included.
        max_reconnect_attempts: per server; -1 tries forever.
        reconnect_time_wait: seconds between attempts on the same server (plus jitter).
        reconnect_buf_size: bytes of publishes kept while disconnected.
        ping_interval: seconds between keepalive PINGs (how a dead link is detected).
        max_outstanding_pings: PINGs left unanswered before the link counts as dead.
        retry_on_failed_connect: when no server answers at first, return a client that
            keeps trying in the background instead of raising.
        error_cb: called with asynchronous errors. It and the other callbacks
            (``disconnected_cb``, ``reconnected_cb``, ``closed_cb``...) may be plain
            functions or coroutine functions.
        tracing: OpenTelemetry spans of publishing and receiving, with the W3C trace
            context carried in message headers (the ``otel`` extra; see the tracing
            page): ``True`` uses the global tracer provider, a ``TracerProvider`` that
            one; ``None``/``False`` (default) is off and costs nothing.
        ws_headers: extra HTTP headers of the WebSocket upgrade request (an
            ``Authorization`` a proxy asks for, say): a name and a value, or a list
            of values.
        ws_compression: ask a ``ws://`` or ``wss://`` server for permessage-deflate;
            used when the server offers it (its ``websocket { compression: true }``).

    Raises:
        ValueError: a server URL is malformed (whitespace in it, a port that is not a
            number, no host, another scheme), or the options conflict; raised by the
            call itself, before anything is looked up or connected to.
        NoServersError: no server could be reached (the last failure is the cause).
        AuthorizationError: the server refused the credentials.
        TracingUnavailableError: ``tracing`` is on and OpenTelemetry's API is not
            installed (an ``ImportError``; raised by the call itself).
        WebSocketUnavailableError: a ``ws://`` or ``wss://`` server is given and
            wsproto (the ``ws`` extra) is not installed (an ``ImportError``; raised
            by the call itself).
        TlsError: every server failed the TLS handshake (certificate, hostname, or TLS
            not offered), within ``connect_timeout`` each.
    """
    urls = [servers] if isinstance(servers, str) else list(servers)
    urls = [u for part in urls for u in part.split(",") if u.strip()]
    pool = ServerPool(urls, randomize=not dont_randomize)
    seed: bytes | None = None
    if signature_cb is not None and jwt is None and nkey is None:
        raise ValueError("signature_cb needs jwt (a user JWT) or nkey (its public key)")
    if nkey is not None and signature_cb is None:
        raise ValueError("nkey (a public key) needs signature_cb to sign with")
    if jwt is not None and signature_cb is None and nkeys_seed is None:
        raise ValueError("jwt needs nkeys_seed or signature_cb to sign the nonce")
    if creds is not None and (jwt is not None or signature_cb is not None):
        raise ValueError("give creds, or jwt with nkeys_seed / signature_cb, not both")
    if creds is not None:
        jwt, seed = load_creds_file(creds)
    elif nkeys_seed_file is not None:
        try:
            with open(nkeys_seed_file, "rb") as f:
                seed = f.read().strip()
        except OSError as exc:
            raise AuthorizationError(f"cannot read nkey seed file: {exc.strerror}") from None
    elif nkeys_seed is not None:
        seed = nkeys_seed.encode() if isinstance(nkeys_seed, str) else nkeys_seed
    credentials = Credentials(
        user=user,
        password=password,
        token=token,
        nkey_seed=seed,
        jwt=jwt,
        nkey=nkey,
        signer=signature_cb,
    )
    options = _Options(
        name=name,
        credentials=credentials,
        tls=tls,
        tls_hostname=tls_hostname,
        tls_first=tls_handshake_first,
        connect_timeout=connect_timeout,
        allow_reconnect=allow_reconnect,
        max_reconnect_attempts=max_reconnect_attempts,
        reconnect_time_wait=reconnect_time_wait,
        reconnect_jitter=reconnect_jitter,
        reconnect_jitter_tls=reconnect_jitter_tls,
        reconnect_buf_size=reconnect_buf_size,
        ping_interval=ping_interval,
        max_outstanding_pings=max_outstanding_pings,
        no_echo=no_echo,
        retry_on_failed_connect=retry_on_failed_connect,
        pending_msgs_limit=pending_msgs_limit,
        pending_bytes_limit=pending_bytes_limit,
        inbox_prefix=inbox_prefix,
        error_cb=error_cb,
        disconnected_cb=disconnected_cb,
        reconnected_cb=reconnected_cb,
        closed_cb=closed_cb,
        discovered_server_cb=discovered_server_cb,
        lame_duck_cb=lame_duck_cb,
        reconnect_to_server_cb=reconnect_to_server_cb,
        tracing=_tracing(tracing),
        ws_headers=ws_header_list(ws_headers),
        ws_compression=ws_compression,
    )
    return _Connect(pool, options, Client)


def _tracing(tracing: bool | TracerProvider | None) -> Tracing | None:
    """The ``Tracing`` of ``connect(tracing=...)``: None when off (OpenTelemetry is not
    even imported), the global tracer provider's for True, else the provider's given."""
    if tracing is None or tracing is False:
        return None
    try:
        from ._otel import Tracing
    except ImportError as exc:
        raise TracingUnavailableError.missing(exc, install_hint("otel")) from None
    return Tracing(None if tracing is True else tracing)


def with_client_type(
    connect: Callable[P, _Connect[Client]], client_type: type[C]
) -> Callable[P, _Connect[C]]:
    """``connect`` (same options, same docstring), making ``client_type`` clients.

    How a layer above hands out a ``Client`` subclass of its own (``jetstream.connect``
    returns the one with ``jetstream()``) without this layer knowing of it.
    """

    @functools.wraps(connect)
    def connect_as(*args: P.args, **kwargs: P.kwargs) -> _Connect[C]:
        made = connect(*args, **kwargs)
        return _Connect(made._pool, made._options, client_type)

    return connect_as
