"""The connection of one command run, from the ``--server``/``--creds``/... options (or
their ``NATS_*`` environment variables), with every wait bounded by ``--timeout``."""

from __future__ import annotations

import argparse
import os
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..client import connect
from ..core.tls import make_ssl_context
from ._output import Output
from ._util import bounded, one_line, redact_url

if TYPE_CHECKING:
    from ..client import Client, JetStream

__all__ = [
    "DEFAULT_PORT",
    "DEFAULT_URL",
    "ENV",
    "Session",
    "connect_options",
    "open_session",
    "secrets_of",
]

#: option destination -> environment variable read for its default (as the nats CLI does)
ENV = {
    "server": "NATS_URL",
    "creds": "NATS_CREDS",
    "user": "NATS_USER",
    "password": "NATS_PASSWORD",
    "token": "NATS_TOKEN",
    "nkey": "NATS_NKEY",
    "tls_ca": "NATS_CA",
    "tls_cert": "NATS_CERT",
    "tls_key": "NATS_KEY",
}
#: the port ``jetstream server`` listens on and the other commands connect to when no
#: server is given: nats-server's 4222, unless ``JETSTREAM_DEFAULT_PORT`` says otherwise
#: (the tests set it, so that they never depend on 4222 being free)
DEFAULT_PORT = int(os.environ.get("JETSTREAM_DEFAULT_PORT") or 4222)
DEFAULT_URL = f"nats://127.0.0.1:{DEFAULT_PORT}"


def secrets_of(args: argparse.Namespace) -> list[str]:
    """The secret values of this run, blanked out of every error message."""
    out = [getattr(args, "password", None), getattr(args, "token", None)]
    url = getattr(args, "server", None) or ""
    for part in url.split(","):
        userinfo, at, _ = part.partition("://")[2].partition("@")
        if at:
            out.extend(p for p in userinfo.split(":") if len(p) > 2)
    return [s for s in out if s]


@dataclass
class Session:
    """What a command gets: its options, the client, the JetStream context, the printer."""

    args: argparse.Namespace
    nc: Client
    js: JetStream
    out: Output

    @property
    def timeout(self) -> float:
        return float(self.args.timeout)


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
        js = nc.jetstream(domain=args.domain or None, timeout=timeout)
        yield Session(args, nc, js, out)
    finally:
        try:
            await bounded(nc.close(), timeout, "close the connection")
        except Exception:  # the command's outcome matters more than a slow close
            pass
