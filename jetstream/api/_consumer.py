"""Consumer Structs: config, info, create, list, pause, unpin, reset, and the pull request."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence
from typing import TYPE_CHECKING

import msgspec
from msgspec import UNSET, UnsetType

from ._base import (
    _ZERO_SECONDS,
    ZERO_TIME,
    AckPolicy,
    ApiResponse,
    ConsumerAction,
    DeliverPolicy,
    PriorityPolicy,
    ReplayPolicy,
    Seconds,
    _Info,
    _Request,
)
from ._stream import ClusterInfo, SuccessResponse

__all__ = [
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
    "PriorityGroupState",
    "PullRequest",
    "SequenceInfo",
]


class ConsumerConfig(_Request):
    """A consumer's configuration (CONSUMER.CREATE ``config`` and info ``config``).

    ``deliver_policy``, ``ack_policy`` and ``replay_policy`` are always sent:
    the client default ``ack_policy=EXPLICIT`` differs from the server's zero
    value ``none`` (pitfall P1). Every other optional field is ``UNSET`` by
    default, left out, and the server applies its default (30 s ``ack_wait``,
    1000 ``max_ack_pending``, 512 ``max_waiting``...). Durations are seconds.

    Set ``durable_name`` (or ``name`` with no ``inactive_threshold``) for a
    durable consumer; ``deliver_subject`` makes a push consumer.
    """

    name: str | UnsetType = UNSET
    durable_name: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    deliver_policy: DeliverPolicy = DeliverPolicy.ALL
    opt_start_seq: int | UnsetType = UNSET
    opt_start_time: _dt.datetime | UnsetType = UNSET
    ack_policy: AckPolicy = AckPolicy.EXPLICIT
    ack_wait: Seconds | UnsetType = UNSET
    max_deliver: int | UnsetType = UNSET
    #: Redelivery delays, in seconds (a tuple once set).
    backoff: Sequence[Seconds] | UnsetType = UNSET
    filter_subject: str | UnsetType = UNSET
    filter_subjects: list[str] | UnsetType = UNSET
    replay_policy: ReplayPolicy = ReplayPolicy.INSTANT
    rate_limit_bps: int | UnsetType = UNSET
    sample_freq: str | UnsetType = UNSET
    max_waiting: int | UnsetType = UNSET
    max_ack_pending: int | UnsetType = UNSET
    flow_control: bool | UnsetType = UNSET
    headers_only: bool | UnsetType = UNSET
    #: Pull consumers: the largest ``batch`` of one pull request.
    max_batch: int | UnsetType = UNSET
    #: Pull consumers: the longest ``expires`` of one pull request.
    max_expires: Seconds | UnsetType = UNSET
    #: Pull consumers: the largest ``max_bytes`` of one pull request.
    max_bytes: int | UnsetType = UNSET
    deliver_subject: str | UnsetType = UNSET
    deliver_group: str | UnsetType = UNSET
    idle_heartbeat: Seconds | UnsetType = UNSET
    inactive_threshold: Seconds | UnsetType = UNSET
    num_replicas: int | UnsetType = UNSET
    mem_storage: bool | UnsetType = UNSET
    metadata: dict[str, str] | UnsetType = UNSET
    #: Paused until then (server 2.11+, API level 1).
    pause_until: _dt.datetime | UnsetType = UNSET
    #: Priority groups of a pull consumer (server 2.11+, API level 1).
    priority_groups: list[str] | UnsetType = UNSET
    priority_policy: PriorityPolicy | UnsetType = UNSET
    #: How long a pinned client keeps its pin without pulling (Go's ``PinnedTTL``).
    priority_timeout: Seconds | UnsetType = UNSET

    _durations = (
        "ack_wait",
        "backoff",
        "max_expires",
        "idle_heartbeat",
        "inactive_threshold",
        "priority_timeout",
    )
    _timestamps = ("opt_start_time", "pause_until")


class CreateConsumerRequest(_Request):
    """CONSUMER.CREATE body; ``action`` makes it create-only or update-only (server 2.10+)."""

    stream_name: str
    config: ConsumerConfig
    action: ConsumerAction = ConsumerAction.CREATE_OR_UPDATE
    pedantic: bool | UnsetType = UNSET


class SequenceInfo(_Info, frozen=True):
    """A consumer position: its own sequence, the stream's, and when it last moved."""

    consumer_seq: int = 0
    stream_seq: int = 0
    last_active: _dt.datetime | None = None


class PriorityGroupState(_Info, frozen=True):
    """The state of one priority group; ``pinned_ts`` is ``ZERO_TIME`` when nobody is pinned."""

    group: str = ""
    pinned_client_id: str = ""
    pinned_ts: _dt.datetime = ZERO_TIME


class ConsumerInfo(ApiResponse, frozen=True):
    """A consumer's config and state (the reply to CONSUMER.CREATE and CONSUMER.INFO)."""

    stream_name: str
    name: str
    created: _dt.datetime
    config: ConsumerConfig = msgspec.field(default_factory=ConsumerConfig)
    delivered: SequenceInfo = msgspec.field(default_factory=SequenceInfo)
    ack_floor: SequenceInfo = msgspec.field(default_factory=SequenceInfo)
    num_ack_pending: int = 0
    num_redelivered: int = 0
    num_waiting: int = 0
    num_pending: int = 0
    cluster: ClusterInfo | None = None
    push_bound: bool = False
    paused: bool = False
    pause_remaining: Seconds = _ZERO_SECONDS
    #: When the server gathered the info (server 2.10+).
    ts: _dt.datetime | None = None
    priority_groups: list[PriorityGroupState] = msgspec.field(default_factory=list)


class ConsumerListRequest(_Request):
    """CONSUMER.NAMES and CONSUMER.LIST body: a page offset."""

    offset: int = 0


class ConsumerNamesResponse(ApiResponse, frozen=True):
    """A page of consumer names (``[]`` when the server sends ``null`` for an empty page)."""

    total: int = 0
    offset: int = 0
    limit: int = 0
    if TYPE_CHECKING:
        consumers: list[str] = msgspec.field(default_factory=list)
    else:  # Go sends null for an empty slice; __post_init__ turns it into []
        consumers: list[str] | None = None

    def __post_init__(self) -> None:
        if self.consumers is None:
            msgspec.structs.force_setattr(self, "consumers", [])  # type: ignore[unreachable]


class ConsumerListResponse(ApiResponse, frozen=True):
    """A page of consumer infos; ``missing``/``offline`` name consumers that did not answer."""

    total: int = 0
    offset: int = 0
    limit: int = 0
    if TYPE_CHECKING:
        consumers: list[ConsumerInfo] = msgspec.field(default_factory=list)
    else:  # see ConsumerNamesResponse
        consumers: list[ConsumerInfo] | None = None
    missing: list[str] = msgspec.field(default_factory=list)
    offline: dict[str, str] = msgspec.field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.consumers is None:
            msgspec.structs.force_setattr(self, "consumers", [])  # type: ignore[unreachable]


class ConsumerDeleteResponse(SuccessResponse, frozen=True):
    """CONSUMER.DELETE reply."""


class ConsumerPauseRequest(_Request):
    """CONSUMER.PAUSE body: pause until ``pause_until``; leave it UNSET to resume."""

    pause_until: _dt.datetime | UnsetType = UNSET

    _timestamps = ("pause_until",)


class ConsumerPauseResponse(ApiResponse, frozen=True):
    """CONSUMER.PAUSE reply; ``pause_until`` is ``ZERO_TIME`` after a resume."""

    paused: bool = False
    pause_until: _dt.datetime = ZERO_TIME
    pause_remaining: Seconds = _ZERO_SECONDS


class ConsumerUnpinRequest(_Request):
    """CONSUMER.UNPIN body: unpin the pinned client of a priority group."""

    group: str


class ConsumerUnpinResponse(ApiResponse, frozen=True):
    """CONSUMER.UNPIN reply (only an ``error``, if any)."""


class ConsumerResetRequest(_Request):
    """CONSUMER.RESET body (server 2.14+, API level 4): restart delivery at stream ``seq``."""

    seq: int | UnsetType = UNSET


class ConsumerResetResponse(ConsumerInfo, frozen=True):
    """CONSUMER.RESET reply: the consumer's info and the sequence it was reset to."""

    reset_seq: int = 0


class PullRequest(_Request):
    """The body of a pull (``CONSUMER.MSG.NEXT``) request.

    ``expires`` and ``idle_heartbeat`` are seconds. ``group``, ``min_pending``,
    ``min_ack_pending``, ``id`` and ``priority`` are for consumers with
    priority groups (``id`` is the pin id of a pinned client; ``priority``,
    0-9, is for the ``prioritized`` policy).
    """

    batch: int = 1
    expires: Seconds | UnsetType = UNSET
    max_bytes: int | UnsetType = UNSET
    no_wait: bool | UnsetType = UNSET
    idle_heartbeat: Seconds | UnsetType = UNSET
    group: str | UnsetType = UNSET
    min_pending: int | UnsetType = UNSET
    min_ack_pending: int | UnsetType = UNSET
    id: str | UnsetType = UNSET
    priority: int | UnsetType = UNSET

    _durations = ("expires", "idle_heartbeat")


def encode_pull(batch: int, expires: float, heartbeat: float | None) -> bytes:
    """The JSON of a plain pull request (a batch, ``expires`` and maybe an idle heartbeat,
    in seconds), byte for byte what ``encode(PullRequest(...))`` writes, formatted at
    once: a fetch sends one per call."""
    if heartbeat:
        return b'{"batch":%d,"expires":%d,"idle_heartbeat":%d}' % (
            batch,
            round(expires * 1_000_000_000),
            round(heartbeat * 1_000_000_000),
        )
    return b'{"batch":%d,"expires":%d}' % (batch, round(expires * 1_000_000_000))
