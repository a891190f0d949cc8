"""The connection of one command run, from the ``--server``/``--creds``/... options (or
their ``NATS_*`` environment variables), with every wait bounded by ``--timeout``.

The connection is the core client's; the JetStream context, and with it the JetStream
layer's modules, comes with the first command that asks for ``session.js``: ``pub``,
``sub``, ``req`` and ``reply`` import the core alone."""

from __future__ import annotations

import argparse
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..core import connect
from ..core.tls import make_ssl_context
from ._args import DEFAULT_PORT, DEFAULT_URL, ENV, secrets_of
from ._output import Output
from ._util import bounded, one_line, redact_url

if TYPE_CHECKING:
    from ..client import JetStream
    from ..core.client import Client

__all__ = [
    "DEFAULT_PORT",
    "DEFAULT_URL",
    "ENV",
    "Session",
    "connect_options",
    "open_session",
    "secrets_of",
]


@dataclass
class Session:
    """What a command gets: its options, the client, the JetStream context, the printer."""

    args: argparse.Namespace
    nc: Client
    out: Output
    _js: JetStream | None = None

    @property
    def timeout(self) -> float:
        return float(self.args.timeout)

    @property
    def js(self) -> JetStream:
        """The JetStream context (``--domain``, ``--timeout``), made on first use."""
        if self._js is None:
            from ..client import JetStream

            self._js = JetStream(self.nc, domain=self.args.domain or None, timeout=self.timeout)
        return self._js


def _tls(args: argparse.Namespace) -> ssl.SSLContext | None:
    if not (args.tls_ca or args.tls_cert):
        return None
    return make_ssl_context(ca_file=args.tls_ca, cert_file=args.tls_cert, key_file=args.tls_key)


def connect_options(args: argparse.Namespace) -> dict[str, Any]:
    """The ``connect()`` keywords of the connection options (credentials and TLS)."""
    return {
        "user": args.user or None,
        "password": args.password or None,
        "token": args.token or None,
        "creds": args.creds or None,
        "nkeys_seed_file": args.nkey or None,
        "tls": _tls(args),
        "connect_timeout": float(args.timeout),
    }


@asynccontextmanager
async def open_session(args: argparse.Namespace, out: Output) -> AsyncIterator[Session]:
    """Connect (at most ``--timeout`` per attempt), yield the session, close (bounded)."""
    timeout = float(args.timeout)
    url = args.server or DEFAULT_URL
    secrets = secrets_of(args)

    def on_error(exc: BaseException) -> None:
        out.warn(one_line(exc, secrets))

    nc = await bounded(
        connect(
            url,
            name="jetstream-cli",
            error_cb=on_error,
            **connect_options(args),
        ),
        timeout * 2 + 1,
        f"connect to {redact_url(url)}",
    )
    try:
        yield Session(args, nc, out)
    finally:
        try:
            await bounded(nc.close(), timeout, "close the connection")
        except Exception:  # the command's outcome matters more than a slow close
            pass
