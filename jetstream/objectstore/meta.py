"""The JSON of the object store: object info, metadata, links, bucket config and status.

An object's info is one message on ``$O.<bucket>.M.<base64url(name)>`` (the last one
wins, older ones are rolled up). Its field names and omissions follow the Go
client's ``ObjectInfo`` so every NATS client reads what this one writes, and the
other way round. Two wire quirks are absorbed here:

* ``mtime`` is kept as the string it was written as: the Go client writes its zero
  time, nats-py an ISO timestamp, or an empty string on a delete marker. When an
  info is read from the stream it carries the stored message's time instead (what
  Go does), and ``ObjectInfo.modified`` parses it.
* ``size`` and ``chunks`` are always written, even when zero: nats-py reads a
  missing ``size`` as "unknown" and then waits for chunks that never come.
"""

from __future__ import annotations

import base64
import binascii
import datetime as _dt
import re
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from ..api import Placement, StorageType, StreamInfo

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "ObjectInfo",
    "ObjectLink",
    "ObjectMeta",
    "ObjectMetaOptions",
    "ObjectStoreConfig",
    "ObjectStoreStatus",
    "decode_digest",
    "decode_info",
    "encode_info",
    "format_digest",
    "validate_bucket",
]

_BUCKET = re.compile(r"^[a-zA-Z0-9_-]+$")


def validate_bucket(bucket: str) -> None:
    """Check a bucket name: letters, digits, '-' and '_' only.

    Raises:
        ValueError: the name is invalid (nothing is sent).
    """
    if not isinstance(bucket, str) or not _BUCKET.match(bucket):
        raise ValueError(f"invalid object store bucket name {bucket!r}: use [a-zA-Z0-9_-]+")


#: The chunk size of the other clients (128 KiB).
DEFAULT_CHUNK_SIZE = 128 * 1024

_DIGEST_PREFIX = "SHA-256="
_HEX = re.compile(r"^[0-9a-fA-F]{64}$")


class ObjectLink(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Where a link points: an object (``name`` set) or a whole bucket (``name`` empty)."""

    bucket: str
    name: str = ""


class ObjectMetaOptions(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Per-object options: a link, and the chunk size the object was written with."""

    link: ObjectLink | None = None
    max_chunk_size: int = 0


class ObjectMeta(msgspec.Struct, kw_only=True, omit_defaults=True):
    """What a user says about an object: its name, description, headers and metadata."""

    name: str
    description: str = ""
    headers: dict[str, list[str]] | None = None
    metadata: dict[str, str] | None = None
    options: ObjectMetaOptions | None = None


class ObjectInfo(msgspec.Struct, kw_only=True, omit_defaults=True):
    """An object's meta plus where and how it is stored (the JSON of its info message).

    ``digest`` is ``SHA-256=<base64url, padded>`` of the content; a deleted object
    keeps only its name, bucket and nuid with ``deleted`` set.
    """

    name: str
    description: str | None = None
    headers: dict[str, list[str]] | None = None
    metadata: dict[str, str] | None = None
    options: ObjectMetaOptions | None = None
    bucket: str = ""
    nuid: str = ""
    size: int = 0
    mtime: str = ""
    chunks: int = 0
    digest: str | None = None
    deleted: bool = False

    @property
    def modified(self) -> _dt.datetime | None:
        """``mtime`` as a datetime (None when it is empty or unparseable)."""
        return _parse_time(self.mtime)

    @property
    def link(self) -> ObjectLink | None:
        """The link this info is, or None for a real object."""
        return self.options.link if self.options is not None else None

    @property
    def is_link(self) -> bool:
        return self.link is not None

    @property
    def chunk_size(self) -> int:
        """The chunk size written in the options (0: unknown)."""
        return self.options.max_chunk_size if self.options is not None else 0


_INFO = msgspec.json.Decoder(ObjectInfo)
_ENC = msgspec.json.Encoder()


def decode_info(data: bytes) -> ObjectInfo:
    """Decode an info message (raises ``msgspec.DecodeError`` on bad JSON)."""
    return _INFO.decode(data)


def encode_info(info: ObjectInfo) -> bytes:
    """Encode an info message as the other clients expect it (see the module doc)."""
    d: dict[str, Any] = msgspec.to_builtins(info)
    d["size"] = info.size
    d["chunks"] = info.chunks
    d["bucket"] = info.bucket
    d["nuid"] = info.nuid
    if not info.mtime:
        d["mtime"] = format_time(_dt.datetime.now(_dt.UTC))
    else:
        d["mtime"] = info.mtime
    return _ENC.encode(d)


def format_time(t: _dt.datetime) -> str:
    """RFC 3339 in UTC with a ``Z``, as Go writes it."""
    return t.astimezone(_dt.UTC).isoformat().replace("+00:00", "Z")


def _parse_time(s: str) -> _dt.datetime | None:
    if not s:
        return None
    try:
        return msgspec.json.decode(b'"%s"' % s.encode(), type=_dt.datetime)
    except (msgspec.DecodeError, ValueError):
        return None


def format_digest(sha256: bytes) -> str:
    """``SHA-256=`` and the padded base64url of a SHA-256 digest (what clients write)."""
    return _DIGEST_PREFIX + base64.urlsafe_b64encode(sha256).decode()


def decode_digest(digest: str) -> bytes | None:
    """The 32 raw bytes of a recorded digest, or None when it cannot be read.

    Accepts ``SHA-256=`` (any case) followed by base64url, padded or not, standard
    base64, or 64 hex digits.
    """
    value = digest.strip()
    if value[:8].upper() == _DIGEST_PREFIX:
        value = value[8:]
    if _HEX.match(value):
        return bytes.fromhex(value)
    raw = value.rstrip("=")
    raw += "=" * (-len(raw) % 4)
    try:
        if "+" in raw or "/" in raw:
            out = base64.b64decode(raw, validate=True)
        else:
            out = base64.urlsafe_b64decode(raw)
    except (binascii.Error, ValueError):
        return None
    return out if len(out) == 32 else None


def normalize_headers(
    headers: Mapping[str, str | Sequence[str]] | None,
) -> dict[str, list[str]] | None:
    """Object headers as the wire wants them: each name to a list of values."""
    if not headers:
        return None
    out: dict[str, list[str]] = {}
    for k, v in headers.items():
        out[k] = [v] if isinstance(v, str) else list(v)
    return out


class ObjectStoreConfig(msgspec.Struct, kw_only=True):
    """An object store bucket's configuration (turned into the ``OBJ_<bucket>`` stream).

    ``ttl`` is in seconds (None: objects never expire); ``max_bytes`` None means no
    limit; ``compression`` stores chunks S2-compressed.
    """

    bucket: str
    description: str | None = None
    ttl: float | None = None
    max_bytes: int | None = None
    storage: StorageType = StorageType.FILE
    replicas: int = 1
    placement: Placement | None = None
    compression: bool = False
    metadata: dict[str, str] | None = None


class ObjectStoreStatus(msgspec.Struct, kw_only=True, frozen=True):
    """A bucket's config and usage, read from its stream's info."""

    bucket: str
    description: str
    ttl: float
    storage: StorageType
    replicas: int
    sealed: bool
    size: int
    compressed: bool
    metadata: dict[str, str]
    backing_store: str = "JetStream"
    #: the backing stream's info (a ``StreamInfo``)
    stream_info: Any = None


def status_from_info(bucket: str, info: StreamInfo) -> ObjectStoreStatus:
    """The status of a bucket from the info of its ``OBJ_<bucket>`` stream."""
    cfg = info.config
    ttl = cfg.max_age if isinstance(cfg.max_age, float) else 0.0
    comp = cfg.compression
    return ObjectStoreStatus(
        bucket=bucket,
        description=cfg.description if isinstance(cfg.description, str) else "",
        ttl=float(ttl),
        storage=cfg.storage,
        replicas=cfg.num_replicas if isinstance(cfg.num_replicas, int) else 1,
        sealed=cfg.sealed is True,
        size=info.state.bytes,
        compressed=isinstance(comp, str) and comp == "s2",
        metadata=dict(cfg.metadata) if isinstance(cfg.metadata, dict) else {},
        stream_info=info,
    )
