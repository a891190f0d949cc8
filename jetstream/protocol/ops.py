"""Server operations, as the parser returns them.

Every op is a small msgspec Struct. ``Msg`` covers both ``MSG`` and ``HMSG``:
``hdr`` holds the raw header block (``NATS/1.0 ...\\r\\n...\\r\\n\\r\\n``) or
``None``, and ``status`` holds the inline status code of that block (``100``,
``404``, ``408``, ``409``, ``503``...) or ``0``. Reading the status costs three
bytes at parse time, so a consumer can tell a heartbeat from a user message
without parsing headers.
"""

from __future__ import annotations

import msgspec

__all__ = ["PING", "PONG", "OK", "Err", "Info", "Msg", "Ok", "Op", "Ping", "Pong"]


class Info(msgspec.Struct, kw_only=True, frozen=True):
    """The server's ``INFO`` JSON. Unknown fields are ignored, missing ones default."""

    server_id: str = ""
    server_name: str = ""
    version: str = ""
    go: str = ""
    host: str = ""
    port: int = 0
    proto: int = 0
    headers: bool = False
    max_payload: int = 1048576
    client_id: int = 0
    client_ip: str = ""
    auth_required: bool = False
    tls_required: bool = False
    tls_verify: bool = False
    tls_available: bool = False
    connect_urls: list[str] = []
    ws_connect_urls: list[str] = []
    ldm: bool = False
    nonce: str = ""
    cluster: str = ""
    domain: str = ""
    jetstream: bool = False
    xkey: str = ""


class Msg(msgspec.Struct, gc=False):
    """A ``MSG`` or ``HMSG`` op.

    ``hdr`` is the raw header block, unparsed; ``status`` is the code on its
    ``NATS/1.0`` line (0 when there is none, or no header block at all). The
    client's ``jetstream.Msg`` subclasses this, adding parsed headers on demand.
    """

    subject: str
    sid: int
    reply: str | None
    payload: bytes
    hdr: bytes | None = None
    status: int = 0


class Err(msgspec.Struct, frozen=True):
    """An ``-ERR`` op, with the quotes around its text removed."""

    message: str


class Ping(msgspec.Struct, frozen=True):
    """``PING``: the client must answer ``PONG``."""


class Pong(msgspec.Struct, frozen=True):
    """``PONG``: the answer to our ``PING``."""


class Ok(msgspec.Struct, frozen=True):
    """``+OK`` (only sent in verbose mode, which this client never asks for)."""


PING = Ping()
PONG = Pong()
OK = Ok()

Op = Info | Msg | Err | Ping | Pong | Ok
