"""msgspec Structs for the JetStream API requests and replies, and their enums.

The Structs live in private modules (``_base``, ``_stream``,
``_consumer``, ``_account``) and are all re-exported here.

Conventions:

* Python field names are the JSON keys (``num_replicas``, ``durable_name``,
  ``max_batch``, ``hdrs``, ``priority_timeout``...), with no renames.
* Durations are float seconds (``ack_wait=30``, ``ack_wait=0.5``); the wire
  carries integer nanoseconds. Timestamps are timezone-aware ``datetime``;
  the server's "never" is Go's zero time, ``ZERO_TIME``.
* Configs and requests are mutable. Optional fields default to
  ``msgspec.UNSET`` and are left out of the JSON, so the server's defaults
  apply; the policies whose client default differs from the server's zero
  value (``ack_policy``...) are always sent.
* Replies are frozen and carry ``error: ApiError | None``. Unknown fields
  in a reply are ignored (never ``forbid_unknown_fields``: servers add fields).

Use ``encode(request)`` for request bodies and
``decode_response(payload, ReplyType, subject)`` for replies.
"""

from __future__ import annotations

from msgspec import UNSET

from ._account import AccountInfo, AccountLimits, ApiStats, Tier
from ._base import (
    REQUIRED_API_LEVEL_HEADER,
    ZERO_TIME,
    AckPolicy,
    ApiError,
    ApiResponse,
    ConsumerAction,
    DeliverPolicy,
    DiscardPolicy,
    PersistMode,
    PriorityPolicy,
    ReplayPolicy,
    RetentionPolicy,
    Seconds,
    StorageType,
    StoreCompression,
    decode_response,
    encode,
)
from ._consumer import (
    ConsumerConfig,
    ConsumerDeleteResponse,
    ConsumerInfo,
    ConsumerListRequest,
    ConsumerListResponse,
    ConsumerNamesResponse,
    ConsumerPauseRequest,
    ConsumerPauseResponse,
    ConsumerResetRequest,
    ConsumerResetResponse,
    ConsumerUnpinRequest,
    ConsumerUnpinResponse,
    CreateConsumerRequest,
    PriorityGroupState,
    PullRequest,
    SequenceInfo,
    encode_pull,
)
from ._stream import (
    ClusterInfo,
    ExternalStream,
    LostStreamData,
    MsgDeleteRequest,
    MsgDeleteResponse,
    MsgGetRequest,
    MsgGetResponse,
    PeerInfo,
    Placement,
    PubAck,
    RePublish,
    StoredMsg,
    StreamAlternate,
    StreamConfig,
    StreamConsumerLimits,
    StreamConsumerSource,
    StreamDeleteResponse,
    StreamInfo,
    StreamInfoRequest,
    StreamInfoResponse,
    StreamListRequest,
    StreamListResponse,
    StreamNamesResponse,
    StreamPurgeRequest,
    StreamPurgeResponse,
    StreamSource,
    StreamSourceInfo,
    StreamState,
    SubjectTransformConfig,
    SuccessResponse,
)

__all__ = [
    "REQUIRED_API_LEVEL_HEADER",
    "ZERO_TIME",
    "AccountInfo",
    "AccountLimits",
    "AckPolicy",
    "ApiError",
    "ApiResponse",
    "ApiStats",
    "ClusterInfo",
    "ConsumerAction",
    "ConsumerConfig",
    "ConsumerDeleteResponse",
    "ConsumerInfo",
    "ConsumerListRequest",
    "ConsumerListResponse",
    "ConsumerNamesResponse",
    "ConsumerPauseRequest",
    "ConsumerPauseResponse",
    "ConsumerResetRequest",
    "ConsumerResetResponse",
    "ConsumerUnpinRequest",
    "ConsumerUnpinResponse",
    "CreateConsumerRequest",
    "DeliverPolicy",
    "DiscardPolicy",
    "ExternalStream",
    "LostStreamData",
    "MsgDeleteRequest",
    "MsgDeleteResponse",
    "MsgGetRequest",
    "MsgGetResponse",
    "PeerInfo",
    "PersistMode",
    "Placement",
    "PriorityGroupState",
    "PriorityPolicy",
    "PubAck",
    "PullRequest",
    "encode_pull",
    "RePublish",
    "ReplayPolicy",
    "RetentionPolicy",
    "Seconds",
    "SequenceInfo",
    "StorageType",
    "StoreCompression",
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
    "Tier",
    "decode_response",
    "encode",
    "required_api_level",
]


def required_api_level(config: StreamConfig | ConsumerConfig) -> int:
    """The lowest JetStream API level (ADR-44) of a server that understands ``config``.

    Send it as the ``Nats-Required-Api-Level`` header (``REQUIRED_API_LEVEL_HEADER``)
    of a create or update request, so an older server refuses with
    ``RequiredApiLevelError`` instead of silently dropping fields it does not
    know. Level 0 means any server; don't send the header then.

    ======  =======  ============================================================
    level   server   features
    ======  =======  ============================================================
    1       2.11     stream ``allow_msg_ttl``, ``subject_delete_marker_ttl``;
                     consumer ``pause_until``, ``priority_groups``,
                     ``priority_policy`` overflow/pinned_client, ``priority_timeout``
    2       2.12     stream ``allow_msg_counter``, ``allow_atomic``,
                     ``allow_msg_schedules``, ``persist_mode=async``;
                     consumer ``priority_policy=prioritized``
    4       2.14     stream ``allow_batched``, a mirror or source with a durable
                     ``consumer``; consumer ``ack_policy=flow_control``
    ======  =======  ============================================================

    This follows the server's own ``_nats.req.level`` computation, except that
    ``prioritized`` counts as level 2 (the server files every priority policy
    under 1, but only 2.12+ servers parse ``prioritized``) and durable sourcing
    as level 4 (what the server itself asks of the upstream server).
    """
    level = 0
    if isinstance(config, StreamConfig):
        if config.allow_msg_ttl is True or _positive(config.subject_delete_marker_ttl):
            level = 1
        if (
            config.allow_msg_counter is True
            or config.allow_atomic is True
            or config.allow_msg_schedules is True
            or config.persist_mode == PersistMode.ASYNC
        ):
            level = 2
        if config.allow_batched is True or _durable_sourcing(config):
            level = 4
        return level
    if (
        (config.pause_until is not UNSET and config.pause_until != ZERO_TIME)
        or config.priority_policy not in (UNSET, PriorityPolicy.NONE)
        or bool(config.priority_groups)
        or _positive(config.priority_timeout)
    ):
        level = 1
    if config.priority_policy == PriorityPolicy.PRIORITIZED:
        level = 2
    if config.ack_policy == AckPolicy.FLOW_CONTROL:
        level = 4
    return level


def _positive(duration: object) -> bool:
    return isinstance(duration, float) and duration > 0


def _durable_sourcing(config: StreamConfig) -> bool:
    sources = [] if config.sources is UNSET else list(config.sources)
    if config.mirror is not UNSET:
        sources.append(config.mirror)
    return any(s.consumer is not UNSET for s in sources)
