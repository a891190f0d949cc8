"""The JetStream context: the API request helper, stream management and publishing.

``nc.jetstream(domain=None, api_prefix=None, timeout=5.0)`` returns one. Every API
call is a request on ``<prefix>.<verb>`` (``$JS.API`` by default, ``$JS.<domain>.API``
for a domain) whose JSON reply is decoded into a typed Struct; an error in the reply
raises the ``JetStreamApiError`` subclass registered for its ``err_code``. Publishing
is mixed in from ``_publish.py``, the dead-letter helpers from ``advisories.py``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, TypeVar

from ._context import validate_name
from ._leaders import LOOKUP_TIMEOUT, NO_STREAM, LeaderWatch, SubjectStreams
from ._pubasync import AsyncPublisher
from ._publish import Publishing
from .advisories import DeadLetters
from .api import (
    REQUIRED_API_LEVEL_HEADER,
    AccountInfo,
    ApiResponse,
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
from .core.client import Client
from .core.message import Msg
from .errors import (
    JetStreamNotEnabledError,
    NatsError,
    NoRespondersError,
    StreamNotFoundError,
    StreamSubjectOverlapError,
)
from .errors import TimeoutError as NatsTimeoutError
from .protocol.headers import HeadersLike
from .stream import Stream

__all__ = ["JetStreamContext", "api_names", "validate_name"]

R = TypeVar("R", bound=ApiResponse)
T = TypeVar("T")


class JetStreamContext(Publishing, DeadLetters):
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
        self._leaders = LeaderWatch(nc)
        self._streams = SubjectStreams(nc, self._leaders, self._stream_storing)
        self._publisher = AsyncPublisher(nc, publish_async_max_pending, timeout, self._streams)

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
            # Nothing listens on the API subject: JetStream is off for this account or
            # domain (or, for a direct get, no replica is serving yet).
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
        stream, consumer = api_names(suffix)
        return decode_response(
            msg.data, reply_type, self._prefix + suffix, stream=stream, consumer=consumer
        )

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
            StreamSubjectOverlapError: another stream holds subjects these overlap (the
                message names it, and them).
        """
        validate_name("stream", config.name)
        self._streams.forget()
        try:
            info = await self._api(
                f"STREAM.CREATE.{config.name}",
                config,
                StreamInfoResponse,
                headers=self._level_headers(config),
            )
        except StreamSubjectOverlapError as exc:
            raise await self._overlap(config, exc) from None
        return Stream(self, info)

    async def update_stream(self, config: StreamConfig) -> Stream:
        """Change a stream's config; returns its handle.

        Raises:
            StreamNotFoundError: there is no such stream.
            StreamSubjectOverlapError: another stream holds subjects these overlap (the
                message names it, and them).
        """
        validate_name("stream", config.name)
        self._streams.forget()
        try:
            info = await self._api(
                f"STREAM.UPDATE.{config.name}",
                config,
                StreamInfoResponse,
                headers=self._level_headers(config),
            )
        except StreamSubjectOverlapError as exc:
            raise await self._overlap(config, exc) from None
        return Stream(self, info)

    async def _overlap(
        self, config: StreamConfig, exc: StreamSubjectOverlapError
    ) -> StreamSubjectOverlapError:
        """The server's overlap error, naming the streams in the way: for each subject of
        ``config``, the other streams that hold one it overlaps, and which (the server's
        reply names none). The error as it came when they cannot be listed."""
        clashes: dict[str, list[str]] = {}
        ours: list[str] = []  # those that overlap another stream's
        try:
            for subject in config.subjects or [config.name]:
                async for info in self.streams(subject=subject):
                    if info.config.name != config.name:
                        theirs = clashes.setdefault(info.config.name, [])
                        held = info.config.subjects or [info.config.name]
                        theirs += [s for s in held if _collide(s, subject) and s not in theirs]
                        ours += [subject] if subject not in ours else []
        except NatsError:
            return exc
        if not clashes:
            return exc
        named = "; ".join(
            f"stream {name!r} holds {', '.join(map(repr, theirs))}"
            for name, theirs in sorted(clashes.items())
        )
        return StreamSubjectOverlapError(
            exc.code,
            exc.err_code,
            f"{exc.description}: {named}, which {', '.join(map(repr, ours))} of "
            f"{config.name!r} overlap (a subject is stored by one stream only)",
            request=exc.request,
            stream=config.name,
        )

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
        self._streams.forget()
        resp = await self._api(f"STREAM.DELETE.{name}", None, StreamDeleteResponse)
        return resp.success

    async def stream(self, name: str, *, timeout: float | None = None) -> Stream:
        """The handle of an existing stream (its info is fetched once, as ``cached_info``).

        Raises:
            StreamNotFoundError: there is no such stream.
        """
        return Stream(self, await self._stream_info(name, timeout=timeout))

    async def _stream_info(self, name: str, *, timeout: float | None = None) -> StreamInfo:
        validate_name("stream", name)
        return await self._api(f"STREAM.INFO.{name}", None, StreamInfoResponse, timeout=timeout)

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

    async def _stream_storing(self, subject: str) -> str | None:
        """For a publish that found no responders: the stream that stores ``subject``,
        ``NO_STREAM`` when none does, None when the API did not answer (a meta leader
        being elected: the publish keeps retrying)."""
        try:
            reply = await self._api(
                "STREAM.NAMES",
                StreamListRequest(subject=subject),
                StreamNamesResponse,
                timeout=min(self.timeout, LOOKUP_TIMEOUT),
            )
        except NatsError:
            return None
        return reply.streams[0] if reply.streams else NO_STREAM


def _collide(a: str, b: str) -> bool:
    """Whether some subject matches both ``a`` and ``b`` (wildcards allowed in each)."""
    ta, tb = a.split("."), b.split(".")
    for i in range(max(len(ta), len(tb))):
        if i >= len(ta) or i >= len(tb):
            return False
        x, y = ta[i], tb[i]
        if ">" in (x, y):
            return True
        if x != y and "*" not in (x, y):
            return False
    return True


#: API verbs of two tokens before the names (``STREAM.MSG.GET.<stream>``)
_TWO_TOKEN_VERBS = frozenset({"MSG", "LEADER", "PEER", "DURABLE"})


def api_names(suffix: str) -> tuple[str, str]:
    """The stream and consumer an API verb is about, ``""`` for none: ``STREAM.INFO.S``
    gives ``("S", "")``, ``CONSUMER.CREATE.S.C.<filter>`` gives ``("S", "C")``.

    Names hold no dots (``validate_name``), so the tokens after the verb are the names.
    """
    tokens = suffix.split(".")
    if tokens[0] not in ("STREAM", "CONSUMER", "DIRECT"):
        return "", ""
    at = 3 if len(tokens) > 1 and tokens[1] in _TWO_TOKEN_VERBS else 2
    stream = tokens[at] if len(tokens) > at else ""
    consumer = tokens[at + 1] if tokens[0] == "CONSUMER" and len(tokens) > at + 1 else ""
    return stream, consumer


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
