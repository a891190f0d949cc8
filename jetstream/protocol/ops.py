"""Server operations, as the parser returns them.

Every op is a small msgspec Struct. ``Msg`` covers both ``MSG`` and ``HMSG``:
``hdr`` holds the raw header block (``NATS/1.0 ...\\r\\n...\\r\\n\\r\\n``) or
``None``, and ``status`` holds the inline status code of that block (``100``,
``404``, ``408``, ``409``, ``503``...) or ``0``. Reading the status costs three
bytes at parse time, so a consumer can tell a heartbeat from a user message
without parsing headers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import msgspec

__all__ = [
    "OK",
    "PING",
    "PONG",
    "BulkParse",
    "Err",
    "Info",
    "Msg",
    "MsgRun",
    "Ok",
    "Op",
    "OpsRun",
    "Ping",
    "Pong",
]


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


M = TypeVar("M", bound=Msg)


class MsgRun:
    """A run of messages (no status among them) to one subscription, ``run_sid``.

    A bulk parser (``Parser.bulk``) takes such a run out of a feed in one piece and keeps
    it in the bytes it came in; the client hands it whole to a subscription that reads
    runs (its ``_deliver_run``), and its ``Msg`` ops (``ops()``) to one that does not.
    Subclasses say where the fields are; ``OpsRun`` is the run of a list of ops.
    """

    __slots__ = ("run_sid",)

    def __init__(self, run_sid: int) -> None:
        self.run_sid = run_sid

    def __len__(self) -> int:
        raise NotImplementedError

    @property
    def nbytes(self) -> int:
        """The bytes of its payloads."""
        raise NotImplementedError

    def reply(self, i: int) -> str | None:
        """The reply subject of op ``i`` (negative: from the end)."""
        raise NotImplementedError

    def split(self, k: int) -> tuple[MsgRun, MsgRun]:
        """The first ``k`` ops and the rest (0 < k < len)."""
        raise NotImplementedError

    def ops(self, msg_type: type[M]) -> list[M]:
        """The run as ``Msg`` ops of the class ``msg_type`` (the parser's)."""
        raise NotImplementedError


class OpsRun(MsgRun):
    """A run of ``Msg`` ops the parser made one by one (with header blocks or not)."""

    __slots__ = ("_ops",)

    def __init__(self, ops: list[Msg]) -> None:
        super().__init__(ops[0].sid)
        self._ops = ops

    def __len__(self) -> int:
        return len(self._ops)

    @property
    def nbytes(self) -> int:
        return sum(len(op.payload) for op in self._ops)

    def reply(self, i: int) -> str | None:
        return self._ops[i].reply

    def split(self, k: int) -> tuple[MsgRun, MsgRun]:
        return OpsRun(self._ops[:k]), OpsRun(self._ops[k:])

    def ops(self, msg_type: type[M]) -> list[M]:
        ops = self._ops
        if all(op.__class__ is msg_type for op in ops):
            return ops  # type: ignore[return-value]
        return [msg_type(op.subject, op.sid, op.reply, op.payload, op.hdr, op.status) for op in ops]


BulkParse = Callable[[bytes, int, int, int], tuple[int, MsgRun | None]]
"""A bulk parser: ``(data, pos, max_control_line, max_payload)`` to ``(end, run)``, the
run of ``MSG`` ops at ``data[pos:end]``, or ``(pos, None)`` when there is none to take.
A run holds only what the op-by-op parser would return for those bytes, the same ops,
and every op of it is complete."""

PING = Ping()
PONG = Pong()
OK = Ok()

Op = Info | Msg | Err | Ping | Pong | Ok | MsgRun
