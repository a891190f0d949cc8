"""The JetStream context: the API request helper, stream management and publishing.

``nc.jetstream(domain=None, api_prefix=None, timeout=5.0)`` returns one. Every API
call is a request on ``<prefix>.<verb>`` (``$JS.API`` by default, ``$JS.<domain>.API``
for a domain) whose JSON reply is decoded into a typed Struct; an error in the reply
raises the ``JetStreamApiError`` subclass registered for its ``err_code``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from ._api_base import ApiResponse
from ._leaders import LeaderWatch
from ._pubasync import AsyncPublisher
from ._retry import RETRY_BASE, attempt_timeout, retry_delay
from .advisories import DeadLetters
from .api import (
    REQUIRED_API_LEVEL_HEADER,
    AccountInfo,
    PubAck,
    StreamConfig,
    StreamDeleteResponse,
    StreamInfo,
    StreamInfoResponse,
    StreamListRequest,
    StreamListResponse,
    StreamNamesResponse,
    decode_response,
    encode,
    required_api_level,
)
from .errors import (
    BadNameError,
    DisconnectedError,
    JetStreamNotEnabledError,
    NatsError,
    NoRespondersError,
    StreamNotFoundError,
)
from .errors import TimeoutError as NatsTimeoutError
from .protocol.headers import (
    NATS_EXPECTED_LAST_MSG_ID,
    NATS_EXPECTED_LAST_SEQUENCE,
    NATS_EXPECTED_LAST_SUBJECT_SEQUENCE,
    NATS_EXPECTED_STREAM,
    NATS_MSG_ID,
    NATS_TTL,
    Headers,
    HeadersLike,
)
from .protocol.subjects import next_nuid

NATS_BATCH_ID = "Nats-Batch-Id"
NATS_BATCH_SEQUENCE = "Nats-Batch-Sequence"
NATS_BATCH_COMMIT = "Nats-Batch-Commit"

if TYPE_CHECKING:
    from .core.client import Client
    from .core.message import Msg
    from .stream import Stream

__all__ = ["JetStreamContext", "validate_name"]

R = TypeVar("R", bound=ApiResponse)
T = TypeVar("T")

_BAD_NAME_CHARS = frozenset(" \t\r\n\x00.*>/\\")


def validate_name(kind: str, name: str) -> None:
    """Check a stream or consumer name: non-empty, no '.', '*', '>', whitespace or slashes.

    Raises:
        BadNameError: the name is invalid (nothing is sent).
    """
    if not isinstance(name, str) or not name:
        raise BadNameError(f"{kind} name is required")
    bad = _BAD_NAME_CHARS.intersection(name)
    if bad or not name.isprintable():
        raise BadNameError(f"invalid {kind} name {name!r}: no '.', '*', '>', whitespace or '/'")


def ttl_value(ttl: float | str) -> str:
    """The ``Nats-TTL`` header value for a per-message TTL in seconds (or 'never')."""
    if isinstance(ttl, str):
        return ttl
    if ttl <= 0:
        raise ValueError("ttl must be positive (or 'never')")
    if float(ttl).is_integer():
        return f"{int(ttl)}s"
    return f"{round(ttl * 1000)}ms"


class JetStreamContext(DeadLetters):
    """The JetStream context of a connection: streams, publishing, dead letters.

    ``nc.jetstream()`` returns a ``jetstream.JetStream``, this class with the KeyValue
    and ObjectStore bucket management added (``jetstream.client``); the handles of
    streams, consumers and buckets hold the context they were made from.
    """

    def __init__(
        self,
        nc: Client,
        *,
        domain: str | None = None,
        api_prefix: str | None = None,
        timeout: float = 5.0,
        publish_async_max_pending: int = 4000,
    ) -> None:
        if domain and api_prefix:
            raise ValueError("give a domain or an api_prefix, not both")
        prefix = f"$JS.{domain}.API" if domain else (api_prefix or "$JS.API").rstrip(".")
        self._nc = nc
        self.domain = domain
        self.api_prefix = prefix
        self._prefix = prefix + "."
        self.timeout = timeout
        self._publisher = AsyncPublisher(nc, publish_async_max_pending, timeout)
        self._leaders = LeaderWatch(nc)

    @property
    def client(self) -> Client:
        """The core connection under this context."""
        return self._nc

    def api_subject(self, suffix: str) -> str:
        """The full subject of an API verb, e.g. ``api_subject("STREAM.INFO.S")``."""
        return self._prefix + suffix

    # -- the API request helper ---------------------------------------------------------

    async def _request(
        self,
        suffix: str,
        body: bytes = b"",
        *,
        timeout: float | None = None,
        headers: HeadersLike | None = None,
    ) -> Msg:
        subject = self._prefix + suffix
        t = self.timeout if timeout is None else timeout
        try:
            return await self._nc.request(subject, body, timeout=t, headers=headers)
        except NoRespondersError:
            raise JetStreamNotEnabledError(
                503, 10076, f"no JetStream responded on {subject}", request=subject
            ) from None
        except NatsTimeoutError:
            raise NatsTimeoutError(
                f"JetStream API request {subject} got no reply within {t}s"
            ) from None

    async def _api(
        self,
        suffix: str,
        request: Any,
        reply_type: type[R],
        *,
        timeout: float | None = None,
        headers: HeadersLike | None = None,
    ) -> R:
        """Send an API request (a Struct, raw bytes or None) and decode the typed reply."""
        if request is None:
            body = b""
        elif isinstance(request, bytes):
            body = request
        else:
            body = encode(request)
        msg = await self._request(suffix, body, timeout=timeout, headers=headers)
        return decode_response(msg.data, reply_type, self._prefix + suffix)

    def _paged(
        self,
        suffix: str,
        make_request: Callable[[int], Any],
        reply_type: type[R],
        items: Callable[[R], Sequence[T]],
    ) -> AsyncIterator[T]:
        return _Paged(self, suffix, make_request, reply_type, items)

    # -- account ---------------------------------------------------------------------------

    async def account_info(self) -> AccountInfo:
        """Usage and limits of this account's JetStream."""
        return await self._api("INFO", None, AccountInfo)

    # -- streams ----------------------------------------------------------------------------

    def _level_headers(self, config: Any) -> dict[str, str] | None:
        level = required_api_level(config)
        return {REQUIRED_API_LEVEL_HEADER: str(level)} if level > 0 else None

    async def create_stream(self, config: StreamConfig) -> Stream:
        """Create a stream; returns its handle.

        Raises:
            BadNameError: the name is invalid (nothing is sent).
            StreamNameInUseError: a stream of that name exists with another config.
        """
        from .stream import Stream

        validate_name("stream", config.name)
        info = await self._api(
            f"STREAM.CREATE.{config.name}",
            config,
            StreamInfoResponse,
            headers=self._level_headers(config),
        )
        return Stream(self, info)

    async def update_stream(self, config: StreamConfig) -> Stream:
        """Change a stream's config; returns its handle.

        Raises:
            StreamNotFoundError: there is no such stream.
        """
        from .stream import Stream

        validate_name("stream", config.name)
        info = await self._api(
            f"STREAM.UPDATE.{config.name}",
            config,
            StreamInfoResponse,
            headers=self._level_headers(config),
        )
        return Stream(self, info)

    async def create_or_update_stream(self, config: StreamConfig) -> Stream:
        """Update the stream when it exists, create it otherwise."""
        try:
            return await self.update_stream(config)
        except StreamNotFoundError:
            return await self.create_stream(config)

    async def delete_stream(self, name: str) -> bool:
        """Delete a stream and all its messages and consumers.

        Raises:
            StreamNotFoundError: there is no such stream.
        """
        validate_name("stream", name)
        resp = await self._api(f"STREAM.DELETE.{name}", None, StreamDeleteResponse)
        return resp.success

    async def stream(self, name: str, *, timeout: float | None = None) -> Stream:
        """The handle of an existing stream (its info is fetched once, as ``cached_info``).

        Raises:
            StreamNotFoundError: there is no such stream.
        """
        from .stream import Stream

        validate_name("stream", name)
        info = await self._api(f"STREAM.INFO.{name}", None, StreamInfoResponse, timeout=timeout)
        return Stream(self, info)

    def streams(self, *, subject: str | None = None) -> AsyncIterator[StreamInfo]:
        """Every stream's info (all pages), optionally only those holding ``subject``."""
        return self._paged(
            "STREAM.LIST",
            lambda off: StreamListRequest(offset=off, subject=subject or _unset()),
            StreamListResponse,
            lambda r: r.streams,
        )

    def stream_names(self, *, subject: str | None = None) -> AsyncIterator[str]:
        """Every stream's name (all pages), optionally only those holding ``subject``."""
        return self._paged(
            "STREAM.NAMES",
            lambda off: StreamListRequest(offset=off, subject=subject or _unset()),
            StreamNamesResponse,
            lambda r: r.streams,
        )

    async def find_stream(self, subject: str) -> str:
        """The name of the stream that stores ``subject``.

        Raises:
            StreamNotFoundError: no stream stores it.
        """
        async for name in self.stream_names(subject=subject):
            return name
        raise StreamNotFoundError(
            404, 10059, f"no stream stores subject {subject!r}", request="STREAM.NAMES"
        )

    # -- publishing -------------------------------------------------------------------------

    @staticmethod
    def _publish_headers(
        headers: HeadersLike | None,
        msg_id: str | None,
        expected_stream: str | None,
        expected_last_seq: int | None,
        expected_last_subject_seq: int | None,
        expected_last_msg_id: str | None,
        ttl: float | str | None,
    ) -> HeadersLike | None:
        if (
            msg_id is None
            and expected_stream is None
            and expected_last_seq is None
            and expected_last_subject_seq is None
            and expected_last_msg_id is None
            and ttl is None
        ):
            return headers
        only_id = (
            expected_stream is None
            and expected_last_seq is None
            and expected_last_subject_seq is None
            and expected_last_msg_id is None
            and ttl is None
        )
        if only_id and headers is None and msg_id is not None:
            return {NATS_MSG_ID: msg_id}  # an id alone: a plain dict encodes fastest
        h = Headers(headers) if isinstance(headers, Mapping) else Headers()
        if msg_id is not None:
            h[NATS_MSG_ID] = msg_id
        if expected_stream is not None:
            h[NATS_EXPECTED_STREAM] = expected_stream
        if expected_last_seq is not None:
            h[NATS_EXPECTED_LAST_SEQUENCE] = str(expected_last_seq)
        if expected_last_subject_seq is not None:
            h[NATS_EXPECTED_LAST_SUBJECT_SEQUENCE] = str(expected_last_subject_seq)
        if expected_last_msg_id is not None:
            h[NATS_EXPECTED_LAST_MSG_ID] = expected_last_msg_id
        if ttl is not None:
            h[NATS_TTL] = ttl_value(ttl)
        return h

    async def publish(
        self,
        subject: str,
        data: bytes | bytearray | memoryview = b"",
        *,
        headers: HeadersLike | None = None,
        msg_id: str | None = None,
        expected_stream: str | None = None,
        expected_last_seq: int | None = None,
        expected_last_subject_seq: int | None = None,
        expected_last_msg_id: str | None = None,
        ttl: float | str | None = None,
        timeout: float | None = None,
        retry_attempts: int | None = None,
        retry_wait: float = RETRY_BASE,
    ) -> PubAck:
        """Publish to a stream and wait for its ``PubAck``, for at most ``timeout`` seconds.

        ``timeout`` is the deadline of the whole call, retries included. No
        responders (a 503: the stream is electing a leader, restarting, or does not
        exist yet; nothing was stored) is retried with backoff and jitter, from about
        ``retry_wait`` seconds up to about 1 s, until the deadline. With a ``msg_id``, a
        lost connection and an attempt left unanswered are retried too: the stream
        deduplicates the id inside its duplicate window, so a retry never stores the
        message twice. Without one those raise at once, since the message may have
        been stored.

        Args:
            msg_id: ``Nats-Msg-Id``, for deduplication (and safe retries).
            expected_stream: the stream that must store it (checked by the server,
                like the other ``expected_*`` options).
            expected_last_seq: the stream's last sequence must be this.
            expected_last_subject_seq: the last sequence on ``subject`` must be this.
            expected_last_msg_id: the stream's last ``Nats-Msg-Id`` must be this.
            ttl: per-message TTL in seconds (the stream needs ``allow_msg_ttl``).
            timeout: seconds for the whole call (default: the context's).
            retry_attempts: an optional cap on the retries (None: until the deadline).
            retry_wait: the first backoff, in seconds.

        Raises:
            NoRespondersError: still no stream answered at the deadline (or after
                ``retry_attempts`` retries); ``attempts`` says how many were made.
            WrongLastSequenceError, WrongLastMsgIdError, StreamNotMatchError...: a
                failed expectation (a ``JetStreamApiError``).
            TimeoutError: no ack in time (``attempts`` and ``__cause__`` say more).
            DisconnectedError: the connection was lost before the ack, without a
                ``msg_id`` (the message may have been stored).
        """
        h = self._publish_headers(
            headers,
            msg_id,
            expected_stream,
            expected_last_seq,
            expected_last_subject_seq,
            expected_last_msg_id,
            ttl,
        )
        nc = self._nc
        total = self.timeout if timeout is None else timeout
        start = nc._loop.time()
        try:  # the common case: answered at the first attempt
            first_wait = total if msg_id is None else attempt_timeout(total)
            msg = await nc.request(subject, data, timeout=first_wait, headers=h)
            return decode_response(msg.data, PubAck, subject)
        except NoRespondersError as exc:
            first: NatsError = exc
        except (DisconnectedError, NatsTimeoutError) as exc:
            if msg_id is None:
                raise
            first = exc
        return await self._publish_retry(
            subject, data, h, msg_id is not None, start + total, first, retry_attempts, retry_wait
        )

    async def _publish_retry(
        self,
        subject: str,
        data: bytes | bytearray | memoryview,
        headers: HeadersLike | None,
        keyed: bool,
        deadline: float,
        cause: NatsError,
        retry_attempts: int | None,
        retry_wait: float,
    ) -> PubAck:
        """The rest of ``publish`` after a first attempt that failed with ``cause``."""
        nc = self._nc
        loop = nc._loop
        attempts = 1
        while True:
            left = deadline - loop.time()
            if retry_attempts is not None and attempts > retry_attempts:
                raise _gave_up(cause, subject, attempts, f"(retry_attempts={retry_attempts})")
            if left < 0.01:
                raise _gave_up(cause, subject, attempts, "before the call's deadline")
            await asyncio.sleep(min(retry_delay(attempts, base=retry_wait), left / 2))
            left = deadline - loop.time()
            attempts += 1
            try:
                msg = await nc.request(
                    subject, data, timeout=attempt_timeout(left) if keyed else left, headers=headers
                )
                return decode_response(msg.data, PubAck, subject)
            except NoRespondersError as exc:
                cause = exc
            except (DisconnectedError, NatsTimeoutError) as exc:
                if not keyed:
                    raise _gave_up(exc, subject, attempts, "(no msg_id: not retried)") from exc
                cause = exc

    async def publish_batch(
        self,
        messages: Sequence[tuple[str, bytes] | tuple[str, bytes, HeadersLike | None]],
        *,
        timeout: float | None = None,
    ) -> PubAck:
        """Publish up to 1000 messages as one atomic batch: all are stored, or none.

        The stream needs ``allow_atomic`` (server 2.12+). The first message opens the
        batch (the server confirms it), the middle ones follow without waiting, and the
        last one commits it; its ``PubAck`` has ``batch`` and ``count`` set and ``seq``
        is the sequence of the last message.

        Raises:
            ValueError: no messages, or more than 1000 (nothing is sent).
            JetStreamApiError: the server refused the batch (then nothing was stored).
        """
        n = len(messages)
        if not 0 < n <= 1000:
            raise ValueError(f"an atomic batch holds 1 to 1000 messages, not {n}")
        t = self.timeout if timeout is None else timeout
        batch_id = next_nuid()
        nc = self._nc
        for i, item in enumerate(messages, 1):
            subject, data = item[0], item[1]
            extra = item[2] if len(item) > 2 else None
            h = Headers(extra) if extra else Headers()
            h[NATS_BATCH_ID] = batch_id
            h[NATS_BATCH_SEQUENCE] = str(i)
            if i == n:
                h[NATS_BATCH_COMMIT] = "1"
                msg = await nc.request(subject, data, timeout=t, headers=h)
                if msg.status == 503:
                    raise NoRespondersError(f"no stream answered the batch on {subject!r}")
                return decode_response(msg.data, PubAck, subject)
            if i == 1:
                msg = await nc.request(subject, data, timeout=t, headers=h)
                if msg.status == 503:
                    raise NoRespondersError(f"no stream answered the batch on {subject!r}")
                if msg.data:  # an empty reply opens the batch; a PubAck here is an error
                    decode_response(msg.data, PubAck, subject)
            else:
                await nc.publish(subject, data, headers=h)
        raise AssertionError("unreachable")  # pragma: no cover

    async def publish_async(
        self,
        subject: str,
        data: bytes | bytearray | memoryview = b"",
        *,
        headers: HeadersLike | None = None,
        msg_id: str | None = None,
        expected_stream: str | None = None,
        expected_last_seq: int | None = None,
        expected_last_subject_seq: int | None = None,
        expected_last_msg_id: str | None = None,
        ttl: float | str | None = None,
        timeout: float | None = None,
    ) -> asyncio.Future[PubAck]:
        """Publish without waiting for the ack; returns a future of the ``PubAck``.

        At most ``publish_async_max_pending`` publishes (default 4000) are outstanding:
        when the window is full this waits for room (at most the ack timeout, then
        ``PublishWindowFullError``). ``timeout`` is the future's deadline: no
        responders is sent again with backoff until then, and so, with a ``msg_id``,
        is an attempt left unanswered or cut by a lost connection (sent again once
        reconnected). The future always resolves: with the ack, the API error,
        ``NoRespondersError`` or ``TimeoutError`` at the deadline (``attempts`` says how
        many were made), ``DisconnectedError`` when the connection is lost (without a
        ``msg_id``), or ``ConnectionClosedError`` on close.
        """
        h = (
            self._publish_headers(
                headers,
                msg_id,
                expected_stream,
                expected_last_seq,
                expected_last_subject_seq,
                expected_last_msg_id,
                ttl,
            )
            if msg_id is not None
            or ttl is not None
            or expected_stream is not None
            or expected_last_seq is not None
            or expected_last_subject_seq is not None
            or expected_last_msg_id is not None
            else headers
        )
        pub = self._publisher
        # The common case without a coroutine of its own: room in the window, socket writable.
        keyed = msg_id is not None
        fut = pub.try_publish(subject, data, h, timeout, keyed)
        if fut is None:
            return await pub.publish(subject, data, h, timeout, keyed)
        conn = self._nc._conn
        if conn is not None and conn.write_paused:
            await self._nc._wait_writable()
        return fut

    async def publish_async_complete(self, timeout: float | None = None) -> None:
        """Wait until every ``publish_async`` future has resolved.

        Raises:
            TimeoutError: some are still outstanding after ``timeout`` seconds.
        """
        await self._publisher.wait_all(self.timeout * 2 if timeout is None else timeout)

    @property
    def publish_async_pending(self) -> int:
        """How many ``publish_async`` acks are outstanding."""
        return self._publisher.pending


def _gave_up(cause: NatsError, subject: str, attempts: int, how: str) -> NatsError:
    """The error a retried publish ends with: the last cause's kind, saying how many
    attempts were made (also as ``attempts``), with the last cause as ``__cause__``."""
    if isinstance(cause, NoRespondersError):
        what = "no stream answered"
    elif isinstance(cause, DisconnectedError):
        what = "the connection was lost during"
    else:
        what = "no ack came for"
    exc = type(cause)(
        f"{what} a publish to {subject!r}: {attempts} attempt(s) {how}; last: {cause}"
    )
    exc.attempts = attempts
    exc.__cause__ = cause
    return exc


def _unset() -> Any:
    import msgspec

    return msgspec.UNSET


class _Paged(AsyncIterator[T]):
    """Walk every page of a list/names API (offset paging) as one async iterator."""

    def __init__(
        self,
        js: JetStreamContext,
        suffix: str,
        make_request: Callable[[int], Any],
        reply_type: type[Any],
        items: Callable[[Any], Sequence[T]],
    ) -> None:
        self._js = js
        self._suffix = suffix
        self._make = make_request
        self._type = reply_type
        self._items = items
        self._buf: list[T] = []
        self._offset = 0
        self._done = False

    def __aiter__(self) -> _Paged[T]:
        return self

    async def __anext__(self) -> T:
        while not self._buf:
            if self._done:
                raise StopAsyncIteration
            reply = await self._js._api(self._suffix, self._make(self._offset), self._type)
            page = list(self._items(reply))
            self._offset += len(page)
            total = getattr(reply, "total", 0)
            if not page or self._offset >= total:
                self._done = True
            self._buf = page[::-1]
        return self._buf.pop()
