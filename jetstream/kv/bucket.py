"""The KeyValue bucket: a ``KV_<bucket>`` stream read and written with the KV layout.

The layout is the one every NATS client uses (ADR-8), so a bucket is shared
between them:

- the stream ``KV_<bucket>`` holds the subjects ``$KV.<bucket>.>``, keeps
  ``history`` messages per subject, denies message deletes, allows rollups
  and direct gets, and discards new messages when full;
- a put publishes the value to ``$KV.<bucket>.<key>``; its stream sequence is
  the revision;
- a delete publishes an empty message with ``KV-Operation: DEL``, a purge one
  with ``KV-Operation: PURGE`` and ``Nats-Rollup: sub`` (which removes the older
  revisions of that key);
- a read is a (direct) get of the last message on the key's subject.

A mirrored bucket reads from its own stream but keeps the origin's subjects, so
its keys are read under ``$KV.<origin>.`` and its writes go to the origin.

Through a JetStream domain or API prefix (anything but ``$JS.API``), writes go to
``<prefix>.$KV.<bucket>.<key>`` (ADR-19; nats.go does the same): for a domain the
server maps ``$JS.<domain>.API.$KV.>`` back to ``$KV.>``, and it is the only way
across a leafnode, which denies a plain ``$KV.>`` between domains; across accounts
the importing account imports ``$KV.>`` as ``<prefix>.$KV.>``. An account may instead
import ``$KV.>`` as it is (the set-up nats-py expects): with an explicit API prefix, the
first write of a handle probes both routes with a write that cannot be stored and keeps
the one the stream answers. A mirror of a bucket
in another domain or account writes through its ``external.api`` prefix instead.
Reads, watches and listings always use the stream's own ``$KV.<bucket>.`` subjects
(they go through the JetStream API).
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import re
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

from ..api import (
    PubAck,
)
from ..errors import (
    KeyDeletedError,
    KeyExistsError,
    KeyNotFoundError,
    KeyWrongLastSequenceError,
    MessageNotFoundError,
    NoRespondersError,
    WrongLastSequenceError,
)
from ..errors import TimeoutError as NatsTimeoutError
from ..protocol.headers import NATS_ROLLUP
from .config import STREAM_PREFIX, SUBJECT_PREFIX, KeyValueStatus
from .entry import (
    KV_OPERATION,
    KeyValueEntry,
    KeyValueOp,
    operation_of,
    validate_key,
)
from .watcher import KeyWatcher

if TYPE_CHECKING:
    from ..js import JetStreamContext
    from ..stream import Stream, StreamMsg

__all__ = ["KeyValue"]

DEFAULT_API_PREFIX = "$JS.API"
_DEL_HEADERS = {KV_OPERATION: "DEL"}
# an expected last sequence no key reaches: the write is refused, nothing is stored
_IMPOSSIBLE_SEQ = 2**63 - 1
_PURGE_HEADERS = {KV_OPERATION: "PURGE", NATS_ROLLUP: "sub"}
# how a refused write names the subject's latest sequence ("wrong last sequence: 12")
_NAMED_REVISION = re.compile(r"wrong last sequence: (\d+)")


class KeyValue:
    """A handle on one bucket. Make it with ``js.create_key_value`` or ``js.key_value``."""

    def __init__(self, js: JetStreamContext, stream: Stream) -> None:
        cfg = stream.cached_info.config
        self._js = js
        self._stream = stream
        self.stream_name = cfg.name
        self.bucket = cfg.name[len(STREAM_PREFIX) :]
        origin = self.bucket
        api = js.api_prefix
        if cfg.mirror:
            name = cfg.mirror.name
            origin = name[len(STREAM_PREFIX) :] if name.startswith(STREAM_PREFIX) else name
            external = cfg.mirror.external
            if external and external.api:
                api = external.api.rstrip(".")  # the origin's JetStream, not ours
        #: subject prefix the keys are stored under (the origin's for a mirror)
        self._pre = f"{SUBJECT_PREFIX}{origin}."
        #: subject prefix writes go to: through the API prefix when it is not the
        #: default one (see the module docstring)
        self._put_pre = self._pre if api == DEFAULT_API_PREFIX else f"{api}.{self._pre}"
        # an explicit API prefix (not a domain's) may come with either import of $KV.>:
        # the first write finds out which (see _write)
        self._route_known = js.domain is not None or api != js.api_prefix
        self._direct = bool(cfg.allow_direct or cfg.mirror_direct)
        #: watchers read by push unless the bucket is reached through an API prefix or
        #: a domain (see ``KeyWatcher``)
        self._watch_push = js.api_prefix == DEFAULT_API_PREFIX and js.domain is None

    def __repr__(self) -> str:
        return f"<KeyValue {self.bucket!r}>"

    @property
    def js(self) -> JetStreamContext:
        """The JetStream context this bucket uses."""
        return self._js

    @property
    def stream(self) -> Stream:
        """The handle of the backing ``KV_<bucket>`` stream."""
        return self._stream

    # -- reads --------------------------------------------------------------------------

    def _entry(self, msg: StreamMsg) -> KeyValueEntry:
        raw = msg.raw_headers
        op = KeyValueOp.PUT
        if raw is not None and (b"KV-Operation" in raw or b"Nats-Marker-Reason" in raw):
            op = operation_of(msg.headers)
        return KeyValueEntry(
            self.bucket, msg.subject[len(self._pre) :], msg.data, msg.seq, msg.time, 0, op
        )

    async def get(self, key: str, *, revision: int | None = None) -> KeyValueEntry:
        """The latest revision of ``key``, or the revision ``revision`` of it.

        Reads with a direct get when the bucket allows it (the default for buckets
        made by any NATS client), so any replica can answer without JSON.

        Raises:
            BadNameError: the key is invalid (nothing is sent).
            KeyDeletedError: that revision is a delete or purge (a ``KeyNotFoundError``;
                ``exc.entry`` is the revision).
            KeyNotFoundError: no such key, or that revision is of another key.
        """
        validate_key(key)
        subject = self._pre + key
        try:
            if revision is None:
                msg = await self._stream.get_msg(last_by_subject=subject, direct=self._direct)
            else:
                msg = await self._stream.get_msg(revision, direct=self._direct)
        except MessageNotFoundError:
            where = "" if revision is None else f" at revision {revision}"
            raise KeyNotFoundError(f"bucket {self.bucket!r}: no key {key!r}{where}") from None
        if msg.subject != subject:
            raise KeyNotFoundError(
                f"bucket {self.bucket!r}: revision {revision} is not of key {key!r}"
            )
        entry = self._entry(msg)
        if entry.operation is not KeyValueOp.PUT:
            raise KeyDeletedError(
                f"bucket {self.bucket!r}: key {key!r} was "
                f"{'purged' if entry.operation is KeyValueOp.PURGE else 'deleted'} "
                f"at revision {entry.revision}",
                entry,
            )
        return entry

    # -- writes -------------------------------------------------------------------------

    async def put(self, key: str, value: bytes, *, ttl: float | str | None = None) -> int:
        """Store ``value`` as the new revision of ``key``; returns the revision.

        Args:
            ttl: seconds this revision lives (the bucket needs ``allow_msg_ttl`` or
                ``limit_marker_ttl``; server 2.11+).

        Raises:
            BadNameError: the key is invalid (nothing is sent).
            MessageSizeExceedsMaximumError: the value is larger than ``max_value_size``.
        """
        validate_key(key)
        ack = await self._write(key, value, ttl=ttl)
        return ack.seq

    async def put_async(self, key: str, value: bytes) -> asyncio.Future[PubAck]:
        """Store ``value`` as the new revision of ``key`` without waiting for the ack;
        returns the future of its ``PubAck`` (``ack.seq`` is the revision).

        The put goes out through the context's ``publish_async`` window, so many are in
        flight at once (at most ``publish_async_max_pending``: this waits for room when
        the window is full). For bulk writers such as the Spark KeyValue sink. A future
        that fails leaves the put unknown (stored or not); putting the same value again
        is harmless. The order of puts of one key is only kept while none is retried:
        to make sure of a key's last value, put it once, or await its future.

        Raises:
            BadNameError: the key is invalid (nothing is sent).
        """
        validate_key(key)
        return await self._js.publish_async(await self._write_subject(key), value)

    async def delete_async(self, key: str) -> asyncio.Future[PubAck]:
        """Mark ``key`` deleted without waiting for the ack: ``delete`` through the
        ``publish_async`` window, as ``put_async`` puts.

        Raises:
            BadNameError: the key is invalid (nothing is sent).
        """
        validate_key(key)
        subject = await self._write_subject(key)
        return await self._js.publish_async(subject, b"", headers=_DEL_HEADERS)

    async def _write_subject(self, key: str) -> str:
        """The subject a write of ``key`` goes to (the bucket's write route)."""
        if not self._route_known and self._put_pre != self._pre:
            await self._find_route(key)
        return self._put_pre + key

    async def _write(self, key: str, value: bytes, **kw: Any) -> PubAck:
        """Publish a write of ``key`` on the bucket's write route."""
        return await self._js.publish(await self._write_subject(key), value, **kw)

    async def _find_route(self, key: str) -> None:
        """Through an API prefix, writes go to ``<prefix>.$KV.…`` (ADR-19; the account
        imports ``$KV.>`` under the prefix, as nats.go expects), but an account may import
        ``$KV.>`` as it is (as nats-py expects). Before the first write, a probe that
        cannot store anything (an impossible expected last sequence) tries the prefixed
        subject, then the plain one; the one the stream answers is kept."""
        probe_wait = min(self._js.timeout, 1.0)
        for pre in (self._put_pre, self._pre):
            try:
                await self._js.publish(
                    pre + key,
                    b"",
                    expected_last_subject_seq=_IMPOSSIBLE_SEQ,
                    retry_attempts=0,
                    timeout=probe_wait,
                )
            except WrongLastSequenceError:
                self._put_pre = pre  # the stream answered: this route reaches it
                break
            except (NoRespondersError, NatsTimeoutError):
                continue
        # neither answered (a leader election?): keep the standard route and let the
        # write itself retry
        self._route_known = True

    async def update(
        self, key: str, value: bytes, last: int, *, ttl: float | str | None = None
    ) -> int:
        """Store ``value`` only if ``last`` is the key's latest revision (0: the key has
        never been written or was purged away); returns the new revision.

        Raises:
            KeyWrongLastSequenceError: the key's latest revision is another one.
        """
        validate_key(key)
        try:
            ack = await self._write(key, value, expected_last_subject_seq=last, ttl=ttl)
        except WrongLastSequenceError as exc:
            if isinstance(exc, KeyWrongLastSequenceError):
                raise
            raise KeyWrongLastSequenceError(
                exc.code,
                exc.err_code,
                f"bucket {self.bucket!r}: key {key!r} is not at revision {last}: {exc.description}",
                request=exc.request,
            ) from None
        return ack.seq

    async def create(self, key: str, value: bytes, *, ttl: float | str | None = None) -> int:
        """Store ``value`` only if ``key`` holds no value: it was never written, or its
        last operation was a delete or purge. Returns the revision.

        A key with revisions is written on top of its latest one when that is a delete
        or purge. The server's refusal of a first write names that revision, and that
        revision is read by its number: every replica that has it has the same message,
        where a read of the key's latest could come from a replica behind the others
        (ADR-53). If the key changes meanwhile (deleted again, say), the same is done
        with the revision the next refusal names, for the context's timeout.

        Raises:
            KeyExistsError: the key holds a value (a ``KeyWrongLastSequenceError``).
            TimeoutError: the key kept changing, or its latest revision was on no
                replica that answered, for the context's timeout.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._js.timeout
        last = 0
        while True:
            try:
                return await self.update(key, value, last, ttl=ttl)
            except KeyWrongLastSequenceError as exc:
                refused = exc
            last = await self._marker(key, refused)
            if loop.time() >= deadline:
                raise NatsTimeoutError(
                    f"bucket {self.bucket!r}: create of key {key!r} could not tell whether "
                    f"it holds a value within {self._js.timeout:g} s: {refused.description}"
                )

    async def _marker(self, key: str, refused: KeyWrongLastSequenceError) -> int:
        """The revision a ``create`` refused with ``refused`` may write on: the key's
        latest, a delete or purge marker; 0 to be refused again when that revision is
        gone already or not on the replica that answered.

        Raises:
            KeyExistsError: the key's latest revision holds a value.
        """
        named = _NAMED_REVISION.search(refused.description or "")
        try:
            if named is None:  # a server that does not name it: the key's latest
                await self.get(key)
            else:
                await self.get(key, revision=int(named.group(1)))
        except KeyDeletedError as deleted:
            return int(deleted.entry.revision)
        except KeyNotFoundError:
            if named is not None:
                return 0
        raise KeyExistsError(
            refused.code,
            refused.err_code,
            f"bucket {self.bucket!r}: key {key!r} exists",
            request=refused.request,
        ) from None

    async def delete(self, key: str, *, last: int | None = None) -> int:
        """Mark ``key`` deleted (its history is kept); returns the revision of the marker.

        Args:
            last: only if this is the key's latest revision.

        Raises:
            KeyWrongLastSequenceError: ``last`` was given and is not the latest revision.
        """
        return await self._mark(key, _DEL_HEADERS, last, None)

    async def purge(
        self, key: str, *, last: int | None = None, ttl: float | str | None = None
    ) -> int:
        """Remove every revision of ``key``, leaving one purge marker; returns its revision.

        Args:
            last: only if this is the key's latest revision.
            ttl: seconds the marker lives (needs per-key TTLs; server 2.11+).

        Raises:
            KeyWrongLastSequenceError: ``last`` was given and is not the latest revision.
        """
        return await self._mark(key, _PURGE_HEADERS, last, ttl)

    async def _mark(
        self, key: str, headers: dict[str, str], last: int | None, ttl: float | str | None
    ) -> int:
        validate_key(key)
        try:
            ack = await self._write(
                key, b"", headers=headers, expected_last_subject_seq=last, ttl=ttl
            )
        except WrongLastSequenceError as exc:
            if isinstance(exc, KeyWrongLastSequenceError):
                raise
            raise KeyWrongLastSequenceError(
                exc.code,
                exc.err_code,
                f"bucket {self.bucket!r}: key {key!r} is not at revision {last}: {exc.description}",
                request=exc.request,
            ) from None
        return ack.seq

    async def purge_deletes(self, *, older_than: float = 1800.0) -> int:
        """Remove the delete and purge markers (and what is left behind them).

        Markers younger than ``older_than`` seconds are kept (only the revisions before
        them go); ``older_than <= 0`` removes every marker. Returns how many keys were
        cleaned.
        """
        marked: list[KeyValueEntry] = []
        async with self.watch_all(meta_only=True) as w:
            async for entry in w:
                if entry is None:
                    break
                if entry.operation is not KeyValueOp.PUT:
                    marked.append(entry)
        now = _dt.datetime.now(_dt.UTC)
        for entry in marked:
            keep = None
            if older_than > 0 and (now - entry.created).total_seconds() < older_than:
                keep = 1
            await self._stream.purge(filter=self._pre + entry.key, keep=keep)
        return len(marked)

    # -- listing and watching -----------------------------------------------------------

    def watch(
        self,
        keys: str | Sequence[str] = ">",
        *,
        include_history: bool = False,
        ignore_deletes: bool = False,
        meta_only: bool = False,
        updates_only: bool = False,
        resume_from_revision: int | None = None,
    ) -> KeyWatcher:
        """Watch keys matching ``keys`` (``*`` and ``>`` wildcards; several filters go to
        the server as the consumer's ``filter_subjects``). See ``KeyWatcher`` for how it
        tells that the current values have all been delivered.

        Args:
            include_history: deliver every kept revision first, not just the latest.
            ignore_deletes: skip delete and purge revisions.
            meta_only: values are left out (the server sends headers only).
            updates_only: deliver only changes made after the watch starts.
            resume_from_revision: start from this revision (e.g. the last one seen + 1).

        Use it as ``async with kv.watch("a.>") as w: async for entry in w: ...``.
        """
        filters = [keys] if isinstance(keys, str) else list(keys)
        return KeyWatcher(
            self,
            filters,
            include_history=include_history,
            ignore_deletes=ignore_deletes,
            meta_only=meta_only,
            updates_only=updates_only,
            resume_from_revision=resume_from_revision,
        )

    def watch_all(
        self,
        *,
        include_history: bool = False,
        ignore_deletes: bool = False,
        meta_only: bool = False,
        updates_only: bool = False,
        resume_from_revision: int | None = None,
    ) -> KeyWatcher:
        """Watch every key of the bucket (``watch(">")``)."""
        return self.watch(
            ">",
            include_history=include_history,
            ignore_deletes=ignore_deletes,
            meta_only=meta_only,
            updates_only=updates_only,
            resume_from_revision=resume_from_revision,
        )

    async def list_keys(self, *filters: str) -> AsyncIterator[str]:
        """Every key holding a value (optionally matching ``filters``), one at a time.

        The filtering is done by the server; values are not transferred.
        """
        async with self.watch(filters or ">", ignore_deletes=True, meta_only=True) as w:
            async for entry in w:
                if entry is None:
                    return
                yield entry.key

    async def keys(self, *filters: str) -> list[str]:
        """The keys holding a value (optionally matching ``filters``); ``[]`` when none."""
        return [k async for k in self.list_keys(*filters)]

    async def history(self, key: str) -> list[KeyValueEntry]:
        """Every kept revision of ``key``, oldest first (deletes and purges included).

        Raises:
            KeyNotFoundError: the key has no revision at all.
        """
        validate_key(key)
        out: list[KeyValueEntry] = []
        async with self.watch(key, include_history=True) as w:
            async for entry in w:
                if entry is None:
                    break
                out.append(entry)
        if not out:
            raise KeyNotFoundError(f"bucket {self.bucket!r}: no key {key!r}")
        return out

    # -- the bucket ---------------------------------------------------------------------

    async def status(self) -> KeyValueStatus:
        """The bucket's status (a fresh stream info)."""
        return KeyValueStatus(self.bucket, await self._stream.info())

    async def destroy(self) -> bool:
        """Delete the bucket and everything in it."""
        return await self._js.delete_stream(self.stream_name)
