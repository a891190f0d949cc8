"""What the sink and the writer publish to, and its checks: the ``Target`` that travels to
executors, made from options checked on their own (``new_target``), then checked against
the DataFrame's columns (``check_columns``) and the server's stream (``check_stream``:
it exists, stores the subject, and either deduplicates over a long enough window or, with
``commit_subject``, takes atomic batches and stores their markers) before anything is
sent."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import BadSubjectError, NatsError, StreamNotFoundError
from ..protocol.subjects import validate_subject
from ._common import WRITE_TIMEOUT, ConnectSpec, SparkConfigError

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

__all__ = [
    "Target",
    "check_columns",
    "check_headers_type",
    "check_stream",
    "check_value_type",
    "is_payload_type",
    "new_target",
    "trace_headers",
]


@dataclass(frozen=True)
class Target:
    """What to publish and how: the part of a sink or writer that travels to executors."""

    conn: ConnectSpec
    subject: str | None
    subject_col: str | None
    value_col: str | None
    headers_cols: tuple[str, ...]
    key_col: str | None
    stream: str | None
    max_pending: int
    #: at most this many more attempts for a row whose publish failed (None: as many as
    #: ``write_timeout`` allows)
    retries: int | None
    min_duplicate_window: float
    #: W3C trace context headers (``traceparent``, ``tracestate``) put on every row, so
    #: that a consumer downstream continues the trace (a row's own header column wins)
    trace_headers: tuple[tuple[str, str], ...] = ()
    #: how long a task waits through a server that does not answer (paused, restarting,
    #: electing a leader, out of reach) for its rows to be confirmed, before it fails
    write_timeout: float = WRITE_TIMEOUT
    #: rows committed in atomic batches with markers under this subject (``_commits``),
    #: exactly once whatever time has passed; None: deduplicated by ``Nats-Msg-Id``
    #: within the stream's duplicate window
    commit_subject: str | None = None
    #: a map column whose entries are sent as headers: ``map<string,string>`` or
    #: ``map<string,array<string>>`` (a header with each of its values, as the source's
    #: ``headers_format=array`` gives them)
    headers_col: str | None = None


_TRACEPARENT = re.compile(r"[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")


def trace_headers(traceparent: str | None, tracestate: str | None) -> tuple[tuple[str, str], ...]:
    """The checked trace headers of the ``traceparent``/``tracestate`` options."""
    if traceparent is None:
        if tracestate is not None:
            raise SparkConfigError("tracestate needs traceparent (the context it belongs to)")
        return ()
    tp = traceparent.strip()
    if (
        not _TRACEPARENT.fullmatch(tp)
        or tp.startswith("ff")
        or tp[3:35] == "0" * 32
        or tp[36:52] == "0" * 16
    ):
        raise SparkConfigError(
            f"traceparent={traceparent!r} is not a W3C traceparent "
            "(00-<32 hex trace id>-<16 hex span id>-<2 hex flags>)"
        )
    out = [("traceparent", tp)]
    if tracestate:
        if not tracestate.isprintable():
            raise SparkConfigError(f"tracestate={tracestate!r} cannot be a header value")
        out.append(("tracestate", tracestate))
    return tuple(out)


def new_target(
    conn: ConnectSpec,
    *,
    subject: str | None,
    subject_col: str | None,
    value_col: str | None,
    headers_cols: Sequence[str],
    key_col: str | None,
    stream: str | None,
    max_pending: int,
    retries: int | None,
    min_duplicate_window: float,
    traceparent: str | None = None,
    tracestate: str | None = None,
    write_timeout: float = WRITE_TIMEOUT,
    commit_subject: str | None = None,
    headers_col: str | None = None,
) -> Target:
    """A ``Target`` of options checked on their own (before anything is connected to)."""
    if (subject is None) == (subject_col is None):
        raise SparkConfigError("give exactly one of subject= and subject_col=")
    if subject is None and stream is None:
        raise SparkConfigError(
            f"subject_col={subject_col!r}: give stream= too, so the subjects can be checked"
        )
    if max_pending < 1:
        raise SparkConfigError(f"max_pending must be at least 1, not {max_pending}")
    if retries is not None and retries < 0:
        raise SparkConfigError(f"retries must be at least 0, not {retries}")
    if write_timeout <= 0:
        raise SparkConfigError(f"write_timeout must be above 0, not {write_timeout:g}")
    if commit_subject is not None:
        _check_commit_subject(commit_subject, key_col)
    return Target(
        conn,
        subject,
        subject_col,
        value_col,
        tuple(headers_cols),
        key_col,
        stream,
        max_pending,
        retries,
        min_duplicate_window,
        trace_headers(traceparent, tracestate),
        write_timeout,
        commit_subject,
        headers_col,
    )


def _check_commit_subject(subject: str, key_col: str | None) -> None:
    try:
        validate_subject(subject)
    except BadSubjectError as exc:
        raise SparkConfigError(f"commit_subject={subject!r} is not a subject: {exc}") from None
    if key_col is not None:
        raise SparkConfigError(
            f"key_col={key_col!r} with commit_subject={subject!r}: commit markers name a "
            f"batch's rows by their position; a key column is for the deduplication by "
            f"message id (without commit_subject)"
        )


async def _check_commits(js: Any, name: str, atomic: Any, commit_subject: str) -> None:
    """The stream takes atomic batches and stores the commit markers."""
    if atomic is not True:
        raise SparkConfigError(
            f"commit_subject={commit_subject!r}: stream {name!r} does not take atomic "
            f"batches; set allow_atomic=True on it (nats-server 2.12 or later)"
        )
    probe = f"{commit_subject}.q.0.0.0"
    try:
        owner: str | None = await js.find_stream(probe)
    except NatsError:
        owner = None
    if owner != name:
        raise SparkConfigError(
            f"commit_subject={commit_subject!r}: stream {name!r} does not store "
            f"{commit_subject}.> (the commit markers must land in the stream of the rows)"
            + (f"; {owner!r} does" if owner else "")
        )


def check_columns(target: Target, schema: StructType) -> None:
    """Every column the target names is in ``schema``, and the value column holds
    binary or string."""
    columns = schema.fieldNames()
    wanted = [
        ("subject_col", target.subject_col),
        ("value_col", target.value_col),
        ("key_col", target.key_col),
        ("headers_col", target.headers_col),
        *(("headers_cols", h) for h in target.headers_cols),
    ]
    for what, col in wanted:
        if col is not None and col not in columns:
            hint = " (value_col=None publishes each row as JSON)" if what == "value_col" else ""
            raise SparkConfigError(
                f"{what}={col!r} is not a column of the DataFrame; its columns are "
                f"{list(columns)}{hint}"
            )
    check_value_type(target, schema)
    if target.headers_col is not None:
        check_headers_type(target.headers_col, schema)


def check_headers_type(col: str, schema: StructType) -> None:
    """``col`` is a map of string to string or to array of string."""
    from pyspark.sql.types import ArrayType, MapType, StringType

    kind = schema[col].dataType
    if not (
        isinstance(kind, MapType)
        and isinstance(kind.keyType, StringType)
        and (
            isinstance(kind.valueType, StringType)
            or (
                isinstance(kind.valueType, ArrayType)
                and isinstance(kind.valueType.elementType, StringType)
            )
        )
    ):
        raise SparkConfigError(
            f"headers_col={col!r} is a {kind.simpleString()} column; it must be "
            f"map<string,string> or map<string,array<string>> (the source's headers)"
        )


def is_payload_type(kind: str) -> bool:
    """True for the Spark type names a payload column may have: binary and string (also
    char and varchar)."""
    return kind in ("binary", "string") or kind.startswith(("varchar", "char"))


def check_value_type(target: Target, schema: StructType) -> None:
    col = target.value_col
    if col is None:
        return
    kind = schema[col].dataType.typeName()
    if not is_payload_type(kind):
        raise SparkConfigError(
            f"value_col={col!r} is a {kind} column; the payload must be binary or string "
            f"(cast it, or value_col=None publishes each row as JSON)"
        )


async def check_stream(target: Target) -> str:
    """The stream the rows will land in, checked to exist, to store the subject and to
    deduplicate over a long enough window."""
    nc = await target.conn.connect()
    try:
        js = target.conn.jetstream(nc)
        name = target.stream
        if name is None:
            assert target.subject is not None
            try:
                name = await js.find_stream(target.subject)
            except NatsError as exc:
                raise SparkConfigError(
                    f"subject={target.subject!r}: no stream stores it: {exc}"
                ) from exc
        try:
            info = (await js.stream(name)).cached_info
        except StreamNotFoundError as exc:
            raise SparkConfigError(
                f"stream={name!r}: stream {name!r} does not exist on "
                f"{', '.join(target.conn.servers)}; create it (with a duplicate_window) "
                f"before starting the query"
            ) from exc
        window = info.config.duplicate_window
        if target.commit_subject is not None:
            await _check_commits(js, name, info.config.allow_atomic, target.commit_subject)
        elif not isinstance(window, float) or window < target.min_duplicate_window:
            have = f"{window:g}s" if isinstance(window, float) and window > 0 else "none"
            raise SparkConfigError(
                f"stream={name!r} has too short a duplicate_window ({have}): a batch re-run "
                f"later than that would be stored twice; set it to at least "
                f"{target.min_duplicate_window:g}s (and at most max_age), or lower "
                f"min_duplicate_window"
            )
        if target.subject is not None:
            try:
                owner = await js.find_stream(target.subject)
            except NatsError:
                owner = None
            if owner != name:
                raise SparkConfigError(
                    f"subject={target.subject!r} is not stored by stream {name!r}"
                    + (f" but by {owner!r}" if owner else "")
                )
        return name
    finally:
        await nc.close()
