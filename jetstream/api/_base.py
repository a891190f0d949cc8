"""Base policy of the JetStream API Structs: durations, enums, encoding, decoding.

Everything in ``jetstream.api`` builds on the three bases here:

* ``_Request``: configs and requests. Mutable, ``kw_only``. Fields the client
  always sends (``ack_policy``, ``retention``...) have real defaults; every other
  optional field defaults to ``msgspec.UNSET``, which is left out of the JSON, so
  the server applies its own default (pitfall P1: no ``omit_defaults``).
* ``ApiResponse``: top-level replies. Frozen, with ``error: ApiError | None``.
* ``_Info``: frozen parts of replies (stream state, cluster info...).

None of them forbids unknown fields: servers add fields, and decoding must not
break on one.

Durations are float seconds in Python and integer nanoseconds on the wire. A
field typed ``Seconds`` holds a ``Seconds`` float at runtime (mypy sees plain
``float``, so ``ack_wait=30`` type-checks); the one ``enc_hook`` turns it into
nanoseconds and the one ``dec_hook`` turns nanoseconds back into seconds.
``_Request`` wraps plain numbers into ``Seconds`` on construction and on
assignment, so ``cfg.ack_wait = 5`` means five seconds, never five nanoseconds.
"""

from __future__ import annotations

import datetime as _dt
import enum
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import msgspec

from ..errors import JetStreamApiError, JetStreamError

__all__ = [
    "REQUIRED_API_LEVEL_HEADER",
    "AckPolicy",
    "ApiError",
    "ApiResponse",
    "ConsumerAction",
    "DeliverPolicy",
    "DiscardPolicy",
    "PersistMode",
    "PriorityPolicy",
    "ReplayPolicy",
    "RetentionPolicy",
    "Seconds",
    "StorageType",
    "StoreCompression",
    "ZERO_TIME",
    "decode_response",
    "decoder",
    "encode",
]

#: Request header asking the responding server for a minimum JetStream API level (ADR-44).
REQUIRED_API_LEVEL_HEADER = "Nats-Required-Api-Level"

if TYPE_CHECKING:
    Seconds = float
else:

    class Seconds(float):
        """A duration in seconds; integer nanoseconds on the wire.

        A decoded value remembers its exact nanoseconds (``_ns``): a float holds
        nanosecond precision only up to about 100 days, and a config read from
        the server must encode back to the very same numbers (the server
        compares configs on an idempotent create).
        """

        _ns = None

        def __repr__(self):
            return float.__repr__(self)

        @classmethod
        def _from_ns(cls, ns):
            value = cls(ns / _NS)
            value._ns = ns
            return value


#: Go's zero ``time.Time``, which the server sends for "never".
ZERO_TIME = _dt.datetime(1, 1, 1, tzinfo=_dt.UTC)
_ZERO_SECONDS = Seconds(0)
_NS = 1_000_000_000


def _enc_hook(obj: Any) -> Any:
    if isinstance(obj, Seconds):
        ns = obj._ns  # type: ignore[attr-defined]  # set on decoded values only
        return round(obj * _NS) if ns is None else ns
    raise NotImplementedError(f"cannot encode {type(obj).__name__} as JetStream JSON")


def _dec_hook(type_: type, obj: Any) -> Any:
    if type_ is Seconds:
        if type(obj) is int:
            return Seconds._from_ns(obj)  # type: ignore[attr-defined]
        if type(obj) is float:
            return Seconds(obj / _NS)
        raise ValueError(f"expected a duration in integer nanoseconds, got {obj!r}")
    raise NotImplementedError(f"cannot decode {type_!r}")


def _to_seconds(name: str, value: Any) -> Any:
    """Normalise a duration field value (a number, a sequence of numbers, or UNSET)."""
    if type(value) is Seconds or value is msgspec.UNSET:
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return Seconds(value)
    if isinstance(value, (list, tuple)):
        return tuple(_to_seconds(name, v) for v in value)
    raise TypeError(f"{name} is a duration in seconds (int or float), got {value!r}")


def _check_aware(name: str, value: Any) -> None:
    if isinstance(value, _dt.datetime) and value.tzinfo is None:
        raise ValueError(
            f"{name} must be a timezone-aware datetime (the server needs RFC 3339 with a zone), "
            f"got naive {value!r}; use e.g. datetime.now(timezone.utc)"
        )


class _Request(msgspec.Struct, kw_only=True, repr_omit_defaults=True):
    """Base of configs and requests: mutable; durations normalised to ``Seconds``.

    Subclasses list their duration fields in ``_durations`` and their datetime
    fields in ``_timestamps`` (a unit test checks the lists against the
    annotations).
    """

    _durations: ClassVar[tuple[str, ...]] = ()
    _timestamps: ClassVar[tuple[str, ...]] = ()

    def __post_init__(self) -> None:
        # Runs on construction, on decoding and (msgspec 0.21+) in msgspec.structs.replace().
        for name in self._durations:
            value = getattr(self, name)
            if type(value) is not Seconds and value is not msgspec.UNSET:
                msgspec.Struct.__setattr__(self, name, _to_seconds(name, value))
        for name in self._timestamps:
            _check_aware(name, getattr(self, name))

    if not TYPE_CHECKING:  # hidden from mypy, which would then allow any attribute name

        def __setattr__(self, name, value):
            if name in self._durations:
                value = _to_seconds(name, value)
            elif name in self._timestamps:
                _check_aware(name, value)
            msgspec.Struct.__setattr__(self, name, value)


class _Info(msgspec.Struct, kw_only=True, frozen=True, repr_omit_defaults=True):
    """Base of the frozen parts of API replies."""


class ApiError(msgspec.Struct, kw_only=True, frozen=True, gc=False):
    """The ``error`` object of a JetStream API reply (``code`` is HTTP-like)."""

    code: int = 0
    err_code: int = 0
    description: str = ""

    def exception(
        self, request: str = "", *, stream: str = "", consumer: str = ""
    ) -> JetStreamApiError:
        """The most specific ``JetStreamApiError`` for this error (``stream`` and
        ``consumer``: the names the request was about, for the message)."""
        return JetStreamApiError.from_api(
            self.code,
            self.err_code,
            self.description,
            request=request,
            stream=stream,
            consumer=consumer,
        )


class ApiResponse(msgspec.Struct, kw_only=True, frozen=True, repr_omit_defaults=True):
    """Base of every JetStream API reply; ``error`` is set when the request failed.

    Also the whole reply of requests that answer nothing else (consumer unpin).
    """

    error: ApiError | None = None


class _ErrorOnly(msgspec.Struct):
    error: ApiError | None = None


# ---------------------------------------------------------------------------
# Enums (the server's JSON spellings)


class AckPolicy(enum.StrEnum):
    """How a consumer's messages are acknowledged. The server's zero value is ``none``."""

    NONE = "none"
    ALL = "all"
    EXPLICIT = "explicit"
    #: Server 2.14+ (API level 4), push consumers only; used for reliable sourcing.
    FLOW_CONTROL = "flow_control"


class DeliverPolicy(enum.StrEnum):
    """Where a consumer starts in the stream."""

    ALL = "all"
    LAST = "last"
    NEW = "new"
    BY_START_SEQUENCE = "by_start_sequence"
    BY_START_TIME = "by_start_time"
    LAST_PER_SUBJECT = "last_per_subject"


class ReplayPolicy(enum.StrEnum):
    """How fast a consumer replays stored messages."""

    INSTANT = "instant"
    ORIGINAL = "original"


class RetentionPolicy(enum.StrEnum):
    """When a stream removes messages."""

    LIMITS = "limits"
    INTEREST = "interest"
    WORK_QUEUE = "workqueue"


class StorageType(enum.StrEnum):
    """Where a stream keeps its messages."""

    FILE = "file"
    MEMORY = "memory"


class DiscardPolicy(enum.StrEnum):
    """What a full stream does with a new message."""

    OLD = "old"
    NEW = "new"


class StoreCompression(enum.StrEnum):
    """On-disk compression of a file stream."""

    NONE = "none"
    S2 = "s2"


class PersistMode(enum.StrEnum):
    """How a stream flushes writes (server 2.12+; ``async`` needs API level 2)."""

    DEFAULT = "default"
    ASYNC = "async"


class PriorityPolicy(enum.StrEnum):
    """How a pull consumer picks among the clients of a priority group."""

    NONE = "none"
    OVERFLOW = "overflow"
    PINNED_CLIENT = "pinned_client"
    #: Server 2.12+ (API level 2).
    PRIORITIZED = "prioritized"


class ConsumerAction(enum.StrEnum):
    """The ``action`` of a consumer create request."""

    CREATE_OR_UPDATE = ""
    CREATE = "create"
    UPDATE = "update"


# ---------------------------------------------------------------------------
# Encoding and decoding

_ENCODER = msgspec.json.Encoder(enc_hook=_enc_hook)
_R = TypeVar("_R", bound=ApiResponse)
_DECODERS: dict[type[Any], msgspec.json.Decoder[Any]] = {}
_ERROR_DECODER = msgspec.json.Decoder(_ErrorOnly)
_PREVIEW = 200


def encode(obj: Any) -> bytes:
    """Encode a request as compact JSON: UNSET fields left out, durations in nanoseconds."""
    return _ENCODER.encode(obj)


def decoder(type_: type[_R]) -> msgspec.json.Decoder[_R]:
    """The cached ``msgspec.json.Decoder`` for a reply type."""
    dec = _DECODERS.get(type_)
    if dec is None:
        dec = _DECODERS[type_] = msgspec.json.Decoder(type_, dec_hook=_dec_hook)
    return dec


def decode_response(
    data: bytes | bytearray | memoryview,
    type_: type[_R],
    request: str,
    *,
    stream: str = "",
    consumer: str = "",
) -> _R:
    """Decode a JetStream API reply, raising if it carries an error.

    Args:
        data: the reply payload (JSON).
        type_: the expected reply Struct (a subclass of ``ApiResponse``).
        request: the request subject, quoted in errors.
        stream: the stream the request is about, named in errors (``stream 'S' not
            found``); ``consumer``: likewise, the consumer.

    Raises:
        JetStreamApiError: the reply has an ``error``; the subclass is chosen
            by its ``err_code`` (``StreamNotFoundError`` for 10059...).
        JetStreamError: the reply is not JSON, or not the JSON of ``type_``
            nor of an error (the base class itself, with the msgspec error as
            ``__cause__``; the message quotes the request and the payload).
    """
    dec: msgspec.json.Decoder[_R] = _DECODERS.get(type_) or decoder(type_)
    try:
        resp = dec.decode(data)
    except msgspec.DecodeError as exc:
        # An error reply need not have the fields a success needs (a PubAck
        # error has no "seq", a stream info error no "config"): look for one.
        try:
            err = _ERROR_DECODER.decode(data).error
        except msgspec.DecodeError:
            err = None
        if err is not None:
            raise err.exception(request, stream=stream, consumer=consumer) from None
        raw = bytes(data)
        preview = raw[:_PREVIEW] + (b"..." if len(raw) > _PREVIEW else b"")
        raise JetStreamError(
            f"invalid reply to {request!r}, expected {type_.__name__}: {exc}; got {preview!r}"
        ) from exc
    if resp.error is not None:
        raise resp.error.exception(request, stream=stream, consumer=consumer)
    return resp
