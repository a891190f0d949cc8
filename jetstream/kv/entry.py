"""KeyValue entries, operations and name validation.

A bucket ``B`` is the stream ``KV_B``; the key ``k`` is the subject ``$KV.B.k``.
Each message on that subject is one revision of the key: its stream sequence is
the revision, its payload the value, and its ``KV-Operation`` header (absent for
a put) says whether it deleted or purged the key. Server limit markers (a
``Nats-Marker-Reason`` header, server 2.11+) count as deletes or purges too.
"""

from __future__ import annotations

import datetime as _dt
import enum
import re
from typing import ClassVar

import msgspec

from ..core.message import Msg
from ..errors import BadNameError
from ..message import ack_stream_index
from ..protocol.headers import Headers

__all__ = [
    "KV_OPERATION",
    "MARKER_REASON",
    "KeyValueEntry",
    "KeyValueOp",
    "Watched",
    "operation_of",
    "validate_bucket",
    "validate_key",
    "validate_key_filter",
    "watched_class",
]

#: Header telling a delete (``DEL``) or purge (``PURGE``) from a put.
KV_OPERATION = "KV-Operation"
#: Header the server sets on the markers it writes when a limit removes a key (2.11+).
MARKER_REASON = "Nats-Marker-Reason"

_BUCKET_RE = re.compile(r"[a-zA-Z0-9_-]+")
_KEY_RE = re.compile(r"[-/_=.a-zA-Z0-9]+")
_FILTER_RE = re.compile(r"[-/_=.a-zA-Z0-9*]*>?")


class KeyValueOp(enum.StrEnum):
    """What a revision did to its key (the ``KV-Operation`` header value)."""

    PUT = "PUT"
    DEL = "DEL"
    PURGE = "PURGE"


def operation_of(headers: Headers | None) -> KeyValueOp:
    """The operation a message's headers describe (a put when there are none)."""
    if not headers:
        return KeyValueOp.PUT
    op = headers.get(KV_OPERATION)
    if op is not None:
        if op == "DEL":
            return KeyValueOp.DEL
        if op == "PURGE":
            return KeyValueOp.PURGE
        return KeyValueOp.PUT
    reason = headers.get(MARKER_REASON)
    if reason is not None:
        # A server limit marker: a max-age or purge removal is a purge, "Remove" a delete.
        return KeyValueOp.DEL if reason == "Remove" else KeyValueOp.PURGE
    return KeyValueOp.PUT


class _EntryType(msgspec.StructMeta):
    """``KeyValueEntry``'s type: a watcher's entries (``Watched``), which are the
    messages its consumer delivered, are ``KeyValueEntry`` instances too."""

    def __instancecheck__(cls, obj: object) -> bool:
        return type.__instancecheck__(cls, obj) or (
            cls is KeyValueEntry and type.__instancecheck__(Watched, obj)
        )

    def __subclasscheck__(cls, sub: type) -> bool:
        return type.__subclasscheck__(cls, sub) or (
            cls is KeyValueEntry and type.__subclasscheck__(Watched, sub)
        )


class KeyValueEntry(msgspec.Struct, metaclass=_EntryType, eq=False, gc=False):
    """One revision of one key.

    A watcher's entries are of a subclass of ``Msg`` that reads these attributes from
    the message its consumer delivered, on first access (``isinstance(e, KeyValueEntry)``
    holds for them too).

    Attributes:
        bucket: the bucket's name.
        key: the key.
        value: the value (empty for a delete or purge, and for ``meta_only`` watches).
        revision: the stream sequence of this revision (unique in the bucket).
        created: when the server stored it (UTC).
        delta: how many newer revisions of watched keys the server had at delivery
            (0 for a plain ``get``).
        operation: ``PUT``, ``DEL`` or ``PURGE``.
    """

    bucket: str
    key: str
    value: bytes
    revision: int
    # a datetime, or nanoseconds since the epoch turned into one when first read
    _created: _dt.datetime | int
    delta: int = 0
    operation: KeyValueOp = KeyValueOp.PUT

    @property
    def created(self) -> _dt.datetime:
        """When the server stored this revision (UTC)."""
        c = self._created
        if isinstance(c, int):
            c = self._created = _dt.datetime.fromtimestamp(c / 1e9, tz=_dt.UTC)
        return c

    def __repr__(self) -> str:
        return (
            f"<KeyValueEntry {self.bucket}/{self.key} rev={self.revision} "
            f"{self.operation.value} {self.value[:32]!r}>"
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, KeyValueEntry):
            return NotImplemented
        return (
            self.bucket == other.bucket
            and self.key == other.key
            and self.value == other.value
            and self.revision == other.revision
            and self.operation == other.operation
        )

    __hash__ = None  # type: ignore[assignment]


class Watched(Msg, gc=False):
    """A watcher's entry: the message its consumer delivered, made by the parser
    (``Client.msg_class``), one object a revision, with a ``KeyValueEntry``'s
    attributes. The key is its subject past the bucket's prefix, the value its payload;
    the revision, time and pending count are read from its ack subject, and the
    operation from its headers (a put has none), on first access. Made per bucket by
    ``watched_class``."""

    _bucket: ClassVar[str] = ""
    #: the length of the subject prefix the bucket's keys are stored under
    _cut: ClassVar[int] = 0
    #: (revision, nanoseconds, pending) read from the ack subject, once
    _ack: tuple[int, int, int] | None = None

    @property
    def bucket(self) -> str:
        """The bucket's name."""
        return self._bucket

    @property
    def key(self) -> str:
        """The key."""
        return self.subject[self._cut :]

    @property
    def value(self) -> bytes:
        """The value (empty for a delete or purge, and for ``meta_only`` watches)."""
        return self.payload

    def _numbers(self) -> tuple[int, int, int]:
        a = self._ack
        if a is None:
            t = (self.reply or "").split(".")
            at = ack_stream_index(len(t))
            a = self._ack = (int(t[at + 3]), int(t[at + 5]), int(t[at + 6]))
        return a

    @property
    def revision(self) -> int:
        """The stream sequence of this revision."""
        return self._numbers()[0]

    @property
    def created(self) -> _dt.datetime:
        """When the server stored this revision (UTC)."""
        return _dt.datetime.fromtimestamp(self._numbers()[1] / 1e9, tz=_dt.UTC)

    @property
    def delta(self) -> int:
        """How many newer revisions of watched keys the server had at delivery."""
        return self._numbers()[2]

    @property
    def operation(self) -> KeyValueOp:
        """``PUT``, ``DEL`` or ``PURGE``."""
        hdr = self.hdr
        if hdr is None or not (b"KV-Operation" in hdr or b"Nats-Marker-Reason" in hdr):
            return KeyValueOp.PUT
        return operation_of(self.headers)

    __repr__ = KeyValueEntry.__repr__
    __eq__ = KeyValueEntry.__eq__
    __hash__ = None  # type: ignore[assignment]


_WATCHED: dict[tuple[str, int], type[Watched]] = {}


def watched_class(bucket: str, prefix: str) -> type[Watched]:
    """The class of the entries of a watcher of ``bucket`` (its keys stored under
    ``prefix``): one per bucket name and prefix length, made once."""
    key = (bucket, len(prefix))
    cls = _WATCHED.get(key)
    if cls is None:
        ns = {"_bucket": bucket, "_cut": len(prefix), "__module__": __name__}
        cls = _WATCHED[key] = type("KeyValueEntry", (Watched,), ns)
    return cls


def validate_bucket(bucket: str) -> None:
    """Check a bucket name: letters, digits, ``_`` and ``-`` only.

    Raises:
        BadNameError: the name is invalid (nothing is sent).
    """
    if not isinstance(bucket, str) or not _BUCKET_RE.fullmatch(bucket):
        raise BadNameError(f"invalid bucket name {bucket!r}: use letters, digits, '_' and '-'")


def validate_key(key: str) -> None:
    """Check a key: letters, digits and ``-/_=.``, not starting or ending with ``.``.

    Raises:
        BadNameError: the key is invalid (nothing is sent).
    """
    if (
        not isinstance(key, str)
        or not _KEY_RE.fullmatch(key)
        or key[0] == "."
        or key[-1] == "."
        or ".." in key
    ):
        raise BadNameError(
            f"invalid key {key!r}: use letters, digits and '-/_=.', "
            "with no leading, trailing or doubled '.'"
        )


def validate_key_filter(key: str) -> None:
    """Check a key filter for watch/keys: a key whose tokens may be ``*``, or end in ``>``.

    Raises:
        BadNameError: the filter is invalid (nothing is sent).
    """
    if (
        not isinstance(key, str)
        or not key
        or not _FILTER_RE.fullmatch(key)
        or key[0] == "."
        or key[-1] == "."
        or ".." in key
    ):
        raise BadNameError(f"invalid key filter {key!r}")
    for token in key.split("."):
        if ("*" in token or ">" in token) and token not in ("*", ">"):
            raise BadNameError(f"invalid key filter {key!r}: wildcards must be whole tokens")
