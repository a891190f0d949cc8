"""NATS/1.0 header blocks: the ``Headers`` multi-map, encoding and parsing.

A header block is what ``HPUB`` sends and ``HMSG`` delivers ahead of the payload::

    NATS/1.0[ <status>[ <description>]]\\r\\n
    Key: Value\\r\\n
    ...
    \\r\\n

The status line carries the server's inline status (``100 Idle Heartbeat``,
``404 No Messages``, ``408 Request Timeout``, ``409 Consumer Deleted``,
``503`` no responders...). Keys may repeat; every value is kept.

Encoding is strict: a key must be printable ASCII without ``:`` or space, and no
value may hold CR, LF or another control character, because either would let a
caller forge header lines or protocol lines. ``BadHeaderError`` is raised and
nothing is sent. Parsing is lenient: it never fails on a header line, only on a
block that does not start with ``NATS/1.0``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, MutableMapping, Sequence
from typing import NoReturn, TypeAlias

from jetstream.errors import BadHeaderError, ProtocolError

__all__ = [
    "NATS_EXPECTED_LAST_MSG_ID",
    "NATS_EXPECTED_LAST_SEQUENCE",
    "NATS_EXPECTED_LAST_SUBJECT_SEQUENCE",
    "NATS_EXPECTED_STREAM",
    "NATS_LAST_SEQUENCE",
    "NATS_MSG_ID",
    "NATS_NUM_PENDING",
    "NATS_PENDING_BYTES",
    "NATS_PENDING_MESSAGES",
    "NATS_REQUIRED_API_LEVEL",
    "NATS_ROLLUP",
    "NATS_SEQUENCE",
    "NATS_STREAM",
    "NATS_SUBJECT",
    "NATS_TIME_STAMP",
    "NATS_TTL",
    "Headers",
    "HeadersLike",
    "encode_headers",
    "parse_headers",
]

# Set by the publisher (JetStream publish options and KV/object store operations).
NATS_MSG_ID = "Nats-Msg-Id"
NATS_EXPECTED_STREAM = "Nats-Expected-Stream"
NATS_EXPECTED_LAST_SEQUENCE = "Nats-Expected-Last-Sequence"
NATS_EXPECTED_LAST_SUBJECT_SEQUENCE = "Nats-Expected-Last-Subject-Sequence"
NATS_EXPECTED_LAST_MSG_ID = "Nats-Expected-Last-Msg-Id"
NATS_ROLLUP = "Nats-Rollup"
NATS_TTL = "Nats-TTL"
# Set by the server on direct-get replies and republished messages.
NATS_STREAM = "Nats-Stream"
NATS_SEQUENCE = "Nats-Sequence"
NATS_TIME_STAMP = "Nats-Time-Stamp"
NATS_SUBJECT = "Nats-Subject"
NATS_LAST_SEQUENCE = "Nats-Last-Sequence"
NATS_NUM_PENDING = "Nats-Num-Pending"
# Set by the server on pull-request status messages (408/409): what was not delivered.
NATS_PENDING_MESSAGES = "Nats-Pending-Messages"
NATS_PENDING_BYTES = "Nats-Pending-Bytes"
# Set by the client on a JetStream API request that needs a minimum API level (ADR-44).
NATS_REQUIRED_API_LEVEL = "Nats-Required-Api-Level"

_VERSION = "NATS/1.0"
_FIRST_LINE = _VERSION + "\r\n"


class Headers(MutableMapping[str, str]):
    """Message headers: multi-valued, case preserving, in insertion order.

    ``h[key]`` returns the first value of ``key`` and ``h[key] = value`` replaces
    all of its values; ``add`` appends a value and ``get_all`` returns them all.
    ``len`` and iteration count distinct keys.

    A key is looked up exactly first, then case-insensitively (as HTTP does), so
    ``h["nats-msg-id"]`` finds ``Nats-Msg-Id``. Every operation -- reading,
    setting, adding, deleting -- resolves the key that way, so setting
    ``h["nats-msg-id"]`` replaces the values of an existing ``Nats-Msg-Id`` and
    keeps its spelling. The server compares header names exactly, so the
    spelling a key was first given is the one sent.

    Equality with another ``Headers`` or a plain ``dict`` compares exact keys
    and every value in order (a dict value may be a str or a list of str); the
    order of distinct keys does not matter.
    """

    __slots__ = ("_map",)

    def __init__(
        self,
        init: HeadersLike | Iterable[tuple[str, str]] | None = None,
        /,
    ) -> None:
        self._map: dict[str, list[str]] = {}
        if init is None:
            return
        if isinstance(init, Headers):
            self._map = {k: list(v) for k, v in init._map.items()}
            return
        # Keys are taken exactly as given: {"A": "1", "a": "2"} keeps two keys,
        # just as encode_headers() would send two lines.
        store = self._map
        if isinstance(init, Mapping):
            for key, value in init.items():
                values = [value] if isinstance(value, str) else list(value)
                if values:  # an empty list means no values: no key
                    store[key] = values
            return
        for key, one in init:
            existing = store.get(key)
            if existing is None:
                store[key] = [one]
            else:
                existing.append(one)

    def _find(self, key: str) -> str | None:
        """The stored spelling of ``key``: exact match first, then case-insensitive."""
        if key in self._map:
            return key
        folded = key.lower()
        for stored in self._map:
            if stored.lower() == folded:
                return stored
        return None

    def __getitem__(self, key: str) -> str:
        values = self._map.get(key)
        if values is None:
            stored = self._find(key)
            if stored is None:
                raise KeyError(key)
            values = self._map[stored]
        return values[0]

    def __setitem__(self, key: str, value: str) -> None:
        stored = self._find(key)
        self._map[key if stored is None else stored] = [value]

    def __delitem__(self, key: str) -> None:
        stored = self._find(key)
        if stored is None:
            raise KeyError(key)
        del self._map[stored]

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and (key in self._map or self._find(key) is not None)

    def __iter__(self) -> Iterator[str]:
        return iter(self._map)

    def __len__(self) -> int:
        return len(self._map)

    def add(self, key: str, value: str) -> None:
        """Append ``value`` to the values of ``key`` (creating the key if needed)."""
        stored = self._find(key)
        if stored is None:
            self._map[key] = [value]
        else:
            self._map[stored].append(value)

    def get_all(self, key: str) -> list[str]:
        """Return every value of ``key`` in order (a new list; empty when absent)."""
        stored = self._find(key)
        return [] if stored is None else list(self._map[stored])

    def multi_items(self) -> list[tuple[str, str]]:
        """Return every ``(key, value)`` pair, a repeated key once per value."""
        return [(k, v) for k, values in self._map.items() for v in values]

    def copy(self) -> Headers:
        """Return an independent copy."""
        return Headers(self)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Headers):
            return self._map == other._map
        if isinstance(other, Mapping):
            if len(other) != len(self._map):
                return False
            for key, value in other.items():
                mine = self._map.get(key)
                if mine is None:
                    return False
                if isinstance(value, str):
                    if mine != [value]:
                        return False
                elif not isinstance(value, Sequence) or mine != list(value):
                    return False
            return True
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        inner = ", ".join(
            f"{k!r}: {v[0]!r}" if len(v) == 1 else f"{k!r}: {v!r}" for k, v in self._map.items()
        )
        return f"Headers({{{inner}}})"


HeadersLike: TypeAlias = Mapping[str, str] | Mapping[str, str | Sequence[str]] | Headers
"""What ``headers=`` accepts: a ``Headers``, or a mapping whose values are a
str or a sequence of str (several values for one key)."""

# A key is printable ASCII (0x21-0x7e) other than ':'.
_KEY_OK = re.compile(r"[!-9;-~]+").fullmatch
# A value may hold any character but CR, LF, NUL and the other controls (TAB is allowed).
_VALUE_BAD = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]").search

# Keys already found valid. Programs use a handful of header names, so this turns
# the key check into one set lookup; it is bounded so it cannot grow without limit.
_GOOD_KEYS: set[str] = set()
_GOOD_KEYS_MAX = 1024


def _check_key(key: object) -> None:
    """The slow path of the key check: remember a good key, explain a bad one."""
    if type(key) is str and _KEY_OK(key) is not None:
        if len(_GOOD_KEYS) < _GOOD_KEYS_MAX:
            _GOOD_KEYS.add(key)
        return
    if isinstance(key, str) and _KEY_OK(key) is not None:
        return  # a str subclass: valid, but not worth caching
    raise BadHeaderError(f"invalid header key {key!r}: {_key_problem(key)}")


def _key_problem(key: object) -> str:
    if not isinstance(key, str):
        return f"must be a str, not {type(key).__name__}"
    if not key:
        return "is empty"
    for ch in key:
        if ch == ":":
            return "contains ':'"
        if ch == " ":
            return "contains a space"
        if ch == "\r" or ch == "\n":
            return "contains CR or LF"
        if not "!" <= ch <= "~":
            return f"contains {ch!r} (keys are printable ASCII)"
    return "is invalid"  # pragma: no cover - the regex and this loop agree


def _check_value(key: str, value: str) -> None:
    """The slow path of the value check, for values that are not all printable."""
    match = _VALUE_BAD(value)
    if match is None:
        return  # TAB, or printable-looking text str.isprintable() refuses (U+00A0...)
    ch = match.group()
    if ch == "\r" or ch == "\n":
        problem = "contains CR or LF"
    elif ch == "\x00":
        problem = "contains a NUL character"
    else:
        problem = f"contains the control character {ch!r}"
    raise BadHeaderError(f"invalid value for header {key!r}: {problem}")


def _not_a_str(key: str, value: object) -> NoReturn:
    raise BadHeaderError(
        f"invalid value for header {key!r}: must be a str, not {type(value).__name__}"
    )


def _unencodable(headers: HeadersLike) -> BadHeaderError:
    """The error for a block that failed to encode as UTF-8 (a lone surrogate)."""
    pairs = headers.multi_items() if isinstance(headers, Headers) else headers.items()
    for key, value in pairs:
        for one in [value] if isinstance(value, str) else value:
            try:
                one.encode()
            except UnicodeEncodeError:
                return BadHeaderError(f"invalid value for header {key!r}: not encodable as UTF-8")
    return BadHeaderError("header block not encodable as UTF-8")  # pragma: no cover


def encode_headers(headers: HeadersLike) -> bytes:
    """Encode ``headers`` as the header block of an ``HPUB``.

    Returns ``NATS/1.0\\r\\n`` then one ``Key: Value\\r\\n`` line per value, then
    ``\\r\\n``. Keys keep their spelling and order; text is UTF-8.

    Raises:
        BadHeaderError: a key is empty, not a str, or has a character outside
            printable ASCII, a space or ``:``; or a value is not a str, or holds
            CR, LF, NUL or another control character (TAB is fine), or a lone
            surrogate. Nothing has been sent.
    """
    lines = [_FIRST_LINE]
    append = lines.append
    # A plain dict is checked first: isinstance() against an ABC subclass such
    # as Headers costs more than the rest of a one-header encode.
    if type(headers) is not dict and isinstance(headers, Headers):
        items: Iterable[tuple[str, object]] = headers._map.items()
    else:
        items = headers.items()
    value: object
    for key, value in items:
        if key not in _GOOD_KEYS:
            _check_key(key)
        # str.isprintable() is true for text without control characters, which
        # is nearly every value; the rest (TAB, U+00A0...) take the exact check.
        # Lines are joined by concatenation, which reads a str subclass's data
        # as it is (formatting could call an overridden __format__).
        if isinstance(value, str):
            if not value.isprintable():
                _check_value(key, value)
            append(key + ": " + value + "\r\n")
        elif isinstance(value, (list, tuple)) or (
            isinstance(value, Sequence) and not isinstance(value, (bytes, bytearray))
        ):
            for one in value:
                if not isinstance(one, str):
                    _not_a_str(key, one)
                if not one.isprintable():
                    _check_value(key, one)
                append(key + ": " + one + "\r\n")
        else:
            _not_a_str(key, value)
    append("\r\n")
    try:
        return "".join(lines).encode()
    except UnicodeEncodeError:
        raise _unencodable(headers) from None


def _parse_status(line: str) -> tuple[int, str]:
    """Parse the first line of a block into (status, description)."""
    if not line.startswith(_VERSION):
        raise ProtocolError(f"header block does not start with {_VERSION!r}: {line[:40]!r}")
    rest = line[len(_VERSION) :]
    if not rest.strip():
        return 0, ""
    if rest[0] != " " and rest[0] != "\t":
        raise ProtocolError(f"malformed header status line {line[:60]!r}")
    code, _, description = rest.strip().partition(" ")
    if len(code) != 3 or not (code.isascii() and code.isdigit()):
        raise ProtocolError(f"malformed status code in header status line {line[:60]!r}")
    return int(code), description.strip()


def parse_headers(block: bytes | bytearray | memoryview) -> tuple[int, str, Headers]:
    """Parse a header block as delivered by ``HMSG``.

    Args:
        block: the header bytes, from ``NATS/1.0`` up to and including the blank
            line that ends the block (a missing final blank line is tolerated).

    Returns:
        ``(status, description, headers)``: the inline status code (0 when the
        first line is plain ``NATS/1.0``), its description ("" when none), and
        the headers. Values are stripped of surrounding spaces and tabs; a
        repeated key gets every value. Text is decoded as UTF-8, with invalid
        bytes replaced by U+FFFD.

    Raises:
        ProtocolError: the block does not start with ``NATS/1.0``, or its status
            code is not three digits. Header lines without ``:`` are skipped.
    """
    text = bytes(block).decode("utf-8", "replace")
    # Lines end with CRLF; a bare LF is accepted too (lenient read), so no value
    # ever comes back holding a line break.
    first, _, body = text.partition("\n")
    status, description = _parse_status(first.rstrip("\r"))
    headers = Headers()
    if not body:
        return status, description, headers
    store = headers._map
    for line in body.split("\n"):
        key, colon, value = line.partition(":")
        if not colon:
            continue  # blank line (the end of the block) or junk: skip it
        key = key.strip(" \t")
        if not key:
            continue
        value = value.strip(" \t\r")
        values = store.get(key)
        if values is None:
            store[key] = [value]
        else:
            values.append(value)
    return status, description, headers
