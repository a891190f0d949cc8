"""What the sink and the source share: connection settings that survive pickling, running
a coroutine from Spark's synchronous callbacks, and the adapter's errors."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..client import Client
from ..errors import NatsError

__all__ = ["ConnectSpec", "SparkConfigError", "SparkWriteError", "run_sync"]

T = TypeVar("T")

# Connect options that can cross a pickle (callbacks and SSL contexts cannot).
_PICKLABLE = {
    "name",
    "user",
    "password",
    "token",
    "nkeys_seed",
    "nkeys_seed_file",
    "creds",
    "tls_hostname",
    "tls_handshake_first",
    "connect_timeout",
    "allow_reconnect",
    "max_reconnect_attempts",
    "reconnect_time_wait",
    "reconnect_jitter",
    "reconnect_buf_size",
    "ping_interval",
    "max_outstanding_pings",
    "dont_randomize",
    "inbox_prefix",
}


class SparkConfigError(NatsError, ValueError):
    """The sink or source was set up wrong: a missing stream or column, a stream without
    a duplicate window, an unreachable server. Raised when the query starts."""


class SparkWriteError(NatsError):
    """Some rows of a partition could not be confirmed by a PubAck (Spark retries the
    task or the batch; the rows' message ids make the retry store each row once)."""


@dataclass(frozen=True)
class ConnectSpec:
    """Where and how to connect, in a form Spark can ship to executors.

    ``tls_ca`` / ``tls_cert`` / ``tls_key`` are file paths that must exist on every
    executor; an ``ssl.SSLContext`` cannot be pickled, so it is built inside the task.
    """

    servers: tuple[str, ...]
    options: Mapping[str, Any] = field(default_factory=dict)
    tls_ca: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    api_prefix: str | None = None
    domain: str | None = None
    timeout: float = 10.0

    @classmethod
    def make(
        cls,
        servers: str | Sequence[str],
        *,
        tls_ca: str | None = None,
        tls_cert: str | None = None,
        tls_key: str | None = None,
        api_prefix: str | None = None,
        domain: str | None = None,
        timeout: float = 10.0,
        **options: Any,
    ) -> ConnectSpec:
        unknown = sorted(set(options) - _PICKLABLE)
        if unknown:
            raise SparkConfigError(
                f"connect options {unknown} cannot be shipped to Spark executors; "
                f"allowed: {sorted(_PICKLABLE)}"
            )
        if isinstance(servers, str):
            servers = [s.strip() for s in servers.split(",") if s.strip()]
        if not servers:
            raise SparkConfigError("no NATS server given")
        return cls(
            tuple(servers), dict(options), tls_ca, tls_cert, tls_key, api_prefix, domain, timeout
        )

    def __repr__(self) -> str:
        # never show credentials
        return f"ConnectSpec(servers={list(self.servers)!r})"

    async def connect(self) -> Client:
        """Connect; an unreachable server is a ``SparkConfigError`` naming the servers."""
        from .. import connect
        from ..core.tls import make_ssl_context

        kw: dict[str, Any] = {"max_reconnect_attempts": 10, **self.options}
        if self.tls_ca or self.tls_cert:
            kw["tls"] = make_ssl_context(
                ca_file=self.tls_ca, cert_file=self.tls_cert, key_file=self.tls_key
            )
        try:
            return await connect(list(self.servers), **kw)
        except NatsError as exc:
            raise SparkConfigError(
                f"cannot connect to NATS at {', '.join(self.servers)}: {exc}"
            ) from exc

    def jetstream(self, nc: Client, **kw: Any) -> Any:
        return nc.jetstream(
            domain=self.domain, api_prefix=self.api_prefix, timeout=self.timeout, **kw
        )


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion on a new event loop, from synchronous Spark code.

    Spark calls the adapter from threads with no event loop (the driver's foreachBatch
    callback, executor tasks); when the caller's thread already runs one (a notebook),
    the coroutine runs on a fresh thread instead.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(coro)
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=target, name="jetstream-spark")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]  # type: ignore[no-any-return]
