"""ObjectStore: files of any size in an ``OBJ_<bucket>`` stream, laid out as every NATS
client lays them out (ADR-20).

* An object's content is split into chunks (128 KiB by default), all published on
  ``$O.<bucket>.C.<nuid>``, a subject fresh for every put.
* Its info (``ObjectInfo`` JSON) is one message on ``$O.<bucket>.M.<base64url(name)>``
  published with ``Nats-Rollup: sub``, so only the latest info of a name is kept.
* A put over an existing name writes the new chunks and info first, then purges the
  old chunk subject; a delete writes an info marked ``deleted`` and purges the chunks.

Puts and gets stream: a put keeps at most ``PUT_WINDOW`` bytes of chunks awaiting
their acks, a get asks for a few MiB of chunks at a time (see ``reader.py``).

Through a JetStream domain or API prefix, chunks and infos are still published on the
plain ``$O.<bucket>.`` subjects, as nats.go does (unlike KV writes, ADR-20 gives them
no prefixed form, and the server's domain mappings cover ``$KV.>`` but not ``$O.>``):
a leafnode passes ``$O.>`` between domains, and an account reaching another one's
JetStream through an API prefix imports ``$O.>`` (or ``$O.<bucket>.>``) unprefixed.
Everything else goes through the JetStream API and so through the prefix.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as _dt
import hashlib
import os
import pathlib
from collections import deque
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from ..api import PubAck
from ..errors import (
    MessageNotFoundError,
    NatsError,
    ObjectAlreadyExistsError,
    ObjectLinkError,
    ObjectNotFoundError,
    ObjectStoreError,
)
from ..protocol.headers import NATS_ROLLUP
from ..protocol.subjects import next_nuid
from ._input import ObjectData, _chunks
from .meta import (
    DEFAULT_CHUNK_SIZE,
    ObjectInfo,
    ObjectLink,
    ObjectMeta,
    ObjectMetaOptions,
    ObjectStoreStatus,
    decode_info,
    encode_info,
    format_digest,
    format_time,
    normalize_headers,
    status_from_info,
    validate_bucket,
)
from .reader import ObjectReader
from .watcher import ObjectWatcher

if TYPE_CHECKING:
    from ..js import JetStreamContext
    from ..stream import Stream, StreamMsg

__all__ = ["ObjectStore", "validate_bucket"]

#: Bytes of chunks a put keeps awaiting their acks (bounds its memory).
PUT_WINDOW = 8 * 1024 * 1024

_ROLLUP = {NATS_ROLLUP: "sub"}


def _check_name(name: str) -> None:
    if not isinstance(name, str) or not name:
        raise ValueError("an object name is required")


def encode_name(name: str) -> str:
    """The subject token of an object name: padded base64url of its UTF-8."""
    return base64.urlsafe_b64encode(name.encode()).decode()


class ObjectStore:
    """One object store bucket. Get it from ``js.create_object_store(...)`` or
    ``js.object_store(bucket)``."""

    def __init__(self, js: JetStreamContext, bucket: str, stream: Stream | None = None) -> None:
        self._js = js
        self.bucket = bucket
        self.stream_name = f"OBJ_{bucket}"
        self._stream = stream
        self._meta_prefix = f"$O.{bucket}.M."
        self._chunk_prefix = f"$O.{bucket}.C."

    def __repr__(self) -> str:
        return f"<ObjectStore {self.bucket!r}>"

    @property
    def name(self) -> str:
        """The bucket name."""
        return self.bucket

    @property
    def js(self) -> JetStreamContext:
        return self._js

    # -- subjects and lookups -------------------------------------------------------------

    def _chunk_subject(self, nuid: str) -> str:
        return self._chunk_prefix + nuid

    def _meta_subject(self, name: str) -> str:
        return self._meta_prefix + encode_name(name)

    async def _get_stream(self) -> Stream:
        if self._stream is None:
            self._stream = await self._js.stream(self.stream_name)
        return self._stream

    async def _last_meta(self, name: str) -> StreamMsg | None:
        stream = await self._get_stream()
        try:
            return await stream.get_msg(last_by_subject=self._meta_subject(name))
        except MessageNotFoundError:
            return None

    async def info(self, name: str, *, show_deleted: bool = False) -> ObjectInfo:
        """The info of an object (its ``mtime`` is when the info was stored).

        Raises:
            ObjectNotFoundError: no such object, or it is deleted and ``show_deleted``
                is false.
        """
        _check_name(name)
        msg = await self._last_meta(name)
        if msg is None:
            raise ObjectNotFoundError(f"no object {name!r} in bucket {self.bucket!r}")
        try:
            info = decode_info(msg.data)
        except msgspec.DecodeError as exc:
            raise ObjectStoreError(
                f"the info of object {name!r} in bucket {self.bucket!r} is not valid: {exc}"
            ) from None
        if info.deleted and not show_deleted:
            raise ObjectNotFoundError(f"object {name!r} in bucket {self.bucket!r} is deleted")
        return msgspec.structs.replace(info, mtime=format_time(msg.time))

    async def _resolve(self, name: str, show_deleted: bool) -> tuple[ObjectStore, ObjectInfo]:
        """The store and info holding the content of ``name``, links followed."""
        store: ObjectStore = self
        info = await self.info(name, show_deleted=show_deleted)
        for _ in range(8):
            link = info.link
            if link is None:
                return store, info
            if not link.name:
                raise ObjectLinkError(
                    f"object {info.name!r} in bucket {store.bucket!r} links to a whole "
                    f"bucket ({link.bucket!r}), not to an object"
                )
            if link.bucket != store.bucket:
                store = ObjectStore(self._js, link.bucket)
            info = await store.info(link.name)
        raise ObjectLinkError(f"object {name!r}: too many links in a row")

    # -- put --------------------------------------------------------------------------------

    async def put(
        self,
        name: str | ObjectMeta,
        data: ObjectData = b"",
        *,
        description: str | None = None,
        headers: Mapping[str, str | Sequence[str]] | None = None,
        metadata: Mapping[str, str] | None = None,
        chunk_size: int | None = None,
        timeout: float | None = None,
    ) -> ObjectInfo:
        """Store an object, replacing any object of that name; returns its info.

        ``data`` is bytes, a binary file object (anything with ``read(n)``, sync or
        async), a path (``os.PathLike``; a plain ``str`` is refused as ambiguous, see
        ``put_file``), or an iterable / async iterable of bytes. It is read and sent
        one chunk at a time, with at most ``PUT_WINDOW`` bytes awaiting acks, so memory
        stays at a few chunks whatever the size. When the put fails part-way its
        chunks are purged and the previous object (if any) is left as it was.

        Args:
            name: the object's name, or an ``ObjectMeta`` (then ``description``,
                ``headers`` and ``metadata`` come from it unless given here).
            chunk_size: bytes per chunk (default 128 KiB, or the meta's options).
            timeout: seconds to wait for each ack (default: the context's).

        Raises:
            ValueError: no name, or a non-positive chunk size (nothing is sent).
            ObjectLinkError: the meta's options hold a link (nothing is sent).
            JetStreamApiError: the server refused a chunk or the info (for example a
                sealed bucket, or one that is full).
        """
        meta = name if isinstance(name, ObjectMeta) else ObjectMeta(name=name)
        _check_name(meta.name)
        if meta.options is not None and meta.options.link is not None:
            raise ObjectLinkError("put stores content; make links with add_link")
        size_opt = meta.options.max_chunk_size if meta.options is not None else 0
        cs = chunk_size or size_opt or DEFAULT_CHUNK_SIZE
        if cs <= 0:
            raise ValueError(f"chunk_size must be positive, not {cs}")
        try:
            old: ObjectInfo | None = await self.info(meta.name, show_deleted=True)
        except ObjectNotFoundError:
            old = None
        except ObjectStoreError:
            old = None  # unreadable info: replace it
        nuid = next_nuid()
        subject = self._chunk_subject(nuid)
        js = self._js
        h = hashlib.sha256()
        size = 0
        chunks = 0
        window: deque[asyncio.Future[PubAck]] = deque()
        max_window = max(2, PUT_WINDOW // cs)
        try:
            async for chunk in _chunks(data, cs):
                h.update(chunk)
                size += len(chunk)
                chunks += 1
                window.append(await js.publish_async(subject, chunk, timeout=timeout))
                while window and (len(window) >= max_window or window[0].done()):
                    await window.popleft()
            while window:
                await window.popleft()
            info = ObjectInfo(
                name=meta.name,
                description=(description if description is not None else meta.description) or None,
                headers=normalize_headers(headers) if headers is not None else meta.headers,
                metadata=dict(metadata) if metadata is not None else meta.metadata,
                options=ObjectMetaOptions(max_chunk_size=cs),
                bucket=self.bucket,
                nuid=nuid,
                size=size,
                chunks=chunks,
                digest=format_digest(h.digest()),
                mtime=format_time(_dt.datetime.now(_dt.UTC)),
            )
            await self._publish_info(info, timeout)
        except asyncio.CancelledError:
            if chunks:  # no awaiting in a cancelled task: clean up in the background
                self._js.client.spawn(self._abandon(subject, list(window)))
            raise
        except BaseException:
            if chunks:
                await self._abandon(subject, list(window))
            raise
        if old is not None and old.nuid and old.nuid != nuid and old.chunks:
            await self._purge_quietly(self._chunk_subject(old.nuid))
        return info

    async def _publish_info(self, info: ObjectInfo, timeout: float | None = None) -> PubAck:
        return await self._js.publish(
            self._meta_subject(info.name), encode_info(info), headers=_ROLLUP, timeout=timeout
        )

    async def _abandon(self, subject: str, window: list[asyncio.Future[PubAck]]) -> None:
        """Purge the chunks of a failed put, once the chunks still in flight have landed
        (a purge before them would leave them behind)."""
        pending = [f for f in window if not f.done()]
        if pending:
            await asyncio.wait(pending, timeout=self._js.timeout)
        for fut in window:
            if fut.done() and not fut.cancelled():
                fut.exception()  # retrieved: no "never retrieved" report
        await self._purge_quietly(subject)

    async def _purge_quietly(self, subject: str) -> None:
        try:
            stream = await self._get_stream()
            await stream.purge(filter=subject)
        except NatsError:
            pass

    async def put_bytes(self, name: str, data: bytes, **kw: Any) -> ObjectInfo:
        """``put`` of a bytes value (the other clients' name for it)."""
        return await self.put(name, data, **kw)

    async def put_file(self, name: str, path: str | os.PathLike[str], **kw: Any) -> ObjectInfo:
        """``put`` of a file's content, read in chunks."""
        return await self.put(name, pathlib.Path(path), **kw)

    # -- get --------------------------------------------------------------------------------

    def get(self, name: str, *, show_deleted: bool = False) -> ObjectReader:
        """A streaming reader of the object (links followed): ``async with store.get(n) as r``.

        The size and SHA-256 are checked once the last chunk is read
        (``DigestMismatchError``); see ``ObjectReader``.
        """
        _check_name(name)
        return ObjectReader(self, name, show_deleted=show_deleted)

    async def get_bytes(self, name: str) -> bytes:
        """The whole content of an object (links followed), checked against its digest.

        Raises:
            ObjectNotFoundError: no such object.
            DigestMismatchError: the content does not match its info.
        """
        async with self.get(name) as reader:
            return await reader.read_all()

    async def get_file(self, name: str, path: str | os.PathLike[str]) -> ObjectInfo:
        """Write an object's content to ``path`` chunk by chunk; returns its info.

        On a digest mismatch the partial file is removed and the error raised.
        """
        async with self.get(name) as reader:
            try:
                # Local file I/O stays on the loop: a chunk write is short, and a
                # thread hop per chunk would cost more than it saves.
                with open(path, "wb") as f:  # noqa: ASYNC230
                    async for chunk in reader:
                        f.write(chunk)
            except BaseException:
                try:
                    os.unlink(path)
                except OSError:
                    pass
                raise
            return reader.info

    # -- meta, delete, links ----------------------------------------------------------------

    async def update_meta(
        self,
        name: str,
        meta: ObjectMeta | None = None,
        *,
        new_name: str | None = None,
        description: str | None = None,
        headers: Mapping[str, str | Sequence[str]] | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> ObjectInfo:
        """Change an object's name, description, headers or metadata (not its content).

        Given an ``ObjectMeta`` all four are replaced by it (as the other clients do);
        with keywords only those given change. A rename moves the info to the new
        name's subject and removes the old one; the chunks stay where they are.

        Raises:
            ObjectNotFoundError: no such object (or it is deleted).
            ObjectAlreadyExistsError: the new name is taken by an object.
        """
        info = await self.info(name)
        if meta is not None:
            target = meta.name or name
            info = msgspec.structs.replace(
                info,
                name=target,
                description=meta.description or None,
                headers=meta.headers,
                metadata=meta.metadata,
            )
        else:
            target = new_name or name
            changes: dict[str, Any] = {"name": target}
            if description is not None:
                changes["description"] = description
            if headers is not None:
                changes["headers"] = normalize_headers(headers)
            if metadata is not None:
                changes["metadata"] = dict(metadata)
            info = msgspec.structs.replace(info, **changes)
        _check_name(target)
        if target != name:
            try:
                await self.info(target)
            except ObjectNotFoundError:
                pass
            else:
                raise ObjectAlreadyExistsError(
                    f"cannot rename {name!r} to {target!r} in bucket {self.bucket!r}: "
                    "an object of that name exists"
                )
        info = msgspec.structs.replace(info, mtime=format_time(_dt.datetime.now(_dt.UTC)))
        await self._publish_info(info)
        if target != name:
            stream = await self._get_stream()
            await stream.purge(filter=self._meta_subject(name))
        return info

    async def delete(self, name: str) -> ObjectInfo:
        """Delete an object: purge its chunks and leave an info marked ``deleted``.

        Raises:
            ObjectNotFoundError: no such object.
        """
        info = await self.info(name, show_deleted=True)
        if not info.nuid:
            raise ObjectStoreError(f"object {name!r} in bucket {self.bucket!r} has no nuid")
        marker = msgspec.structs.replace(
            info,
            deleted=True,
            size=0,
            chunks=0,
            digest=None,
            mtime=format_time(_dt.datetime.now(_dt.UTC)),
        )
        await self._publish_info(marker)
        stream = await self._get_stream()
        await stream.purge(filter=self._chunk_subject(info.nuid))
        return marker

    async def _link(self, name: str, link: ObjectLink) -> ObjectInfo:
        _check_name(name)
        try:
            existing = await self.info(name)
        except ObjectNotFoundError:
            pass
        else:
            if not existing.is_link:
                raise ObjectAlreadyExistsError(
                    f"cannot link {name!r} in bucket {self.bucket!r}: an object of that name exists"
                )
        info = ObjectInfo(
            name=name,
            bucket=self.bucket,
            nuid=next_nuid(),
            options=ObjectMetaOptions(link=link),
            mtime=format_time(_dt.datetime.now(_dt.UTC)),
        )
        await self._publish_info(info)
        return info

    async def add_link(self, name: str, obj: ObjectInfo) -> ObjectInfo:
        """Make ``name`` a link to the object ``obj`` (in this or another bucket).

        Raises:
            ObjectLinkError: ``obj`` is deleted or is itself a link.
            ObjectAlreadyExistsError: ``name`` is taken by an object (not a link).
        """
        if obj.deleted:
            raise ObjectLinkError(f"cannot link to the deleted object {obj.name!r}")
        if obj.is_link:
            raise ObjectLinkError(f"cannot link to {obj.name!r}: it is a link itself")
        if not obj.bucket or not obj.name:
            raise ObjectLinkError("link target needs a bucket and a name")
        return await self._link(name, ObjectLink(bucket=obj.bucket, name=obj.name))

    async def add_bucket_link(self, name: str, bucket: ObjectStore | str) -> ObjectInfo:
        """Make ``name`` a link to a whole bucket (a directory-like reference)."""
        target = bucket.bucket if isinstance(bucket, ObjectStore) else bucket
        validate_bucket(target)
        return await self._link(name, ObjectLink(bucket=target))

    # -- listing and watching ---------------------------------------------------------------

    def watch(
        self,
        *,
        include_history: bool = False,
        ignore_deletes: bool = False,
        updates_only: bool = False,
    ) -> ObjectWatcher:
        """Infos as they change: ``async with store.watch() as w: async for info in w``.

        First the current info of every object (every stored info with
        ``include_history``), then ``None`` once, then each change as it happens.
        With ``updates_only`` only changes are yielded (and no ``None``).
        """
        return ObjectWatcher(self, include_history, ignore_deletes, updates_only)

    async def list(self, *, show_deleted: bool = False) -> list[ObjectInfo]:
        """The info of every object in the bucket (deleted ones with ``show_deleted``)."""
        out: list[ObjectInfo] = []
        async with self.watch(ignore_deletes=not show_deleted) as w:
            async for info in w:
                if info is None:
                    break
                out.append(info)
        return out

    # -- the bucket -------------------------------------------------------------------------

    async def status(self) -> ObjectStoreStatus:
        """The bucket's config and usage (from a fresh stream info)."""
        stream = await self._get_stream()
        return status_from_info(self.bucket, await stream.info())

    async def seal(self) -> ObjectStoreStatus:
        """Seal the bucket: no more puts, deletes or purges, ever."""
        stream = await self._get_stream()
        info = await stream.info()
        cfg = msgspec.structs.replace(info.config, sealed=True)
        self._stream = await self._js.update_stream(cfg)
        return status_from_info(self.bucket, self._stream.cached_info)

    async def destroy(self) -> bool:
        """Delete the bucket and every object in it."""
        return await self._js.delete_stream(self.stream_name)
