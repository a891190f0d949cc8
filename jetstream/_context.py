"""What the handles of the JetStream layer need of the context and consumer that made them.

Streams, consumers, their message iterators and ordered consumers hold the context
they were made from and call its API request helper; the context (``js.py``) makes
them. These Protocols let them name what they use without importing the context,
so the imports of the layer run one way: the context on top of its handles.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, Protocol, TypeVar

from ._leaders import LeaderWatch
from .api import ApiResponse, ConsumerInfo, StreamInfo
from .core.client import Client
from .core.message import Msg
from .errors import BadNameError
from .protocol.headers import HeadersLike

__all__ = ["ConsumerHandle", "Context", "validate_name"]

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


class Context(Protocol):
    """The JetStream context as its handles use it (``js.JetStreamContext`` is one)."""

    timeout: float
    _leaders: LeaderWatch

    @property
    def client(self) -> Client: ...

    def api_subject(self, suffix: str) -> str: ...

    async def _request(
        self,
        suffix: str,
        body: bytes = b"",
        *,
        timeout: float | None = None,
        headers: HeadersLike | None = None,
    ) -> Msg: ...

    async def _api(
        self,
        suffix: str,
        request: Any,
        reply_type: type[R],
        *,
        timeout: float | None = None,
        headers: HeadersLike | None = None,
    ) -> R: ...

    def _paged(
        self,
        suffix: str,
        make_request: Callable[[int], Any],
        reply_type: type[R],
        items: Callable[[R], Sequence[T]],
    ) -> AsyncIterator[T]: ...

    def _level_headers(self, config: Any) -> dict[str, str] | None: ...

    async def _stream_info(self, name: str, *, timeout: float | None = None) -> StreamInfo: ...


class ConsumerHandle(Protocol):
    """A consumer as its message iterators use it (``consumer.Consumer`` is one)."""

    name: str
    stream_name: str
    cached_info: ConsumerInfo
    #: pin id of a pinned_client priority group, carried from pull to pull
    _pin_id: str | None

    @property
    def js(self) -> Context: ...

    @property
    def _js(self) -> Context: ...
