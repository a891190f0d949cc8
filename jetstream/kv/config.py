"""A bucket's configuration and status, and the ``KV_<bucket>`` stream config they map to.

(The layout is described in ``bucket.py``.)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import msgspec

from ..api import (
    DiscardPolicy,
    Placement,
    RePublish,
    StorageType,
    StoreCompression,
    StreamConfig,
    StreamInfo,
    StreamSource,
    SubjectTransformConfig,
)
from .entry import validate_bucket

__all__ = ["MAX_HISTORY", "STREAM_PREFIX", "SUBJECT_PREFIX", "KeyValueConfig", "KeyValueStatus"]

STREAM_PREFIX = "KV_"
SUBJECT_PREFIX = "$KV."
MAX_HISTORY = 64
_DEFAULT_DUPLICATE_WINDOW = 120.0


@dataclasses.dataclass(kw_only=True)
class KeyValueConfig:
    """A bucket's configuration (``js.create_key_value(...)`` takes the same keywords).

    Attributes:
        bucket: the name: letters, digits, ``_`` and ``-``.
        description: free text.
        max_value_size: the largest value in bytes (-1: the server's max payload).
        history: revisions kept per key, 1 to 64.
        ttl: seconds a revision lives (0: forever).
        max_bytes: the bucket's size limit in bytes (-1: none); puts fail when full.
        storage: file or memory.
        replicas: copies in a cluster (1 to 5).
        placement: cluster/tags for the replicas.
        republish: republish every change to another subject.
        mirror: make this bucket a read-only mirror of another bucket (``KV_`` is
            added to the source name when missing).
        sources: aggregate other buckets into this one (their keys are mapped into
            this bucket's subjects).
        compression: S2-compress the stored messages.
        limit_marker_ttl: seconds the markers live that the server leaves when a limit
            removes a key (server 2.11+); also enables per-key TTLs.
        allow_msg_ttl: allow ``put(..., ttl=)`` / ``create(..., ttl=)`` (server 2.11+).
        metadata: free key/value pairs stored with the bucket.
    """

    bucket: str
    description: str = ""
    max_value_size: int = -1
    history: int = 1
    ttl: float = 0.0
    max_bytes: int = -1
    storage: StorageType = StorageType.FILE
    replicas: int = 1
    placement: Placement | None = None
    republish: RePublish | None = None
    mirror: StreamSource | None = None
    sources: Sequence[StreamSource] = ()
    compression: bool = False
    limit_marker_ttl: float = 0.0
    allow_msg_ttl: bool = False
    metadata: Mapping[str, str] | None = None

    def to_stream_config(self) -> StreamConfig:
        """The ``KV_<bucket>`` stream config this bucket config maps to.

        Raises:
            BadNameError: the bucket name is invalid.
            ValueError: ``history`` is not 1..64, or a negative ttl.
        """
        validate_bucket(self.bucket)
        history = self.history or 1
        if not 1 <= history <= MAX_HISTORY:
            raise ValueError(f"history must be 1 to {MAX_HISTORY}, not {history}")
        if self.ttl < 0 or self.limit_marker_ttl < 0:
            raise ValueError("ttl and limit_marker_ttl must not be negative")
        dup = _DEFAULT_DUPLICATE_WINDOW
        if 0 < self.ttl < dup:
            dup = self.ttl
        cfg = StreamConfig(
            name=STREAM_PREFIX + self.bucket,
            max_msgs_per_subject=history,
            max_bytes=self.max_bytes or -1,
            max_age=self.ttl,
            max_msg_size=self.max_value_size or -1,
            max_msgs=-1,
            max_consumers=-1,
            storage=self.storage,
            num_replicas=self.replicas or 1,
            allow_rollup_hdrs=True,
            deny_delete=True,
            allow_direct=True,
            discard=DiscardPolicy.NEW,
            duplicate_window=dup,
            compression=StoreCompression.S2 if self.compression else StoreCompression.NONE,
        )
        if self.description:
            cfg.description = self.description
        if self.placement is not None:
            cfg.placement = self.placement
        if self.republish is not None:
            cfg.republish = self.republish
        if self.metadata:
            cfg.metadata = dict(self.metadata)
        if self.limit_marker_ttl > 0:
            cfg.subject_delete_marker_ttl = self.limit_marker_ttl
            cfg.allow_msg_ttl = True
        elif self.allow_msg_ttl:
            cfg.allow_msg_ttl = True
        if self.mirror is not None:
            mirror = _copy_source(self.mirror)
            if not mirror.name.startswith(STREAM_PREFIX):
                mirror.name = STREAM_PREFIX + mirror.name
            cfg.mirror = mirror
            cfg.mirror_direct = True
        else:
            cfg.subjects = [f"{SUBJECT_PREFIX}{self.bucket}.>"]
            if self.sources:
                cfg.sources = [self._source(s) for s in self.sources]
        return cfg

    def _source(self, source: StreamSource) -> StreamSource:
        src = _copy_source(source)
        if not src.name.startswith(STREAM_PREFIX):
            src.name = STREAM_PREFIX + src.name
        origin = src.name[len(STREAM_PREFIX) :]
        if not src.subject_transforms and not src.filter_subject and origin != self.bucket:
            # The source's keys land under this bucket's subjects.
            src.subject_transforms = [
                SubjectTransformConfig(
                    src=f"{SUBJECT_PREFIX}{origin}.>", dest=f"{SUBJECT_PREFIX}{self.bucket}.>"
                )
            ]
        return src

    @classmethod
    def from_stream_config(cls, cfg: StreamConfig) -> KeyValueConfig:
        """The bucket config of a ``KV_<bucket>`` stream config."""
        return cls(
            bucket=cfg.name[len(STREAM_PREFIX) :],
            description=cfg.description or "",
            max_value_size=cfg.max_msg_size or -1,
            history=cfg.max_msgs_per_subject or 1,
            ttl=float(cfg.max_age or 0.0),
            max_bytes=cfg.max_bytes or -1,
            storage=cfg.storage,
            replicas=cfg.num_replicas or 1,
            placement=cfg.placement or None,
            republish=cfg.republish or None,
            mirror=cfg.mirror or None,
            sources=list(cfg.sources or ()),
            compression=cfg.compression == StoreCompression.S2,
            limit_marker_ttl=float(cfg.subject_delete_marker_ttl or 0.0),
            allow_msg_ttl=bool(cfg.allow_msg_ttl),
            metadata=dict(cfg.metadata or {}),
        )


def _copy_source(source: StreamSource) -> StreamSource:
    """A copy of a StreamSource (a msgspec Struct) that can be changed freely."""
    return msgspec.structs.replace(source)


class KeyValueStatus:
    """A bucket's status: ``await kv.status()``.

    Attributes:
        bucket: the bucket's name.
        values: revisions stored (every kept revision of every key, markers included).
        history: revisions kept per key.
        ttl: seconds a revision lives (0: forever).
        bytes: bytes stored.
        backing_store: always ``"JetStream"``.
        is_compressed: the stream is S2-compressed.
        limit_marker_ttl: seconds limit markers live (0: no markers).
        metadata: the bucket's metadata.
        stream_info: the ``KV_<bucket>`` stream's info.
    """

    backing_store = "JetStream"

    def __init__(self, bucket: str, info: StreamInfo) -> None:
        cfg = info.config
        self.bucket = bucket
        self.stream_info = info
        self.values = info.state.messages
        self.history = cfg.max_msgs_per_subject or 1
        self.ttl = float(cfg.max_age or 0.0)
        self.bytes = info.state.bytes
        self.is_compressed = cfg.compression == StoreCompression.S2
        self.limit_marker_ttl = float(cfg.subject_delete_marker_ttl or 0.0)
        self.metadata = dict(cfg.metadata or {})

    @property
    def config(self) -> KeyValueConfig:
        """The bucket config this status reflects."""
        return KeyValueConfig.from_stream_config(self.stream_info.config)

    def __repr__(self) -> str:
        return f"<KeyValueStatus {self.bucket!r} values={self.values} bytes={self.bytes}>"
