"""Exactly once at any distance in time: a partition's rows published in atomic batches
(ADR-50, a stream with ``allow_atomic``), each closed by a commit marker.

A partition's rows are cut into chunks of ``CHUNK`` rows by their index in the partition
(row ``i`` is in chunk ``i // CHUNK``). A chunk goes out as one atomic batch: its rows,
then a marker on a subject of its own,

    <commit_subject>.<query id>.<batch id>.<partition>.<chunk>

(the tokens of the rows' id prefix: ``<id_prefix>.<batch>`` or ``<job_id>`` where those
name the rows) carrying ``Nats-Expected-Last-Subject-Sequence: 0``. The stream stores
the whole chunk or none of it, and stores it only while its marker subject is empty: a
chunk written again (a retried task, a batch re-run after a restart, on Monday for a job
that failed on Friday) fails that expectation and is counted as already stored. Nothing
depends on the stream's ``duplicate_window``, and the server keeps no message ids: a
marker (about 100 bytes, one a chunk) is an ordinary message of the stream, there as
long as the stream keeps its messages.

A chunk whose publish failed or was not confirmed (a cut connection, a paused server,
a leader election) is sent again as a whole until ``write_timeout``: stored once either
way. A task killed inside a chunk leaves an open batch the server drops (after its
batch timeout, 10 s by default); the chunk is sent again with the rest.

Each task keeps at most ``IN_FLIGHT`` chunks in flight at once (the server allows 50
open batches a stream by default: a batch refused for that is sent again).
"""

from __future__ import annotations

import asyncio
import base64
import re
from collections.abc import Sequence
from typing import Any

import msgspec

from ..bulk import Backoff
from ..errors import (
    ConnectionClosedError,
    JetStreamApiError,
    NatsError,
    NoRespondersError,
    WrongLastSequenceError,
)
from ..errors import TimeoutError as NatsTimeoutError
from ..protocol.headers import NATS_EXPECTED_LAST_SUBJECT_SEQUENCE
from ._common import SparkWriteError

__all__ = ["CHUNK", "IN_FLIGHT", "Committer", "marker_prefix", "marker_tokens", "msg_rows"]

#: rows a chunk (an atomic batch holds at most 1000 messages: the rows and their marker)
CHUNK = 999
#: chunks a task has in flight at once
IN_FLIGHT = 4

_TOKEN = re.compile(r"[A-Za-z0-9_-]+")
_MARKER_HDR = {NATS_EXPECTED_LAST_SUBJECT_SEQUENCE: "0"}
# the server's answers to a batch that may pass when sent again
_BUSY = ("too many", "inflight", "in flight", "incomplete")


def msg_rows(data: bytes) -> int | None:
    """The row count a marker's payload records (None: not a marker)."""
    try:
        rows = msgspec.json.decode(data).get("rows")
    except (msgspec.DecodeError, AttributeError):
        return None
    return rows if isinstance(rows, int) else None


def marker_tokens(name: str) -> str:
    """The subject tokens of a row id prefix (``<query id>:<batch>:<partition>``): each
    ``:``-separated part as it is when it is a plain token, else ``=`` and its base64url."""
    out = []
    for part in name.split(":"):
        if _TOKEN.fullmatch(part):
            out.append(part)
        else:
            out.append("=" + base64.urlsafe_b64encode(part.encode()).decode().rstrip("="))
    return ".".join(out)


def marker_prefix(commit_subject: str, name: str) -> str:
    """``<commit_subject>.<tokens of name>``: the marker subjects of a partition's chunks
    are this and ``.<chunk>``."""
    return f"{commit_subject}.{marker_tokens(name)}"


class Committer:
    """Publishes one task's rows chunk by chunk, each as an atomic batch with its marker;
    counts what was stored and what was found stored."""

    def __init__(self, js: Any, stream: str | None, write_timeout: float) -> None:
        self.js = js
        self.stream = stream
        self.write_timeout = write_timeout
        #: rows confirmed: stored now, or found stored (their chunk's marker was there)
        self.rows = 0
        self.duplicates = 0
        self.first_seq = 0
        self.last_seq = 0
        #: chunks sent again after a failed attempt
        self.retried = 0
        self._key: tuple[str, int] | None = None
        self._rows: list[tuple[str, bytes, Any]] = []
        self._room = asyncio.Semaphore(IN_FLIGHT)
        self._tasks: set[asyncio.Task[None]] = set()
        self._error: BaseException | None = None
        # the stream, to read the markers found there (made at the first)
        self._handle: Any = None

    async def add(
        self,
        prefix: str,
        rows: Sequence[tuple[str, bytes, Any]],
        indexes: Sequence[int] | range,
        prefixes: Sequence[str] | None = None,
    ) -> None:
        """Add rows in order: ``rows[i]`` (subject, data, headers or None) is row
        ``indexes[i]`` of the partition whose markers start with ``prefixes[i]`` (or
        ``prefix`` for all)."""
        key = self._key
        pending = self._rows
        for i, row in enumerate(rows):
            k = (prefixes[i] if prefixes is not None else prefix, indexes[i] // CHUNK)
            if k != key:
                if pending:
                    await self._flush()
                    pending = self._rows
                key = self._key = k
            pending.append(row)

    async def _flush(self) -> None:
        if self._error is not None:
            raise self._error
        assert self._key is not None
        prefix, chunk = self._key
        rows, self._rows = self._rows, []
        await self._room.acquire()
        task = asyncio.ensure_future(self._send(f"{prefix}.{chunk}", rows))
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        self._room.release()
        if not task.cancelled() and task.exception() is not None and self._error is None:
            self._error = task.exception()

    async def finish(self) -> None:
        """Send the last chunk, wait for every chunk; raise the first failure."""
        if self._rows:
            await self._flush()
        while self._tasks:
            await asyncio.wait(set(self._tasks))
        if self._error is not None:
            raise self._error

    async def cancel(self) -> None:
        """Stop what is in flight (the task is failing anyway)."""
        for t in list(self._tasks):
            t.cancel()
        while self._tasks:
            await asyncio.wait(set(self._tasks))

    async def _check_marker(self, marker: str, n: int) -> None:
        """The chunk stored before had as many rows as this one: a batch Spark computed
        otherwise (other rows in its partitions) fails rather than lose rows."""
        if self._handle is None:
            self._handle = await self.js.stream(self.stream or await self.js.find_stream(marker))
        msg = await self._handle.get_last_msg_for(marker)
        had = msg_rows(msg.data)
        if had != n:
            raise SparkWriteError(
                f"chunk {marker!r} was committed with {had} rows and is written again "
                f"with {n}: the batch is not computed as it was (its partitions hold other "
                f"rows), so the rows already stored cannot be told from the new ones"
            )

    async def _send(self, marker: str, rows: list[tuple[str, bytes, Any]]) -> None:
        n = len(rows)
        msgs: list[tuple[str, bytes, Any]] = [
            *rows,
            (marker, msgspec.json.encode({"rows": n}), _MARKER_HDR),
        ]
        backoff = Backoff.within(self.write_timeout)
        while True:
            try:
                ack = await self.js.publish_batch(
                    msgs, timeout=max(min(self.js.timeout, backoff.left()), 0.05)
                )
            except WrongLastSequenceError:
                # the marker is there: this chunk was stored before, whole
                await self._check_marker(marker, n)
                self.rows += n
                self.duplicates += n
                return
            except (NatsTimeoutError, NoRespondersError, ConnectionClosedError) as exc:
                cause: NatsError = exc
            except JetStreamApiError as exc:
                if not any(b in exc.description.lower() for b in _BUSY):
                    raise SparkWriteError(
                        f"the chunk of rows committed by {marker!r} was refused: {exc}"
                    ) from None
                cause = exc
            else:
                if self.stream is not None and ack.stream != self.stream:
                    raise SparkWriteError(
                        f"rows stored in stream {ack.stream!r}, not {self.stream!r}: the "
                        f"subject is bound to another stream"
                    )
                self.rows += n
                last = ack.seq - 1  # the marker is the batch's last message
                first = last - n + 1
                if not self.first_seq or first < self.first_seq:
                    self.first_seq = first
                self.last_seq = max(self.last_seq, last)
                return
            # not confirmed: stored whole or not at all; sent again, the marker tells
            pause = backoff.next_pause()
            if pause is None:
                raise SparkWriteError(
                    f"the chunk of {n} rows committed by {marker!r} was not confirmed by "
                    f"the stream within write_timeout ({self.write_timeout:g}s): {cause}; "
                    f"Spark will retry it"
                )
            self.retried += 1
            await asyncio.sleep(pause)
