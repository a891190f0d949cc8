"""Stream Structs: config, info, list, purge, message get/delete, and the publish ack."""

from __future__ import annotations

import datetime as _dt
from typing import TYPE_CHECKING

import msgspec
from msgspec import UNSET, UnsetType

from ._base import (
    _ZERO_SECONDS,
    ZERO_TIME,
    ApiError,
    ApiResponse,
    DiscardPolicy,
    PersistMode,
    RetentionPolicy,
    Seconds,
    StorageType,
    StoreCompression,
    _Info,
    _Request,
)

__all__ = [
    "ClusterInfo",
    "ExternalStream",
    "LostStreamData",
    "MsgDeleteRequest",
    "MsgDeleteResponse",
    "MsgGetRequest",
    "MsgGetResponse",
    "PeerInfo",
    "Placement",
    "PubAck",
    "RePublish",
    "StoredMsg",
    "StreamAlternate",
    "StreamConfig",
    "StreamConsumerLimits",
    "StreamConsumerSource",
    "StreamDeleteResponse",
    "StreamInfo",
    "StreamInfoRequest",
    "StreamInfoResponse",
    "StreamListRequest",
    "StreamListResponse",
    "StreamNamesResponse",
    "StreamPurgeRequest",
    "StreamPurgeResponse",
    "StreamSource",
    "StreamSourceInfo",
    "StreamState",
    "SubjectTransformConfig",
    "SuccessResponse",
]


# ---------------------------------------------------------------------------
# Stream configuration


class Placement(_Request):
    """Where a stream's replicas go in a cluster or super-cluster."""

    cluster: str | UnsetType = UNSET
    tags: list[str] | UnsetType = UNSET
    #: A preferred server for the leader (server 2.11+).
    preferred: str | UnsetType = UNSET


class ExternalStream(_Request):
    """The API and deliver prefixes of a stream in another account or domain."""

    api: str
    deliver: str = ""

    @classmethod
    def for_domain(cls, domain: str) -> ExternalStream:
        """The external reference to the JetStream domain ``domain`` of this account."""
        return cls(api=f"$JS.{domain}.API")


class SubjectTransformConfig(_Request):
    """Rewrite subjects matching ``src`` into ``dest`` (``$1``-style mappings)."""

    src: str
    dest: str


class StreamConsumerSource(_Request):
    """A durable consumer used for sourcing or mirroring (server 2.14+, API level 4)."""

    name: str | UnsetType = UNSET
    deliver_subject: str | UnsetType = UNSET


class StreamSource(_Request):
    """A mirror or one source of a stream.

    For a stream in another JetStream domain of the same account, set
    ``external=ExternalStream.for_domain(domain)``.
    """

    name: str
    opt_start_seq: int | UnsetType = UNSET
    opt_start_time: _dt.datetime | UnsetType = UNSET
    filter_subject: str | UnsetType = UNSET
    subject_transforms: list[SubjectTransformConfig] | UnsetType = UNSET
    external: ExternalStream | UnsetType = UNSET
    consumer: StreamConsumerSource | UnsetType = UNSET

    _timestamps = ("opt_start_time",)


class RePublish(_Request):
    """Republish each stored message from ``src`` to ``dest`` (optionally headers only)."""

    dest: str
    src: str | UnsetType = UNSET
    headers_only: bool | UnsetType = UNSET


class StreamConsumerLimits(_Request):
    """Defaults and maximums applied to the stream's consumers."""

    inactive_threshold: Seconds | UnsetType = UNSET
    max_ack_pending: int | UnsetType = UNSET

    _durations = ("inactive_threshold",)


class StreamConfig(_Request):
    """A stream's configuration (``$JS.API.STREAM.CREATE/UPDATE`` body and info ``config``).

    ``retention``, ``discard`` and ``storage`` are always sent. Every other
    optional field is ``UNSET`` by default, left out of the request, and the
    server applies its default (``-1`` = unlimited for the limits, 2 minutes
    for ``duplicate_window``, 1 replica...). Durations are seconds.
    """

    name: str
    description: str | UnsetType = UNSET
    subjects: list[str] | UnsetType = UNSET
    retention: RetentionPolicy = RetentionPolicy.LIMITS
    max_consumers: int | UnsetType = UNSET
    max_msgs: int | UnsetType = UNSET
    max_bytes: int | UnsetType = UNSET
    max_age: Seconds | UnsetType = UNSET
    max_msgs_per_subject: int | UnsetType = UNSET
    max_msg_size: int | UnsetType = UNSET
    discard: DiscardPolicy = DiscardPolicy.OLD
    storage: StorageType = StorageType.FILE
    num_replicas: int | UnsetType = UNSET
    no_ack: bool | UnsetType = UNSET
    duplicate_window: Seconds | UnsetType = UNSET
    placement: Placement | UnsetType = UNSET
    mirror: StreamSource | UnsetType = UNSET
    sources: list[StreamSource] | UnsetType = UNSET
    compression: StoreCompression | UnsetType = UNSET
    first_seq: int | UnsetType = UNSET
    subject_transform: SubjectTransformConfig | UnsetType = UNSET
    republish: RePublish | UnsetType = UNSET
    allow_direct: bool | UnsetType = UNSET
    mirror_direct: bool | UnsetType = UNSET
    discard_new_per_subject: bool | UnsetType = UNSET
    sealed: bool | UnsetType = UNSET
    deny_delete: bool | UnsetType = UNSET
    deny_purge: bool | UnsetType = UNSET
    allow_rollup_hdrs: bool | UnsetType = UNSET
    consumer_limits: StreamConsumerLimits | UnsetType = UNSET
    #: Per-message TTLs via the ``Nats-TTL`` header (server 2.11+, API level 1).
    allow_msg_ttl: bool | UnsetType = UNSET
    #: TTL of the markers left when max age removes a subject's last message (API level 1).
    subject_delete_marker_ttl: Seconds | UnsetType = UNSET
    if TYPE_CHECKING:
        #: Distributed counters (ADR-49; server 2.12+, API level 2): every subject is a
        #: counter, written with ``Nats-Incr`` (``js.counter()``). Set at creation only;
        #: limits retention, no ``allow_msg_ttl``, no discard new, not on a mirror.
        allow_msg_counter: bool | UnsetType = UNSET
    else:  # Go may send null for an unset bool: read as absent (__post_init__)
        allow_msg_counter: bool | UnsetType | None = UNSET
    #: Atomic batch publish (server 2.12+, API level 2).
    allow_atomic: bool | UnsetType = UNSET
    if TYPE_CHECKING:
        #: Message schedules (ADR-51; server 2.12+, API level 2): a message with a
        #: ``Nats-Schedule`` header is published into its target when due
        #: (``js.schedule()``). Can be turned on later, not off; implies
        #: ``allow_rollup_hdrs``; not on a mirror or a stream with sources.
        allow_msg_schedules: bool | UnsetType = UNSET
    else:
        allow_msg_schedules: bool | UnsetType | None = UNSET
    #: ``async`` needs server 2.12+ (API level 2).
    persist_mode: PersistMode | UnsetType = UNSET
    #: Fast batch publish (server 2.14+, API level 4).
    allow_batched: bool | UnsetType = UNSET
    metadata: dict[str, str] | UnsetType = UNSET

    _durations = ("max_age", "duplicate_window", "subject_delete_marker_ttl")
    #: options whose null (Go's encoding of an unset pointer) is read as absent
    _null_is_unset = ("allow_msg_counter", "allow_msg_schedules")

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in self._null_is_unset:
            if getattr(self, name) is None:
                msgspec.Struct.__setattr__(self, name, UNSET)


# ---------------------------------------------------------------------------
# Stream info


class LostStreamData(_Info, frozen=True):
    """Messages the server lost (for example, to disk corruption)."""

    msgs: list[int] | None = None
    bytes: int = 0


class StreamState(_Info, frozen=True):
    """A stream's message counts and sequence range; ``*_ts`` are ``ZERO_TIME`` when empty."""

    messages: int = 0
    bytes: int = 0
    first_seq: int = 0
    first_ts: _dt.datetime = ZERO_TIME
    last_seq: int = 0
    last_ts: _dt.datetime = ZERO_TIME
    num_subjects: int = 0
    #: Messages per subject; only filled when the info request sets ``subjects_filter``.
    subjects: dict[str, int] = msgspec.field(default_factory=dict)
    num_deleted: int = 0
    #: Deleted sequences; only filled when the info request sets ``deleted_details``.
    deleted: list[int] = msgspec.field(default_factory=list)
    lost: LostStreamData | None = None
    consumer_count: int = 0


class PeerInfo(_Info, frozen=True):
    """One replica of a clustered stream or consumer."""

    name: str = ""
    current: bool = False
    offline: bool = False
    #: Seconds since the replica was last heard from.
    active: Seconds = _ZERO_SECONDS
    lag: int = 0
    peer: str = ""
    pending: bool = False


class ClusterInfo(_Info, frozen=True):
    """The raft group of a stream or consumer."""

    name: str = ""
    raft_group: str = ""
    leader: str = ""
    leader_since: _dt.datetime | None = None
    system_account: bool = False
    traffic_account: str = ""
    replicas: list[PeerInfo] = msgspec.field(default_factory=list)


class StreamSourceInfo(_Info, frozen=True):
    """The state of a mirror or of one source; ``active`` is -1e-9 when never active."""

    name: str = ""
    external: ExternalStream | None = None
    lag: int = 0
    active: Seconds = _ZERO_SECONDS
    error: ApiError | None = None
    filter_subject: str = ""
    subject_transforms: list[SubjectTransformConfig] = msgspec.field(default_factory=list)


class StreamAlternate(_Info, frozen=True):
    """A mirror that can answer direct gets for the stream."""

    name: str = ""
    domain: str = ""
    cluster: str = ""


class StreamInfo(ApiResponse, frozen=True):
    """A stream's config and state (the reply to STREAM.CREATE, UPDATE and INFO)."""

    config: StreamConfig
    created: _dt.datetime
    state: StreamState
    domain: str = ""
    cluster: ClusterInfo | None = None
    mirror: StreamSourceInfo | None = None
    sources: list[StreamSourceInfo] = msgspec.field(default_factory=list)
    alternates: list[StreamAlternate] = msgspec.field(default_factory=list)
    #: When the server gathered the info (server 2.10+).
    ts: _dt.datetime | None = None


class StreamInfoResponse(StreamInfo, frozen=True):
    """The full STREAM.INFO/CREATE/UPDATE reply: a ``StreamInfo`` plus paging of ``state.subjects``.

    ``total``/``offset``/``limit`` page the subjects map when ``subjects_filter``
    matches more subjects than one reply holds; ``did_create`` tells whether a
    STREAM.CREATE made the stream (false: it existed with the same config).
    """

    total: int = 0
    offset: int = 0
    limit: int = 0
    did_create: bool = False


class StreamInfoRequest(_Request):
    """STREAM.INFO body (optional): subject counts and deleted sequences, paged."""

    deleted_details: bool | UnsetType = UNSET
    subjects_filter: str | UnsetType = UNSET
    offset: int | UnsetType = UNSET


# ---------------------------------------------------------------------------
# Lists


class StreamListRequest(_Request):
    """STREAM.NAMES and STREAM.LIST body: a page offset and an optional subject filter."""

    offset: int = 0
    subject: str | UnsetType = UNSET


class StreamNamesResponse(ApiResponse, frozen=True):
    """A page of stream names (``[]`` when the server sends ``null`` for an empty page)."""

    total: int = 0
    offset: int = 0
    limit: int = 0
    if TYPE_CHECKING:
        streams: list[str] = msgspec.field(default_factory=list)
    else:  # Go sends null for an empty slice; __post_init__ turns it into []
        streams: list[str] | None = None

    def __post_init__(self) -> None:
        if self.streams is None:
            msgspec.structs.force_setattr(self, "streams", [])  # type: ignore[unreachable]


class StreamListResponse(ApiResponse, frozen=True):
    """A page of stream infos; ``missing``/``offline`` name streams that did not answer."""

    total: int = 0
    offset: int = 0
    limit: int = 0
    if TYPE_CHECKING:
        streams: list[StreamInfo] = msgspec.field(default_factory=list)
    else:  # see StreamNamesResponse
        streams: list[StreamInfo] | None = None
    missing: list[str] = msgspec.field(default_factory=list)
    offline: dict[str, str] = msgspec.field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.streams is None:
            msgspec.structs.force_setattr(self, "streams", [])  # type: ignore[unreachable]


# ---------------------------------------------------------------------------
# Purge, delete


class StreamPurgeRequest(_Request):
    """STREAM.PURGE body: purge all, or only ``filter``, below ``seq``, or all but ``keep``."""

    filter: str | UnsetType = UNSET
    seq: int | UnsetType = UNSET
    keep: int | UnsetType = UNSET


class StreamPurgeResponse(ApiResponse, frozen=True):
    """STREAM.PURGE reply."""

    success: bool = False
    purged: int = 0


class SuccessResponse(ApiResponse, frozen=True):
    """A reply that only says whether the request succeeded."""

    success: bool = False


class StreamDeleteResponse(SuccessResponse, frozen=True):
    """STREAM.DELETE reply."""


class MsgDeleteRequest(_Request):
    """STREAM.MSG.DELETE body; ``no_erase=True`` skips overwriting the message on disk."""

    seq: int
    no_erase: bool | UnsetType = UNSET


class MsgDeleteResponse(SuccessResponse, frozen=True):
    """STREAM.MSG.DELETE reply."""


# ---------------------------------------------------------------------------
# Message get (STREAM.MSG.GET, and the JSON body of DIRECT.GET)


class MsgGetRequest(_Request):
    """STREAM.MSG.GET / DIRECT.GET body.

    One of ``seq``, ``last_by_subj``, ``next_by_subj``; the batch fields
    (``batch``, ``max_bytes``, ``multi_last``, ``up_to_seq``, ``up_to_time``,
    ``start_time``, ``no_hdr``) are for direct gets only.
    """

    seq: int | UnsetType = UNSET
    last_by_subj: str | UnsetType = UNSET
    next_by_subj: str | UnsetType = UNSET
    batch: int | UnsetType = UNSET
    max_bytes: int | UnsetType = UNSET
    start_time: _dt.datetime | UnsetType = UNSET
    multi_last: list[str] | UnsetType = UNSET
    up_to_seq: int | UnsetType = UNSET
    up_to_time: _dt.datetime | UnsetType = UNSET
    no_hdr: bool | UnsetType = UNSET

    _timestamps = ("start_time", "up_to_time")


class StoredMsg(_Info, frozen=True):
    """A stored message; ``hdrs`` is the raw ``NATS/1.0`` header block (or ``b""``)."""

    subject: str
    seq: int
    hdrs: bytes = b""
    data: bytes = b""
    time: _dt.datetime = ZERO_TIME


class MsgGetResponse(ApiResponse, frozen=True):
    """STREAM.MSG.GET reply."""

    message: StoredMsg


# ---------------------------------------------------------------------------
# Publish


class PubAck(ApiResponse, frozen=True, gc=False):
    """The server's acknowledgement of a publish to a stream.

    ``duplicate`` is true when ``Nats-Msg-Id`` matched a message already stored
    within the duplicate window; ``val`` is a counter stream's new total;
    ``batch``/``count`` identify a committed batch.
    """

    stream: str
    seq: int
    domain: str = ""
    duplicate: bool = False
    val: str = ""
    batch: str = ""
    count: int = 0
