"""Small helpers of the command line: parsing durations and sizes, formatting numbers,
and the timeout wrapper every network await goes through."""

from __future__ import annotations

import asyncio
import base64
import datetime as _dt
import urllib.parse
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any, TypeVar

from ..errors import TimeoutError as NatsTimeoutError
from ..protocol.headers import Headers
from ._args import parse_duration, parse_header, parse_size

__all__ = [
    "CliError",
    "b64",
    "bounded",
    "fmt_bytes",
    "fmt_duration",
    "fmt_num",
    "fmt_time",
    "headers_dict",
    "one_line",
    "parse_duration",
    "parse_header",
    "parse_size",
    "payload_doc",
    "redact_url",
    "text_of",
]

T = TypeVar("T")


class CliError(Exception):
    """An expected failure of a command: printed as ``error: <message>``, exit status 1."""


def fmt_num(n: float) -> str:
    """``1234567`` -> ``1,234,567``."""
    return f"{n:,.0f}"


def fmt_bytes(n: float) -> str:
    """``1536`` -> ``1.5 KiB``."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


def fmt_duration(seconds: float | None) -> str:
    """``5400`` -> ``1h30m``; ``0``/None -> ``-`` (unlimited)."""
    if not seconds:
        return "-"
    if seconds < 1:
        return f"{seconds * 1000:g}ms"
    s = round(seconds)
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if s >= size:
            parts.append(f"{s // size}{unit}")
            s %= size
    return "".join(parts) or "0s"


def fmt_time(t: _dt.datetime | None) -> str:
    """A UTC timestamp to the second; ``-`` for none (Go's zero time included)."""
    from ..api import ZERO_TIME  # (the API's Structs: not for the core commands)

    if t is None or t == ZERO_TIME:
        return "-"
    return t.astimezone(_dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def b64(data: bytes | None) -> str:
    """Bytes as standard base64 (what the JetStream API uses for message data in JSON)."""
    return base64.b64encode(data or b"").decode()


def payload_doc(data: bytes | None, key: str = "data") -> dict[str, str]:
    """A payload as JSON fields: ``{key: text}`` when it is valid UTF-8, so that a JSON
    or text body reads at a glance; other bytes as ``{key: base64,
    key_encoding: "base64"}``."""
    raw = bytes(data or b"")
    try:
        return {key: raw.decode()}
    except UnicodeDecodeError:
        return {key: b64(raw), f"{key}_encoding": "base64"}


def text_of(data: bytes | None, limit: int | None = None) -> str:
    """A payload as text to print: itself when it is valid UTF-8 (cut to ``limit``
    characters with ``...``), else ``<binary, N bytes>``, never a guess with U+FFFD in
    place of the bytes it could not read (``--raw`` writes them as they are, ``--json``
    in base64)."""
    raw = bytes(data or b"")
    try:
        text = raw.decode()
    except UnicodeDecodeError:
        return f"<binary, {len(raw):,} bytes>"
    if limit is not None and len(text) > limit:
        text = text[: limit - 3] + "..."
    return text


def headers_dict(headers: Mapping[str, Any] | None) -> dict[str, list[str]]:
    """Headers as ``{name: [values...]}`` (multi-valued headers keep every value)."""
    out: dict[str, list[str]] = {}
    if not headers:
        return out
    if isinstance(headers, Headers):
        for key, value in headers.multi_items():
            out.setdefault(key, []).append(value)
        return out
    for key, value in headers.items():
        out[key] = [str(v) for v in value] if isinstance(value, list) else [str(value)]
    return out


def redact_url(url: str) -> str:
    """A server URL without its user info (never print credentials)."""
    parts = []
    for one in url.split(","):
        one = one.strip()
        try:
            parsed = urllib.parse.urlsplit(one if "://" in one else "nats://" + one)
        except ValueError:
            parts.append("<invalid url>")
            continue
        if parsed.username is not None or parsed.password is not None:
            host = parsed.hostname or ""
            if ":" in host:
                host = f"[{host}]"
            netloc = host + (f":{parsed.port}" if parsed.port else "")
            one = urllib.parse.urlunsplit(parsed._replace(netloc="***@" + netloc))
        parts.append(one)
    return ",".join(parts)


def one_line(exc: BaseException, secrets: Sequence[str] = ()) -> str:
    """An exception as one line of text, with every secret blanked out."""
    if isinstance(exc, OSError) and exc.strerror:
        text = exc.strerror
        if exc.filename is not None:
            text += f": {exc.filename}"
    else:
        text = str(exc) or type(exc).__name__
    text = " ".join(text.split())
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


async def bounded(aw: Awaitable[T], timeout: float, what: str) -> T:
    """Await ``aw`` for at most ``timeout`` seconds; then raise the library's TimeoutError
    saying ``what`` did not finish (a bare ``asyncio`` timeout has no message)."""
    try:
        async with asyncio.timeout(timeout):
            return await aw
    except TimeoutError as exc:
        if isinstance(exc, NatsTimeoutError):
            raise
        raise NatsTimeoutError(f"{what}: no answer within {timeout:g}s") from None
