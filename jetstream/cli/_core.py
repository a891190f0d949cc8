"""Core NATS verbs: ``pub``, ``sub``, ``req``, ``reply``; and how messages are printed."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

from ..errors import TimeoutError as NatsTimeoutError
from ..protocol.headers import Headers
from ._output import Output
from ._session import Session
from ._util import CliError, bounded, headers_dict, payload_doc, text_of

if TYPE_CHECKING:
    from ..core.message import Msg
    from ..core.subscription import Subscription

__all__ = [
    "body_of",
    "cmd_pub",
    "cmd_reply",
    "cmd_req",
    "cmd_sub",
    "headers_of",
    "print_msg",
    "render",
]


def body_of(body: str | None) -> bytes:
    """The message body: the argument, or stdin when it is missing or ``-``. An argument
    is the bytes the shell gave, UTF-8 or not (``os.fsencode``)."""
    if body is None or body == "-":
        return sys.stdin.buffer.read()
    return os.fsencode(body)


def render(template: bytes, n: int) -> bytes:
    """Replace ``{{Count}}`` (or ``{{.Count}}``) with the message number ``n``."""
    if b"{{" not in template:
        return template
    count = str(n).encode()
    return template.replace(b"{{Count}}", count).replace(b"{{.Count}}", count)


def headers_of(pairs: list[tuple[str, str]] | None) -> Headers | None:
    """``-H k:v`` options as Headers (repeated keys keep every value)."""
    return Headers(pairs) if pairs else None


def print_msg(
    out: Output,
    n: int,
    subject: str,
    data: bytes,
    headers: Mapping[str, Any] | None,
    *,
    reply: str | None = None,
    raw: bool | str = False,
    title: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> None:
    """Print one message: a JSON line, its body only (``raw``), or a titled block.

    ``raw``: True writes the body as it is, byte for byte (a command that prints one
    message); "lines" writes each body on a line of its own, a newline added unless it
    ends with one (a command that prints a stream of them). A titled block shows a body
    that is not UTF-8 as ``<binary, N bytes>``.
    """
    if out.json:
        doc: dict[str, Any] = {"subject": subject}
        if reply:
            doc["reply"] = reply
        if extra:
            doc.update(extra)
        doc["headers"] = headers_dict(headers)
        doc.update(payload_doc(data))
        out.json_line(doc)
        return
    if raw == "lines":
        out.raw(data + (b"" if data.endswith(b"\n") else b"\n"))
        return
    if raw:
        out.raw(data)
        return
    head = title or f'[#{n}] Received on "{subject}"'
    if reply:
        head += f' with reply "{reply}"'
    out.line(head)
    for key, values in headers_dict(headers).items():
        for value in values:
            out.line(f"{key}: {value}")
    if headers:
        out.line()
    out.line(text_of(data))
    out.line()


async def cmd_pub(s: Session) -> int:
    a, out = s.args, s.out
    template = body_of(a.body)
    headers = headers_of(a.header)
    total = 0
    for n in range(1, a.count + 1):
        data = render(template, n)
        total += len(data)
        if a.jetstream:
            msg_id = render(a.msg_id.encode(), n).decode() if a.msg_id else None
            ack = await s.js.publish(a.subject, data, headers=headers, msg_id=msg_id)
            if out.json:
                out.json_line(ack)
            else:
                dup = " (duplicate)" if ack.duplicate else ""
                out.line(f"Stored in stream {ack.stream} at sequence {ack.seq}{dup}")
        else:
            await s.nc.publish(a.subject, data, headers=headers, reply=a.reply)
        if a.sleep:
            await s.nc.flush(timeout=s.timeout)
            await asyncio.sleep(a.sleep)
    if not a.jetstream:
        await s.nc.flush(timeout=s.timeout)
        if out.json:
            out.json_line({"subject": a.subject, "count": a.count, "bytes": total})
        else:
            what = "1 message" if a.count == 1 else f"{a.count} messages"
            out.line(f'Published {what} ({total} bytes) to "{a.subject}"')
    return 0


async def _incoming(s: Session, sub: Subscription, what: str) -> AsyncIterator[tuple[int, Msg]]:
    """``(n, msg)`` for each message, until ``--count`` messages or ``--wait`` seconds
    without one (short of ``--count``: an error naming ``what`` was expected)."""
    a = s.args
    n = 0
    while a.count is None or n < a.count:
        try:
            msg = await sub.next_msg(timeout=a.wait)
        except NatsTimeoutError:
            if a.count is not None:
                raise CliError(f"got {n} of {a.count} {what}: none for {a.wait:g}s") from None
            return
        n += 1
        yield n, msg


async def cmd_sub(s: Session) -> int:
    a, out = s.args, s.out
    sub = await s.nc.subscribe(a.subject, queue=a.queue or None)
    await s.nc.flush(timeout=s.timeout)  # the server has the SUB: nothing published now is missed
    group = f" in queue group {a.queue}" if a.queue else ""
    out.info(f'Subscribing on "{a.subject}"{group}')
    async for n, msg in _incoming(s, sub, "messages"):
        print_msg(
            out,
            n,
            msg.subject,
            msg.data,
            msg.headers if msg.raw_headers else None,
            reply=msg.reply,
            raw="lines" if a.raw else False,
        )
    await sub.unsubscribe()
    return 0


async def cmd_req(s: Session) -> int:
    a, out = s.args, s.out
    data = body_of(a.body)
    start = time.perf_counter()
    msg = await s.nc.request(a.subject, data, timeout=s.timeout, headers=headers_of(a.header))
    rtt = time.perf_counter() - start
    print_msg(
        out,
        1,
        msg.subject,
        msg.data,
        msg.headers if msg.raw_headers else None,
        raw=a.raw,
        title=f"Received a reply in {rtt * 1000:.2f}ms",
        extra={"rtt_seconds": round(rtt, 6)},
    )
    return 0


async def cmd_reply(s: Session) -> int:
    a, out = s.args, s.out
    template = body_of(a.body)
    sub = await s.nc.subscribe(a.subject, queue=a.queue or None)
    await s.nc.flush(timeout=s.timeout)
    out.info(f'Listening on "{a.subject}" for requests')
    async for n, msg in _incoming(s, sub, "requests"):
        if not msg.reply:
            out.warn(f'a message on "{msg.subject}" has no reply subject; not answered')
            continue
        await msg.respond(render(template, n))
        print_msg(out, n, msg.subject, msg.data, msg.headers if msg.raw_headers else None)
    await bounded(s.nc.flush(timeout=s.timeout), s.timeout + 1, "flush the replies")
    await sub.unsubscribe()
    return 0
