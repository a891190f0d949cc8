"""What the layers built on the core use of a connection: the contract, in one class.

JetStream's pulls, push streams, acks and async publisher receive on inboxes of their
own and write messages the client did not make from user input (ack subjects the
server gave, inbox replies, pull requests). They use these named methods of
``Client``, and nothing else of its insides (``tests/unit/test_privates.py`` checks
it; docs/design.md, "The core contract", lists them by job):

- **deliveries**: ``new_sid``, ``add_delivery``, ``delivery``, ``remove_delivery``,
  ``send_sub``, ``send_unsub``: a reader registers itself for a sid (with the message
  class the parser makes for it) and the read path hands it each message;
- **writes**: ``write_publish``, ``write_reply``, ``write_formatted`` append to the one
  write buffer and schedule its flush (``flush_now`` writes at once);
  ``write_paused`` and ``wait_writable`` are the backpressure; ``unsent_bytes``,
  ``check_open``;
- **the connection's life**: ``add_loss_hook`` / ``add_reconnect_hook`` (and their
  ``remove_``), ``server_info``, ``inbox_prefix``, ``connect_timeout``, ``loop``,
  ``report_error``, ``send_ping``, ``count_stranded_nak``, ``tracing``,
  ``use_bulk_parse``;
- **requests of its own** (the confirmed acks): ``request_raw``, ``request_nowait``,
  ``request_each``, ``forget_requests``.

Most are defined here; ``flush_now``, ``wait_writable``, ``check_open``,
``report_error`` and ``use_bulk_parse`` are in ``_base.py``, the requests in
``client.py`` and the numbered writes in ``_numbered.py``.

This module also holds the write path itself: the checks and the buffering of a
message that every publish other than ``Client.publish``'s fast path goes through.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, NoReturn

from ..errors import ConnectionClosedError, MaxPayloadError, ReconnectBufferFullError
from ..protocol.commands import PING, encode_sub, encode_unsub
from ..protocol.subjects import validate_subject
from ._base import FLUSH_THRESHOLD, _ClientBase, _State
from ._connection import Delivery
from .message import Msg

if TYPE_CHECKING:
    from ._otel import Tracing

__all__ = ["Contract"]


def _not_bytes(wbuf: bytearray, mark: int, data: object) -> TypeError:
    """Take back the partly written message from ``mark`` on; the error for its data."""
    del wbuf[mark:]
    return TypeError(
        f"message data must be bytes, bytearray or memoryview, not {type(data).__name__}"
    )


class Contract(_ClientBase):
    """The named methods the layers above the core use (see the module's docstring)."""

    # -- the connection's life -----------------------------------------------------

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The event loop this client runs on."""
        return self._loop

    @property
    def inbox_prefix(self) -> str:
        """The prefix of this client's inboxes (``new_inbox``)."""
        return self._opts.inbox_prefix

    @property
    def connect_timeout(self) -> float:
        """Seconds one connection attempt may take (a reconnect's included)."""
        return self._opts.connect_timeout

    @property
    def tracing(self) -> Tracing | None:
        """The tracing of a client connected with ``tracing=``, else None."""
        return self._tracing

    def add_loss_hook(self, hook: Callable[[BaseException], None]) -> None:
        """Call ``hook(error)`` when the connection is lost or closed (on the read path:
        it must not raise or block)."""
        self._loss_hooks.append(hook)

    def remove_loss_hook(self, hook: Callable[[BaseException], None]) -> None:
        """Undo ``add_loss_hook`` (nothing if ``hook`` is not there)."""
        if hook in self._loss_hooks:
            self._loss_hooks.remove(hook)

    def add_reconnect_hook(self, hook: Callable[[], None]) -> None:
        """Call ``hook()`` after each reconnect, once the subscriptions are made again."""
        if hook not in self._reconnect_hooks:
            self._reconnect_hooks.append(hook)

    def remove_reconnect_hook(self, hook: Callable[[], None]) -> None:
        """Undo ``add_reconnect_hook`` (nothing if ``hook`` is not there)."""
        if hook in self._reconnect_hooks:
            self._reconnect_hooks.remove(hook)

    def count_stranded_nak(self) -> None:
        """Count one message given back for want of a reader (``stats.stranded_naks``)."""
        self._stranded_naks += 1

    def send_ping(self) -> asyncio.Future[None] | None:
        """Write what is buffered and a PING now; the future resolves at its PONG (what
        the server sent before it has been read by then). None when not connected."""
        conn = self._conn
        if conn is None or not self.is_connected:
            return None
        w: asyncio.Future[None] = self._loop.create_future()
        conn.pongs.append(w)
        self.flush_now()
        conn.write(PING)
        return w

    # -- deliveries ----------------------------------------------------------------

    def new_sid(self) -> int:
        """A subscription id never used on this client."""
        return next(self._sids)

    def add_delivery(self, sid: int, target: Delivery, msg_type: type[Msg] | None = None) -> None:
        """Deliver what comes for ``sid`` to ``target`` (``target._deliver(op)``, on the
        read path); ``msg_type``: the class its messages are made of (else the client's
        ``Msg``; see ``msg_class``). Sends nothing: see ``send_sub``."""
        self._subs[sid] = target
        if msg_type is not None:
            self._sid_types[sid] = msg_type

    def delivery(self, sid: int) -> Delivery | None:
        """What ``sid`` is delivered to, if anything."""
        return self._subs.get(sid)

    def remove_delivery(self, sid: int) -> None:
        """Deliver nothing more for ``sid`` (what comes for it is dropped). Sends
        nothing: see ``send_unsub``."""
        self._subs.pop(sid, None)
        self._sid_types.pop(sid, None)

    def send_sub(self, subject: str, sid: int, queue: str | None) -> None:
        """Buffer the SUB of ``sid`` (``subject`` validated by the caller); it is made
        again on every reconnect while the sid has a delivery."""
        encode_sub(self._wbuf, subject, sid, queue)
        self._schedule_flush()

    def send_unsub(self, sid: int, max_msgs: int | None) -> None:
        """Buffer the UNSUB of ``sid`` (after ``max_msgs`` more, if given)."""
        if self._state is _State.CLOSED:
            return
        encode_unsub(self._wbuf, sid, max_msgs)
        self._schedule_flush()

    # -- writes --------------------------------------------------------------------

    @property
    def unsent_bytes(self) -> int:
        """Bytes in the client's write buffer, not handed to the socket yet (kept there
        while disconnected, and written first on reconnect)."""
        return len(self._wbuf)

    @property
    def write_paused(self) -> bool:
        """The socket takes no more for now: a writer that can wait calls
        ``wait_writable``."""
        conn = self._conn
        return conn is not None and conn.write_paused

    def _written(self, count: int, size: int, threshold: int = FLUSH_THRESHOLD) -> None:
        """``count`` messages of ``size`` payload bytes were appended to the buffer:
        count them, and write now past ``threshold`` bytes or at the end of the loop
        iteration. (The two hottest writes have this inline: ``Client.publish``'s fast
        path and ``write_formatted``, an ack's.)"""
        self._out_msgs += count
        self._out_bytes += size
        if len(self._wbuf) >= threshold:
            self.flush_now()
        elif not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush_cb)

    def write_publish(
        self,
        subject: str,
        data: bytes | bytearray | memoryview,
        reply: bytes,
        hdr: bytes | None,
        now: bool = False,
        pre: bytes | None = None,
    ) -> None:
        """Buffer a message whose reply subject the client made itself (not validated);
        with ``now``, write it at once (someone waits for the answer). ``pre``: the
        ``PUB <subject> `` prefix of a subject the server gave us (not validated); a
        message without a reply subject passes ``PUB <subject>`` and ``reply=b""``.

        Raises:
            ConnectionClosedError: the client is closed (nothing is buffered).
            BadSubjectError: the subject is invalid (nothing is buffered).
            MaxPayloadError: too big for the server (nothing is buffered).
            ReconnectBufferFullError: disconnected, and no room is left to keep it.
            TypeError: ``data`` is not bytes-like (nothing is buffered).
        """
        if self._closed:
            raise ConnectionClosedError(f"cannot publish to {subject!r}: the connection is closed")
        if pre is None:
            pre = self._pub_prefixes.get(subject)
            if pre is None:
                pre = self._pub_prefix(subject)
        wbuf = self._wbuf
        size = len(data) if hdr is None else len(data) + len(hdr)
        if size > self._fast_limit:
            self._check_room(subject, size, wbuf)
        mark = len(wbuf)
        if hdr is None:
            wbuf += b"%b%b %d\r\n" % (pre, reply, size)
        else:
            wbuf += b"H%b%b %d %d\r\n%b" % (pre, reply, len(hdr), size, hdr)
        try:
            wbuf += data
        except TypeError:
            raise _not_bytes(wbuf, mark, data) from None
        wbuf += b"\r\n"
        if now:
            self._out_msgs += 1
            self._out_bytes += size
            self.flush_now()
        else:
            self._written(1, size)

    def write_formatted(self, reply: str, message: bytes, size: int, count: int = 1) -> None:
        """``write_reply`` of a message the caller formatted whole (``PUB <reply>
        <size>\\r\\n<body>\\r\\n``: an ack, formatted with one ``%``), or of ``count``
        of them joined (``size``: their bodies' bytes).

        ``_written`` is inline here: this is the write of every ``JsMsg.ack``, and a
        call less per ack shows in fetch+ack (see docs/design.md, the write path)."""
        if self._closed:
            raise ConnectionClosedError(f"cannot publish to {reply!r}: the connection is closed")
        wbuf = self._wbuf
        wbuf += message
        self._out_msgs += count
        self._out_bytes += size
        if len(wbuf) >= FLUSH_THRESHOLD:
            self.flush_now()
        elif not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush_cb)

    def write_reply(self, reply: str, body: bytes) -> None:
        """Buffer a small message to a subject the server gave us (an ack subject).

        No validation: the parser splits control lines on whitespace, so a reply
        subject cannot carry the characters validation guards against.
        """
        message = b"PUB %b %d\r\n%b\r\n" % (reply.encode(), len(body), body)
        self.write_formatted(reply, message, len(body))

    def _check_room(self, subject: str, size: int, wbuf: bytearray) -> None:
        """Refuse a message too big for the server or for the reconnect buffer."""
        if size > self._max_payload or (
            self._conn is None and len(wbuf) + size > self._opts.reconnect_buf_size
        ):
            self._refuse(subject, size)

    def _pub_prefix(self, subject: str) -> bytes:
        """Validate a publish subject and cache its ``PUB <subject> `` prefix (and make
        room for the heads of ``publish``'s fast path)."""
        validate_subject(subject)
        cache = self._pub_prefixes
        if len(cache) >= 4096:
            cache.clear()
            self._pub_heads.clear()
        pre = cache[subject] = b"PUB " + subject.encode() + b" "
        if len(self._pub_heads) < 1024 and self._tracing is None:
            self._pub_heads[subject] = {}  # a traced publish never takes the fast path
        return pre

    def _refuse(self, subject: str, size: int) -> NoReturn:
        if size > self._max_payload:
            raise MaxPayloadError(
                f"message to {subject!r} is {size} bytes; the server's max_payload is "
                f"{self._max_payload}"
            )
        raise ReconnectBufferFullError(
            f"disconnected, and the reconnect buffer ({self._opts.reconnect_buf_size} "
            f"bytes) cannot take {size} more for {subject!r}"
        )
