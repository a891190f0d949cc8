"""Subject, reply and queue validation; NUIDs and inbox subjects.

The rules follow what the server itself accepts (``IsValidSubject`` and
``IsValidLiteralSubject`` in nats-server), plus one of our own: no control
character anywhere, because a CR or LF in a subject would let a caller inject
protocol lines into the connection.

- A subject is one or more tokens joined by ``.``; no token is empty.
- No token contains a space, a tab, or a control character (below 0x20, or 0x7f).
- A publish or reply subject has no wildcard token: no token is exactly ``*``
  or ``>``. A ``*`` or ``>`` inside a longer token (``a*b``) is an ordinary
  character to the server, so it is accepted here too.
- A subscribe subject may use ``*`` as any whole token and ``>`` as the whole
  last token.

Validation of a publish subject is on the hot path, so the common case (a
plain ASCII subject) is decided by a handful of substring tests and one
``str.isprintable()`` call; only subjects that fail them go through the
token-by-token check that also writes the error message. The client also
caches subjects it has already validated.
"""

from __future__ import annotations

import os
import secrets

from jetstream.errors import BadSubjectError

__all__ = [
    "Nuid",
    "new_inbox",
    "next_nuid",
    "subject_matches",
    "validate_queue",
    "validate_subject",
    "validate_subscribe_subject",
]


def _bad_char(text: str) -> str | None:
    """Describe the first space, tab or control character in ``text``, or None."""
    for ch in text:
        code = ord(ch)
        if code <= 0x20 or code == 0x7F:
            if ch == " ":
                return "contains a space"
            if ch == "\t":
                return "contains a tab"
            if ch == "\r":
                return "contains a carriage return (CR)"
            if ch == "\n":
                return "contains a line feed (LF)"
            if ch == "\x00":
                return "contains a NUL character"
            return f"contains the control character {ch!r}"
    return None


def _check_tokens(subject: str, wildcards: bool) -> str | None:
    """The slow, exact check. Returns the reason ``subject`` is invalid, or None."""
    if not subject:
        return "is empty"
    reason = _bad_char(subject)
    if reason is not None:
        return reason
    if subject[0] == ".":
        return "starts with '.' (empty first token)"
    if subject[-1] == ".":
        return "ends with '.' (empty last token)"
    tokens = subject.split(".")
    last = len(tokens) - 1
    for i, token in enumerate(tokens):
        if not token:
            return "contains '..' (empty token)"
        if token == "*" or token == ">":
            if not wildcards:
                return f"contains the wildcard token {token!r} (not allowed when publishing)"
            if token == ">" and i != last:
                return "has '>' before the last token ('>' must be the last token)"
    return None


def subject_matches(pattern: str, subject: str) -> bool:
    """Whether the literal ``subject`` matches the filter ``pattern`` (``*`` one token,
    ``>`` one or more at the end)."""
    p, s = pattern.split("."), subject.split(".")
    for i, token in enumerate(p):
        if token == ">":
            return len(s) > i
        if i >= len(s) or (token != "*" and token != s[i]):
            return False
    return len(p) == len(s)


def validate_subject(subject: str) -> None:
    """Check a subject to publish to, or a reply subject.

    Args:
        subject: the subject, as given by the caller.

    Raises:
        BadSubjectError: the subject is empty, has an empty token (a leading or
            trailing ``.`` or ``..``), a wildcard token (``*`` or ``>``), or a
            space, tab or control character. Nothing has been sent.
    """
    # Fast path: a plain subject passes these tests and returns here. Anything
    # unusual (wildcard characters, non-ASCII text that isprintable() refuses,
    # or an actual error) takes the exact token-by-token path below.
    if (
        not subject
        or " " in subject
        or ".." in subject
        or "*" in subject
        or ">" in subject
        or subject[0] == "."
        or subject[-1] == "."
        or not subject.isprintable()
    ):
        reason = _check_tokens(subject, wildcards=False)
        if reason is not None:
            raise BadSubjectError(f"invalid subject {subject!r}: {reason}")


def validate_subscribe_subject(subject: str) -> None:
    """Check a subject to subscribe to (wildcards allowed).

    ``*`` may be any whole token and ``>`` the whole last token, for example
    ``orders.*.eu`` or ``orders.>``.

    Raises:
        BadSubjectError: the subject is empty, has an empty token, a ``>`` token
            that is not last, or a space, tab or control character.
    """
    reason = _check_tokens(subject, wildcards=True)
    if reason is not None:
        raise BadSubjectError(f"invalid subscribe subject {subject!r}: {reason}")


def validate_queue(queue: str) -> None:
    """Check a queue group name: non-empty, no space, tab or control character.

    Raises:
        BadSubjectError: the name is empty or contains such a character.
    """
    reason = "is empty" if not queue else _bad_char(queue)
    if reason is not None:
        raise BadSubjectError(f"invalid queue group {queue!r}: {reason}")


# --- NUID -------------------------------------------------------------------

_DIGITS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_BASE = 62
_PREFIX_LEN = 12
_SEQ_LEN = 10
_MAX_SEQ = _BASE**_SEQ_LEN
_MIN_INC = 33
_MAX_INC = 333
# The sequence is kept as a high part (the first 8 digits, rendered into
# ``_head`` together with the prefix) and a low part (the last 2 digits, looked
# up in this table). Every step is below 62**2, so the high part changes -- and
# the head is rebuilt -- at most once per call and usually once in many calls.
_LOW_LEN = 2
_LOW_SPAN = _BASE**_LOW_LEN
_LOW = tuple(a + b for a in _DIGITS for b in _DIGITS)
_HIGH_SPAN = _BASE ** (_SEQ_LEN - _LOW_LEN)


def _base62(value: int, width: int) -> str:
    out = []
    for _ in range(width):
        value, digit = divmod(value, _BASE)
        out.append(_DIGITS[digit])
    return "".join(reversed(out))


class Nuid:
    """Generator of unique 22-character ids (the NATS "NUID" scheme).

    An id is a 12-character random prefix (from ``secrets``) followed by a
    10-character sequence, both in base 62 (``0-9A-Za-z``). The sequence starts
    at a random value and grows by a random step chosen with the prefix; when it
    would pass 62**10 a new prefix, start and step are drawn. Ids are therefore
    unique in practice without coordination, and hard to guess.

    ``next()`` costs a few additions and one string concatenation. An instance
    is not thread-safe; give each thread its own. The module's shared instance
    draws a new prefix in a forked child so parent and child never collide.
    """

    __slots__ = ("_head", "_high", "_inc", "_low", "_prefix")

    def __init__(self) -> None:
        self._prefix = ""
        self._head = ""
        self._high = 0
        self._low = 0
        self._inc = 0
        self.reset()

    def reset(self) -> None:
        """Draw a new random prefix, sequence start and step."""
        self._prefix = "".join(secrets.choice(_DIGITS) for _ in range(_PREFIX_LEN))
        seq = secrets.randbelow(_MAX_SEQ)
        self._inc = _MIN_INC + secrets.randbelow(_MAX_INC - _MIN_INC)
        self._high, self._low = divmod(seq, _LOW_SPAN)
        self._head = self._prefix + _base62(self._high, _SEQ_LEN - _LOW_LEN)

    def next(self) -> str:
        """Return the next id: 22 characters of ``[0-9A-Za-z]``."""
        low = self._low + self._inc
        if low >= _LOW_SPAN:
            self._carry(low)
            low = self._low
        else:
            self._low = low
        return self._head + _LOW[low]

    def _carry(self, low: int) -> None:
        high = self._high + low // _LOW_SPAN
        if high >= _HIGH_SPAN:
            # The sequence space of this prefix is used up: start afresh.
            self.reset()
            return
        self._high = high
        self._low = low % _LOW_SPAN
        self._head = self._prefix + _base62(high, _SEQ_LEN - _LOW_LEN)


_shared = Nuid()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_shared.reset)

#: Return the next id from the module's shared :class:`Nuid`.
next_nuid = _shared.next


def new_inbox(prefix: str = "_INBOX") -> str:
    """Return a fresh inbox subject, ``<prefix>.<nuid>``.

    The prefix is not validated here; callers validate a custom prefix once.
    """
    return f"{prefix}.{_shared.next()}"
