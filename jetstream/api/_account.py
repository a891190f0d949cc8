"""Account Structs: the ``$JS.API.INFO`` reply."""

from __future__ import annotations

import msgspec

from ._base import ApiResponse, _Info

__all__ = ["AccountInfo", "AccountLimits", "ApiStats", "Tier"]


class AccountLimits(_Info, frozen=True):
    """An account's (or a tier's) JetStream limits; -1 means unlimited."""

    max_memory: int = 0
    max_storage: int = 0
    max_streams: int = 0
    max_consumers: int = 0
    max_ack_pending: int = 0
    memory_max_stream_bytes: int = 0
    storage_max_stream_bytes: int = 0
    max_bytes_required: bool = False


class ApiStats(_Info, frozen=True):
    """API usage counters, and the API ``level`` the answering server implements (ADR-44)."""

    level: int = 0
    total: int = 0
    errors: int = 0
    inflight: int = 0


class Tier(_Info, frozen=True):
    """Usage and limits of one replication tier (``R1``, ``R3``...)."""

    memory: int = 0
    storage: int = 0
    reserved_memory: int = 0
    reserved_storage: int = 0
    streams: int = 0
    consumers: int = 0
    limits: AccountLimits = msgspec.field(default_factory=AccountLimits)


class AccountInfo(ApiResponse, frozen=True):
    """JetStream usage and limits of the account (the reply to ``$JS.API.INFO``).

    The top-level numbers are totals across tiers; with tiered limits,
    ``limits`` is empty and ``tiers`` holds each tier's limits.
    """

    memory: int = 0
    storage: int = 0
    reserved_memory: int = 0
    reserved_storage: int = 0
    streams: int = 0
    consumers: int = 0
    limits: AccountLimits = msgspec.field(default_factory=AccountLimits)
    domain: str = ""
    api: ApiStats = msgspec.field(default_factory=ApiStats)
    tiers: dict[str, Tier] = msgspec.field(default_factory=dict)
