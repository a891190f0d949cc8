"""The one exception tree of the package.

Every error says what was asked and what came back. Errors raised for bad input
(``BadSubjectError``, ``MaxPayloadError``, ``BadHeaderError``) also subclass ``ValueError``
and are raised before anything is written to the socket. ``TimeoutError`` also subclasses
the builtin ``TimeoutError`` (which is ``asyncio.TimeoutError`` on Python 3.11+).
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Any, ClassVar

__all__ = [
    "AccountResourcesExceededError",
    "AuthorizationError",
    "BadBucketError",
    "BadHeaderError",
    "BadNameError",
    "BadRequestError",
    "BadSubjectError",
    "BucketExistsError",
    "BucketNotFoundError",
    "ConnectionClosedError",
    "ConsumerDeletedError",
    "ConsumerDoesNotExistError",
    "ConsumerExistingActiveError",
    "ConsumerExistsError",
    "ConsumerNameInUseError",
    "ConsumerNotFoundError",
    "ConsumerOfflineError",
    "CounterDisabledError",
    "CounterError",
    "CounterNotFoundError",
    "CounterRefusedError",
    "DigestMismatchError",
    "DisconnectedError",
    "DuplicateMessageConflictError",
    "InsufficientResourcesError",
    "InvalidConsumerResetError",
    "InvalidJSONError",
    "InvalidMessageTTLError",
    "InvalidScheduleError",
    "JetStreamApiError",
    "JetStreamError",
    "JetStreamNotEnabledError",
    "JetStreamUnavailableError",
    "KeyDeletedError",
    "KeyExistsError",
    "KeyNotFoundError",
    "KeyValueError",
    "KeyWrongLastSequenceError",
    "MaxPayloadError",
    "MaximumConsumersLimitError",
    "MaximumStreamsLimitError",
    "MessageNotFoundError",
    "MessageSizeExceedsMaximumError",
    "MessageTTLDisabledError",
    "MsgAlreadyAckedError",
    "NatsError",
    "NoHeartbeatError",
    "NoRespondersError",
    "NoServersError",
    "NoStreamError",
    "ObjectAlreadyExistsError",
    "ObjectLinkError",
    "ObjectNotFoundError",
    "ObjectStoreError",
    "ObjectStoreExistsError",
    "ObjectStoreNotFoundError",
    "PermissionsError",
    "ProtocolError",
    "PublishWindowFullError",
    "ReconnectBufferFullError",
    "RequiredApiLevelError",
    "ScheduleError",
    "ScheduleRefusedError",
    "ServiceConfigError",
    "ServiceError",
    "ServiceResponseError",
    "SlowConsumerError",
    "TracingUnavailableError",
    "StaleConnectionError",
    "StreamNameInUseError",
    "StreamNameMismatchError",
    "StreamNotFoundError",
    "StreamNotMatchError",
    "StreamOfflineError",
    "StreamSealedError",
    "StreamSubjectOverlapError",
    "TimeoutError",
    "TlsError",
    "TooManyRequestsError",
    "WrongLastMsgIdError",
    "WrongLastSequenceError",
]


class NatsError(Exception):
    """Root of every error this package raises."""

    #: of a call that retries until a deadline (``js.publish``): the attempts it made
    attempts: int = 0


class ProtocolError(NatsError):
    """The server sent bytes that break the NATS protocol; fatal to that connection.
    ``ops`` holds what the parser read from the same feed before the violation."""

    ops: Sequence[object] = ()


class ConnectionClosedError(NatsError):
    """The connection is closed (or draining) and cannot do what was asked."""


class NoServersError(NatsError):
    """No server in the pool could be reached; ``__cause__`` holds the last failure."""


class AuthorizationError(NatsError):
    """The server refused the credentials ('Authorization Violation' and kin)."""


class PermissionsError(NatsError):
    """The server refused a publish or subscribe on a subject ('Permissions Violation')."""


class StaleConnectionError(NatsError):
    """The server stopped answering PINGs; the connection is treated as dead."""


class TimeoutError(NatsError, builtins.TimeoutError):
    """An operation did not complete in time (also an ``asyncio.TimeoutError``)."""


class NoRespondersError(NatsError):
    """A request found no subscriber on its subject (a 503 status)."""


class NoStreamError(NoRespondersError):
    """A JetStream publish found no responders and no stream stores its subject.

    Raised at once (not at the deadline) when the server says that no stream's
    subjects match: a typo, or a stream not made yet. ``subject`` is the subject.
    """

    subject: str = ""


class TracingUnavailableError(NatsError, ImportError):
    """Tracing was asked for (``connect(tracing=...)``, ``jetstream.tracing``) but
    OpenTelemetry's API is not installed (the message says how: ``missing``'s ``hint``)."""

    @classmethod
    def missing(
        cls, exc: ImportError, hint: str = "pip install opentelemetry-api"
    ) -> TracingUnavailableError:
        return cls(f"tracing needs OpenTelemetry's API ({exc}): {hint}")


class SlowConsumerError(NatsError):
    """A subscription's pending limits were passed; messages were dropped.

    Reported through the error callback once per episode, not raised.
    """

    def __init__(self, subject: str, sid: int, dropped_msgs: int, dropped_bytes: int) -> None:
        super().__init__(
            f"slow consumer on {subject!r} (sid {sid}): {dropped_msgs} message(s), "
            f"{dropped_bytes} byte(s) dropped"
        )
        self.subject = subject
        self.sid = sid
        self.dropped_msgs = dropped_msgs
        self.dropped_bytes = dropped_bytes


class BadSubjectError(NatsError, ValueError):
    """A subject, reply subject or queue name is invalid; nothing was sent."""


class BadHeaderError(NatsError, ValueError):
    """A header key or value cannot be encoded (CR, LF, or a bad key); nothing was sent."""


class MaxPayloadError(NatsError, ValueError):
    """The message is larger than the server's max_payload; nothing was sent."""


class JetStreamError(NatsError):
    """Root of the JetStream errors."""


class JetStreamApiError(JetStreamError):
    """The JetStream API answered with an error.

    ``JetStreamApiError.from_api(code, err_code, description)`` returns the most
    specific registered subclass for ``err_code``, or this class itself when the
    code is unknown (the code is kept either way).

    ``description`` is the server's text as it came; ``stream`` and ``consumer`` are
    the names the request was about, when the client knows them (``""`` otherwise).
    The message names them where the server's text does not (``stream 'EVENTS' not
    found``), and ends with the codes and the request subject.
    """

    _registry: ClassVar[dict[int, type[JetStreamApiError]]] = {}
    err_codes: ClassVar[tuple[int, ...]] = ()

    def __init_subclass__(cls, err_codes: tuple[int, ...] = (), **kw: Any) -> None:
        super().__init_subclass__(**kw)
        if err_codes:
            cls.err_codes = err_codes
            for code in err_codes:
                JetStreamApiError._registry[code] = cls

    def __init__(
        self,
        code: int,
        err_code: int,
        description: str,
        *,
        request: str = "",
        stream: str = "",
        consumer: str = "",
    ) -> None:
        self.code = code
        self.err_code = err_code
        self.description = description
        self.request = request
        self.stream = stream
        self.consumer = consumer
        where = f" (request {request})" if request else ""
        super().__init__(f"{self._explain()} [code {code}, err_code {err_code}]{where}")

    def _explain(self) -> str:
        """The message before the codes: the server's description, unless a subclass
        can say more with the names it was given."""
        return self.description

    def _consumer_named(self) -> str:
        return f"consumer {self.consumer!r} of stream {self.stream!r}"

    @classmethod
    def from_api(
        cls,
        code: int,
        err_code: int,
        description: str,
        *,
        request: str = "",
        stream: str = "",
        consumer: str = "",
    ) -> JetStreamApiError:
        """Build the most specific error for ``err_code``."""
        kind = JetStreamApiError._registry.get(err_code, JetStreamApiError)
        return kind(code, err_code, description, request=request, stream=stream, consumer=consumer)


class JetStreamNotEnabledError(JetStreamApiError, err_codes=(10076, 10039)):
    """JetStream is off for the account, or nothing answered an API request (as nats.go)."""


class StreamNotFoundError(JetStreamApiError, err_codes=(10059,)):
    """No stream with that name."""

    def _explain(self) -> str:
        return f"stream {self.stream!r} not found" if self.stream else self.description


class StreamNameInUseError(JetStreamApiError, err_codes=(10058,)):
    """A stream with that name exists with a different configuration."""

    def _explain(self) -> str:
        if not self.stream:
            return self.description
        return (
            f"stream {self.stream!r} exists with another config: change it with "
            f"update_stream() or create_or_update_stream(), or delete it first "
            f"(delete_stream({self.stream!r}))"
        )


class ConsumerNotFoundError(JetStreamApiError, err_codes=(10014,)):
    """No consumer with that name."""

    def _explain(self) -> str:
        if not (self.stream and self.consumer):
            return self.description
        return f"{self._consumer_named()} not found"


class _ConsumerInUse(JetStreamApiError):
    """A consumer of that name exists and cannot take the config asked for: the message
    says which calls change or replace it."""

    #: what is in the way, after the consumer's name
    _conflict: ClassVar[str] = "exists with another config"

    def _explain(self) -> str:
        if not (self.stream and self.consumer):
            return self.description
        return (
            f"{self._consumer_named()} {self._conflict}: change it with "
            f"create_or_update_consumer() or update_consumer(), or delete it first "
            f"(delete_consumer({self.consumer!r}))"
        )


class MessageNotFoundError(JetStreamApiError, err_codes=(10037,)):
    """No message at that sequence or for that subject."""


class WrongLastSequenceError(JetStreamApiError, err_codes=(10071, 10164)):
    """An expected-last-sequence check failed."""


class WrongLastMsgIdError(JetStreamApiError, err_codes=(10070,)):
    """An expected-last-msg-id check failed."""


class BadRequestError(JetStreamApiError, err_codes=(10003,)):
    """The server could not make sense of the request (``bad request``)."""


class InvalidJSONError(JetStreamApiError, err_codes=(10025,)):
    """The server could not parse the request JSON (an unknown enum value, a float duration...)."""


class JetStreamUnavailableError(JetStreamApiError, err_codes=(10008,)):
    """JetStream is temporarily unavailable (no meta leader, for example); retry later."""


class InsufficientResourcesError(JetStreamApiError, err_codes=(10023, 10028, 10047)):
    """The server lacks the memory or storage to place the asset."""


class AccountResourcesExceededError(JetStreamApiError, err_codes=(10002,)):
    """The account's JetStream resource limits would be exceeded."""


class MaximumStreamsLimitError(JetStreamApiError, err_codes=(10027,)):
    """The account already has as many streams as its limits allow."""


class MaximumConsumersLimitError(JetStreamApiError, err_codes=(10026,)):
    """The stream or account already has as many consumers as its limits allow."""


class StreamNameMismatchError(JetStreamApiError, err_codes=(10056,)):
    """The stream name in the request subject differs from the one in the request body."""


class StreamSubjectOverlapError(JetStreamApiError, err_codes=(10065,)):
    """The stream's subjects overlap those of another stream."""


class StreamSealedError(JetStreamApiError, err_codes=(10109,)):
    """The stream is sealed: nothing can be added, deleted or purged."""


class StreamOfflineError(JetStreamApiError, err_codes=(10118, 10194)):
    """The stream exists but is offline (for example, it needs a newer server)."""


class StreamNotMatchError(JetStreamApiError, err_codes=(10060,)):
    """A publish's ``Nats-Expected-Stream`` names another stream than the one that stored it."""


class MessageSizeExceedsMaximumError(JetStreamApiError, err_codes=(10054,)):
    """The message is larger than the stream's ``max_msg_size``."""


class DuplicateMessageConflictError(JetStreamApiError, err_codes=(10158,)):
    """A message with the same ``Nats-Msg-Id`` is still being stored; retry the publish."""


class MessageTTLDisabledError(JetStreamApiError, err_codes=(10166,)):
    """A ``Nats-TTL`` header was sent to a stream without ``allow_msg_ttl``."""


class InvalidMessageTTLError(JetStreamApiError, err_codes=(10165,)):
    """The ``Nats-TTL`` header value is invalid."""


class TooManyRequestsError(JetStreamApiError, err_codes=(10167,)):
    """The server shed the request because too many are in flight; retry later."""


class RequiredApiLevelError(JetStreamApiError, err_codes=(10185,)):
    """The server's API level is below the ``Nats-Required-Api-Level`` the request asked for."""


class ConsumerNameInUseError(_ConsumerInUse, err_codes=(10013,)):
    """A consumer with that name exists with a configuration the one asked for cannot
    replace (a push consumer's deliver subject that has a subscriber, a change a
    clustered server refuses, the legacy create API)."""

    _conflict = (
        "exists with another config and cannot take this one (the ack or deliver "
        "policy, pull or push, and a push consumer's deliver subject while it has a "
        "subscriber cannot change)"
    )


class ConsumerExistsError(_ConsumerInUse, err_codes=(10148,)):
    """A create (action ``create``) found a consumer of that name with another configuration."""


class ConsumerExistingActiveError(JetStreamApiError, err_codes=(10105,)):
    """A push consumer of that name exists and is still bound to an active subscriber."""


class ConsumerDoesNotExistError(ConsumerNotFoundError, err_codes=(10149,)):
    """An update (action ``update``) found no consumer of that name.

    A ``ConsumerNotFoundError``, so one ``except`` catches both ways of not finding it.
    """


class ConsumerOfflineError(JetStreamApiError, err_codes=(10119, 10195)):
    """The consumer exists but is offline (for example, it needs a newer server)."""


class InvalidConsumerResetError(JetStreamApiError, err_codes=(10204,)):
    """A consumer reset asked for a sequence the consumer cannot be reset to."""


class ConsumerDeletedError(JetStreamError):
    """The consumer was deleted while messages were being pulled (409 status)."""


class NoHeartbeatError(JetStreamError):
    """No message or heartbeat arrived within twice the idle heartbeat interval."""


class MsgAlreadyAckedError(JetStreamError):
    """The message was already acknowledged (ack, nak or term); nothing was sent."""


class KeyValueError(JetStreamError):
    """Root of the KeyValue errors."""


class KeyNotFoundError(KeyValueError):
    """The key does not exist, or its last operation deleted or purged it."""


class KeyWrongLastSequenceError(KeyValueError, WrongLastSequenceError):
    """A compare-and-set on a key found another revision."""


class ObjectStoreError(JetStreamError):
    """Root of the ObjectStore errors."""


class ObjectNotFoundError(ObjectStoreError):
    """No object with that name (or it was deleted)."""


class DigestMismatchError(ObjectStoreError):
    """The object's content does not match its recorded size or SHA-256 digest."""


class DisconnectedError(ConnectionClosedError):
    """The connection was lost while waiting for an answer.

    The request may or may not have reached the server; the client reconnects
    on its own. JetStream publishes with a msg id can be retried safely.
    """


class ReconnectBufferFullError(NatsError):
    """Disconnected, and the buffer for publishes made meanwhile is full; nothing was queued."""


class TlsError(NatsError):
    """The TLS handshake failed (certificate, hostname or protocol)."""


class BadNameError(NatsError, ValueError):
    """A stream, consumer, bucket or key name is invalid; nothing was sent."""


class PublishWindowFullError(JetStreamError):
    """``publish_async`` waited too long for room in its window of outstanding publishes."""


class KeyDeletedError(KeyNotFoundError):
    """The key's latest revision (or the one asked for) is a delete or purge.

    ``entry`` is that revision (a ``KeyValueEntry``), so its ``revision`` can be
    used for a compare-and-set.
    """

    def __init__(self, message: str, entry: Any = None) -> None:
        super().__init__(message)
        self.entry = entry


class KeyExistsError(KeyWrongLastSequenceError):
    """``create`` found the key holding a value (its last operation was not a delete)."""


class BucketNotFoundError(KeyValueError, StreamNotFoundError):
    """There is no KeyValue bucket of that name (no ``KV_<bucket>`` stream)."""


class BucketExistsError(KeyValueError, StreamNameInUseError):
    """A bucket of that name exists with another configuration."""


class BadBucketError(KeyValueError):
    """The ``KV_<bucket>`` stream exists but is not laid out as a KeyValue bucket."""


class ObjectAlreadyExistsError(ObjectStoreError):
    """An object of that name exists (a rename or a link would overwrite it)."""


class ObjectLinkError(ObjectStoreError, ValueError):
    """A link cannot be made (to a deleted object or to a link) or followed (a bucket link)."""


class ObjectStoreNotFoundError(ObjectStoreError, StreamNotFoundError):
    """There is no object store bucket of that name (no ``OBJ_<bucket>`` stream)."""


class ObjectStoreExistsError(ObjectStoreError, StreamNameInUseError):
    """An object store bucket of that name exists with another configuration."""


class ScheduleError(JetStreamError):
    """Root of the message schedule errors (ADR-51). ``field`` names the part at fault:
    an argument of ``js.schedule`` (``at``, ``every``, ``cron``, ``target``, ``source``,
    ``ttl``, ``time_zone``, ``rollup``, ``subject``) or ``stream`` (its config)."""

    field: str = ""


class InvalidScheduleError(ScheduleError, ValueError):
    """A schedule the server would refuse, found before sending: nothing was sent."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


#: the part of a schedule each of the server's schedule err_codes is about
_SCHEDULE_FIELDS = {
    **dict.fromkeys((10186, 10187), "allow_msg_schedules"),
    **{10188: "stream", 10189: "schedule", 10190: "target", 10191: "ttl", 10192: "rollup"},
    **{10203: "source", 10212: "scheduler", 10223: "time_zone"},
}


class ScheduleRefusedError(ScheduleError, JetStreamApiError, err_codes=tuple(_SCHEDULE_FIELDS)):
    """The server refused a schedule, or schedules on a mirror or a sourcing stream;
    nothing was stored. ``field`` follows from ``err_code`` (10190: ``target``...)."""

    def _explain(self) -> str:
        self.field = _SCHEDULE_FIELDS.get(self.err_code, "")
        return f"{self.description} ({self.field})" if self.field else self.description


class CounterError(JetStreamError):
    """Root of the distributed counter errors (ADR-49)."""


class CounterNotFoundError(CounterError):
    """The counter stream holds no value for that subject (never added to, or purged)."""


class CounterRefusedError(CounterError, JetStreamApiError, err_codes=(10169, 10170, 10171, 10172)):
    """The server refused an increment (10169 no ``Nats-Incr``, 10170 a payload, 10171
    not an integer or with ``Nats-Rollup``/``Nats-Expected-*``, 10172 a broken value)."""


class CounterDisabledError(CounterRefusedError, err_codes=(10168,)):
    """The stream has no ``allow_msg_counter``: the server refused a ``Nats-Incr``, or
    ``js.counter()`` found it so before sending anything."""


class ServiceError(NatsError):
    """Root of the errors of the services API (``jetstream.service``, ADR-32)."""


class ServiceConfigError(ServiceError, ValueError):
    """A service or endpoint name, a version or a queue group is invalid; nothing was sent."""


class ServiceResponseError(ServiceError):
    """A service answered a request with an error (its ``Nats-Service-Error-Code`` and
    ``Nats-Service-Error`` headers): ``code``, ``description`` and the payload ``data``."""

    def __init__(self, subject: str, code: int, description: str, data: bytes = b"") -> None:
        super().__init__(f"the service on {subject!r} answered error {code}: {description}")
        self.subject, self.code, self.description, self.data = subject, code, description, data
