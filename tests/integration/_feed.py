"""Crafted server bytes handed to a live client as one read.

For the tests whose subject is the content of one read (these ops, in this order, in one
``data_received``): no server, real or behind the fault proxy, can be made to put a given
run of messages, a heartbeat among them or a PING, into one TCP segment on demand, nor
to send what a real server never sends (a consumer sequence skipped inside a run, a 409
Leadership Change without its election). The one reach into the client is here: the
tests find the subscription by the subject they see through the public API (a stream's
``subject``, a push consumer's deliver subject, the reply subject of a pull request seen
by another connection).
"""

from __future__ import annotations

from jetstream import Client

__all__ = ["feed", "hmsg", "msg", "sid_of"]


def msg(subject: str, sid: int, payload: bytes, reply: str | None = None) -> bytes:
    """A MSG op, as the server writes it."""
    r = f" {reply}" if reply else ""
    return f"MSG {subject} {sid}{r} {len(payload)}\r\n".encode() + payload + b"\r\n"


def hmsg(subject: str, sid: int, hdr: bytes, payload: bytes = b"") -> bytes:
    """An HMSG op of header block ``hdr`` (a status message has no payload)."""
    size = len(hdr) + len(payload)
    return f"HMSG {subject} {sid} {len(hdr)} {size}\r\n".encode() + hdr + payload + b"\r\n"


def sid_of(nc: Client, subject: str) -> int:
    """The sid of the client's subscription on ``subject`` (one of its own inboxes)."""
    for sid, target in nc._subs.items():
        if getattr(target, "subject", None) == subject:
            return sid
    raise LookupError(f"no subscription on {subject!r}")


def feed(nc: Client, data: bytes) -> None:
    """Hand ``data`` to ``nc``'s connection as if one read had brought it."""
    conn = nc._conn
    assert conn is not None, "not connected"
    conn.data_received(data)
