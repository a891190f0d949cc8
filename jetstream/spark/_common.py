"""What the sink, the writer and the source share: connection settings that survive
pickling, the string options of the ``jetstream`` data source, running a coroutine from
Spark's synchronous callbacks, and the adapter's errors."""

from __future__ import annotations

import asyncio
import difflib
import inspect
import logging
import os
import re
import threading
from collections.abc import Awaitable, Callable, Collection, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from ..bulk import Backoff
from ..errors import (
    ConnectionClosedError,
    JetStreamNotEnabledError,
    JetStreamUnavailableError,
    NatsError,
    NoRespondersError,
    NoServersError,
    StaleConnectionError,
    StreamOfflineError,
)
from ..errors import TimeoutError as NatsTimeoutError

if TYPE_CHECKING:
    from jetstream import Client

__all__ = [
    "CONNECT_OPTIONS",
    "ConnectSpec",
    "READ_TIMEOUT",
    "WRITE_TIMEOUT",
    "SparkConfigError",
    "SparkDataLossError",
    "SparkReadTimeoutError",
    "SparkWriteError",
    "argument_names",
    "connect_spec_from_options",
    "did_you_mean",
    "is_connect",
    "lower_keys",
    "number_option",
    "patiently",
    "run_sync",
    "task_slots",
    "transient",
]

T = TypeVar("T")

log = logging.getLogger("jetstream.spark")

#: how long the source waits through a server that does not answer (paused, restarting,
#: electing a leader, out of reach) before it fails loudly: option ``read_timeout``
READ_TIMEOUT = 300.0
#: how long the sink and the writer wait through the same, for a row to be confirmed:
#: option ``write_timeout``
WRITE_TIMEOUT = 300.0

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

#: the connect options of the ``jetstream`` data source (string options)
CONNECT_OPTIONS = (
    "user",
    "password",
    "token",
    "creds",
    "name",
    "connect_timeout",
    "tls_ca",
    "tls_cert",
    "tls_key",
    "api_prefix",
    "domain",
    "timeout",
)


class SparkConfigError(NatsError, ValueError):
    """The sink, writer or source was set up wrong: a missing stream or column, a stream
    without a duplicate window, an unreachable server. Raised when the query starts (at
    its first batch), with the option at fault named in the message."""


class SparkDataLossError(NatsError):
    """The ``jetstream`` source found messages gone before the query read them: removed
    by the stream's limits (``max_age``, ``max_msgs``, ``max_bytes``) or a purge, or
    lost with a stream that was deleted and made again. The message names the stream
    and the sequences; option ``fail_on_data_loss=false`` skips such gaps with a
    warning instead."""


class SparkReadTimeoutError(NatsTimeoutError):
    """The ``jetstream`` source waited ``read_timeout`` seconds for a server that did
    not answer (paused, restarting, electing a leader, out of reach) and gave up. The
    message names the stream, the range and what was read of it; nothing was skipped:
    the task (or the planning on the driver) fails, Spark retries the task or the query
    stops, and a re-run from the checkpoint reads the range again."""


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
        own_arguments: Collection[str] = (),
        **options: Any,
    ) -> ConnectSpec:
        """The spec of ``servers`` and the connect ``options`` (those of
        ``jetstream.connect`` that can be pickled).

        ``own_arguments``: the names of the caller's own arguments, when it passes its
        leftover keyword arguments here as ``options`` (``foreach_batch_sink``,
        ``kv_sink``): a name that is neither one of them nor a connect option is refused
        as an unknown argument, with the closest of them all.

        Raises:
            SparkConfigError: an unknown name; a connect option that cannot be shipped
                to executors (a callback, an ``SSLContext``); no server.
        """
        _check_connect_options(options, own_arguments)
        if isinstance(servers, str):
            servers = [s.strip() for s in servers.split(",") if s.strip()]
        if not servers:
            raise SparkConfigError("servers: no NATS server given")
        return cls(
            tuple(servers), dict(options), tls_ca, tls_cert, tls_key, api_prefix, domain, timeout
        )

    def __repr__(self) -> str:
        # never show credentials
        return f"ConnectSpec(servers={list(self.servers)!r})"

    async def connect(self, **overrides: Any) -> Client:
        """Connect; an unreachable server is a ``SparkConfigError`` naming the servers.
        ``overrides``: connect options the caller sets over the spec's own."""
        from jetstream import connect, make_ssl_context

        kw: dict[str, Any] = {"max_reconnect_attempts": 10, **self.options, **overrides}
        if self.tls_ca or self.tls_cert:
            kw["tls"] = make_ssl_context(
                ca_file=self.tls_ca, cert_file=self.tls_cert, key_file=self.tls_key
            )
        try:
            return await connect(list(self.servers), **kw)
        except NatsError as exc:
            raise SparkConfigError(
                f"servers={','.join(self.servers)!r}: cannot connect to NATS at "
                f"{', '.join(self.servers)}: {exc}"
            ) from exc

    def jetstream(self, nc: Client, **kw: Any) -> Any:
        return nc.jetstream(
            domain=self.domain, api_prefix=self.api_prefix, timeout=self.timeout, **kw
        )


def did_you_mean(name: str, known: Collection[str]) -> str:
    """`` (did you mean <the closest of known>?)`` for an unknown ``name``, or ``""``
    when none is close."""
    close = difflib.get_close_matches(name, sorted(known), n=1)
    return f" (did you mean {close[0]}?)" if close else ""


def _connect_arguments() -> frozenset[str]:
    """The keyword arguments of ``jetstream.connect`` and of ``ConnectSpec.make``."""
    from jetstream import connect

    names = set(inspect.signature(connect).parameters) - {"servers"}
    names |= set(inspect.signature(ConnectSpec.make).parameters) - {"servers", "options"}
    return frozenset(names - {"own_arguments"})


def argument_names(fn: Callable[..., Any]) -> tuple[str, ...]:
    """The names of ``fn``'s own arguments (not its ``*args`` nor ``**kwargs``): what a
    function passing its leftover keyword arguments to ``ConnectSpec.make`` gives as
    ``own_arguments``."""
    variadic = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    return tuple(
        p.name for p in inspect.signature(fn).parameters.values() if p.kind not in variadic
    )


def _check_connect_options(options: Mapping[str, Any], own: Collection[str]) -> None:
    """Refuse a connect option that is no argument at all (unknown: named with the closest
    known one), then one that cannot cross a pickle to the executors."""
    if set(options) <= _PICKLABLE:
        return
    connect_args = _connect_arguments()
    unknown = sorted(set(options) - connect_args)
    if unknown:
        known = connect_args | set(own)
        raise SparkConfigError(
            "; ".join(
                f"unknown argument {n!r}"
                + (
                    did_you_mean(n, known)
                    or " (neither an argument here nor an option of jetstream.connect)"
                )
                for n in unknown
            )
        )
    raise SparkConfigError(
        f"connect options {sorted(set(options) - _PICKLABLE)} cannot be given here: Spark "
        f"ships the connect options to its executors, and callbacks, SSL contexts and "
        f"tracers cannot be pickled (TLS is given as files: tls_ca, tls_cert, tls_key); "
        f"those that can: {sorted(_PICKLABLE)}"
    )


def lower_keys(options: Mapping[str, str]) -> dict[str, str]:
    """The options with lowercase names (Spark lowercases them in some paths, not all)."""
    return {k.lower(): v for k, v in options.items()}


def number_option(o: Mapping[str, str], key: str, low: int) -> int | None:
    """A whole-number option of at least ``low``, or None when not given."""
    raw = o.get(key)
    if raw is None or raw == "":
        return None
    try:
        value = int(raw)
    except ValueError:
        raise SparkConfigError(f"option {key}={raw!r} is not a whole number") from None
    if value < low:
        raise SparkConfigError(f"option {key} must be at least {low}, not {value}")
    return value


def _seconds_option(o: Mapping[str, str], key: str, default: float) -> float:
    raw = o.get(key)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise SparkConfigError(f"option {key}={raw!r} is not a number of seconds") from None
    if value <= 0:
        raise SparkConfigError(f"option {key} must be above 0, not {value:g}")
    return value


def connect_spec_from_options(o: Mapping[str, str], what: str) -> ConnectSpec:
    """The ``ConnectSpec`` of a data source's string options (already lowercased):
    ``servers`` and ``CONNECT_OPTIONS``. ``what`` names the source or writer in errors."""
    servers = o.get("servers")
    if not servers:
        raise SparkConfigError(f"the jetstream {what} needs option servers=")
    kw: dict[str, Any] = {
        k: o[k] for k in ("user", "password", "token", "creds", "name") if o.get(k)
    }
    if o.get("connect_timeout"):
        kw["connect_timeout"] = _seconds_option(o, "connect_timeout", 2.0)
    return ConnectSpec.make(
        servers,
        tls_ca=o.get("tls_ca") or None,
        tls_cert=o.get("tls_cert") or None,
        tls_key=o.get("tls_key") or None,
        api_prefix=o.get("api_prefix") or None,
        domain=o.get("domain") or None,
        timeout=_seconds_option(o, "timeout", 10.0),
        **kw,
    )


_LOCAL = re.compile(r"local(?:\[(\*|\d+)(?:,\s*\d+)?\])?")
_LOCAL_CLUSTER = re.compile(r"local-cluster\[(\d+),\s*(\d+),\s*\d+\]")


def task_slots(spark: Any) -> int | None:
    """How many tasks the session's executors run at once, from its settings (read the
    same way in a classic and a Spark Connect session): ``spark.default.parallelism``;
    else the cores of a ``local[N]`` master; else ``spark.executor.instances`` times
    ``spark.executor.cores``; else ``spark.cores.max``. None when none of them says
    (a cluster whose executors take what its workers offer)."""

    def conf(key: str) -> str | None:
        try:
            value = spark.conf.get(key, None)
        except Exception:  # a setting Spark refuses to show
            return None
        return str(value) if value else None

    def whole(value: str | None) -> int | None:
        return int(value) if value and value.isdigit() and int(value) > 0 else None

    found = whole(conf("spark.default.parallelism"))
    if found:
        return found
    master = (conf("spark.master") or "").strip()
    local = _LOCAL.fullmatch(master)
    if local is not None:
        cores = local.group(1)
        return (os.cpu_count() or 1) if cores == "*" else int(cores or 1) or 1
    cluster = _LOCAL_CLUSTER.fullmatch(master)
    if cluster is not None:
        return int(cluster.group(1)) * int(cluster.group(2)) or None
    instances = whole(conf("spark.executor.instances"))
    cores = whole(conf("spark.executor.cores"))
    if instances and cores:
        return instances * cores
    return whole(conf("spark.cores.max"))


def is_connect(obj: Any) -> bool:
    """True if ``obj`` (a DataFrame or a SparkSession) belongs to Spark Connect."""
    return type(obj).__module__.startswith("pyspark.sql.connect.")


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion on a new event loop, from synchronous Spark code.

    Spark calls the adapter from threads with no event loop (the driver's foreachBatch
    callback, executor tasks); when the caller's thread already runs one (a notebook),
    the coroutine runs on a fresh thread instead.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        in_loop = False
    else:
        in_loop = True
    if not in_loop:
        # outside the except: an error of coro must not come "while handling" the
        # RuntimeError that said no loop runs here
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


# errors that say nothing about the stream itself, only that the server did not answer
# now: paused, restarting, electing a leader, or out of reach
_TRANSIENT = (
    NatsTimeoutError,
    ConnectionClosedError,
    NoServersError,
    NoRespondersError,
    StaleConnectionError,
    JetStreamNotEnabledError,
    JetStreamUnavailableError,
    StreamOfflineError,
)


def transient(exc: BaseException) -> bool:
    """True for a failure worth waiting through: the server did not answer, or could not
    be reached (``ConnectSpec.connect``'s ``SparkConfigError`` caused by one), as
    opposed to an answer that says no (a missing stream, refused credentials)."""
    if isinstance(exc, SparkReadTimeoutError):
        return False
    if isinstance(exc, SparkConfigError):
        return isinstance(exc.__cause__, _TRANSIENT)
    return isinstance(exc, _TRANSIENT)


async def patiently(what: str, timeout: float, attempt: Callable[[], Awaitable[T]]) -> T:
    """``await attempt()`` until it succeeds, waiting through ``transient`` failures
    with backoff for up to ``timeout`` seconds; then ``SparkReadTimeoutError`` saying
    ``what`` was being done and the last failure. Any other error is raised at once."""
    backoff = Backoff.within(timeout, cap=2.0)
    while True:
        try:
            return await attempt()
        except Exception as exc:
            if not transient(exc):
                raise
            pause = backoff.next_pause()
            if pause is None:
                raise SparkReadTimeoutError(
                    f"{what}: no answer from NATS within {timeout:g}s (option "
                    f"read_timeout); last failure: {exc or type(exc).__name__}"
                ) from exc
            if backoff.failed == 1:
                log.warning(
                    "%s: %s; waiting up to %.0fs", what, exc or type(exc).__name__, backoff.left()
                )
            await asyncio.sleep(pause)
