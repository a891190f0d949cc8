"""The options of the ``jetstream`` source (``ReadOptions``) and the stream they name,
opened on a connection of its own: what the driver's planning and the executors' range
readers share."""

from __future__ import annotations

import contextlib
import datetime as _dt
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import StreamNotFoundError
from ._common import (
    READ_TIMEOUT,
    ConnectSpec,
    SparkConfigError,
    connect_spec_from_options,
    lower_keys,
    number_option,
)
from ._options import READ_OPTIONS, check_options
from ._plan import Limits, duration_option

if TYPE_CHECKING:
    from jetstream.stream import Stream

__all__ = ["ReadOptions", "missing_stream", "open_stream"]


@dataclass(frozen=True)
class ReadOptions:
    """The source's options, parsed and checked (see ``_source``'s docstring)."""

    conn: ConnectSpec
    stream: str
    subjects: tuple[str, ...]
    start_seq: int | None
    start_time: _dt.datetime | None
    end_seq: int | None
    limits: Limits
    partitions: int
    #: seconds a read or a planning waits through a server that does not answer
    read_timeout: float = READ_TIMEOUT
    #: the ``headers`` column as ``map<string, array<string>>`` (every value of a header,
    #: option ``headers_format=array``), not ``map<string, string>`` with several values
    #: joined by ", " (``joined``, the default)
    header_arrays: bool = False

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> ReadOptions:
        """The checked options; an unknown one (or one missing, or a bad value) is a
        ``SparkConfigError`` naming it."""
        o = lower_keys(options)
        check_options(o, READ_OPTIONS, "the jetstream source")
        conn = connect_spec_from_options(o, "source")
        stream = o.get("stream")
        if not stream:
            raise SparkConfigError("the jetstream source needs option stream=")
        start_time = None
        if o.get("start_time"):
            try:
                start_time = _dt.datetime.fromisoformat(o["start_time"])
            except ValueError:
                raise SparkConfigError(
                    f"option start_time={o['start_time']!r} is not an ISO 8601 time"
                ) from None
            if start_time.tzinfo is None:
                start_time = start_time.replace(tzinfo=_dt.UTC)
        subjects = tuple(s.strip() for s in o.get("subjects", "").split(",") if s.strip())
        return cls(
            conn,
            stream,
            subjects,
            number_option(o, "start_seq", 1),
            start_time,
            number_option(o, "end_seq", 0),
            Limits.parse(o),
            number_option(o, "partitions", 1) or 1,
            duration_option(o, "read_timeout", READ_TIMEOUT),
            _headers_format(o.get("headers_format", "joined")),
        )


def _headers_format(value: str) -> bool:
    """True for ``array``, False for ``joined``; anything else is refused."""
    form = value.strip().lower()
    if form not in ("joined", "array"):
        raise SparkConfigError(
            f"option headers_format={value!r}: give 'joined' (map<string,string>, several "
            f"values of a header joined by ', ') or 'array' (map<string,array<string>>, "
            f"every value kept)"
        )
    return form == "array"


def missing_stream(opts: ReadOptions) -> SparkConfigError:
    return SparkConfigError(
        f"stream={opts.stream!r}: stream {opts.stream!r} does not exist on "
        f"{', '.join(opts.conn.servers)}"
    )


@contextlib.asynccontextmanager
async def open_stream(opts: ReadOptions) -> AsyncIterator[Stream]:
    """The stream on a connection of its own (closed on leaving); a missing stream is a
    ``SparkConfigError`` naming it."""
    nc = await opts.conn.connect()
    try:
        try:
            stream = await opts.conn.jetstream(nc).stream(opts.stream)
        except StreamNotFoundError:
            raise missing_stream(opts) from None
        yield stream
    finally:
        await nc.close()
