"""Object store management, mixed into ``JetStream``: create, open, update, delete, list.

A bucket is the stream ``OBJ_<bucket>`` on ``$O.<bucket>.C.>`` and ``$O.<bucket>.M.>``
with rollup headers and direct get allowed and ``discard: new`` (a full bucket
refuses new objects rather than losing old chunks), as the other clients make it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING

from ..api import DiscardPolicy, Placement, StorageType, StoreCompression, StreamConfig
from ..errors import (
    ObjectStoreExistsError,
    ObjectStoreNotFoundError,
    StreamNameInUseError,
    StreamNotFoundError,
)
from .meta import ObjectStoreConfig, ObjectStoreStatus, status_from_info, validate_bucket

if TYPE_CHECKING:
    from ..api import StreamInfo
    from ..stream import Stream
    from .store import ObjectStore

__all__ = ["ObjectStoreManager", "object_store_stream_config"]


def object_store_stream_config(config: ObjectStoreConfig) -> StreamConfig:
    """The ``OBJ_<bucket>`` stream config of a bucket config."""
    validate_bucket(config.bucket)
    b = config.bucket
    cfg = StreamConfig(
        name=f"OBJ_{b}",
        subjects=[f"$O.{b}.C.>", f"$O.{b}.M.>"],
        storage=config.storage,
        num_replicas=config.replicas,
        discard=DiscardPolicy.NEW,
        allow_rollup_hdrs=True,
        allow_direct=True,
        max_bytes=config.max_bytes if config.max_bytes is not None else -1,
        max_age=config.ttl if config.ttl is not None else 0,
    )
    if config.description:
        cfg.description = config.description
    if config.placement is not None:
        cfg.placement = config.placement
    if config.compression:
        cfg.compression = StoreCompression.S2
    if config.metadata:
        cfg.metadata = dict(config.metadata)
    return cfg


def _not_found(bucket: str, request: str) -> ObjectStoreNotFoundError:
    return ObjectStoreNotFoundError(
        404, 10059, f"no object store bucket {bucket!r}", request=request
    )


def _store(js: object, bucket: str, stream: Stream) -> ObjectStore:
    # The store's modules come with the first bucket (this mixin is in every JetStream).
    from .store import ObjectStore

    return ObjectStore(js, bucket, stream)  # type: ignore[arg-type]


class ObjectStoreManager:
    """Mixed into ``JetStream``: the object store buckets of the account."""

    if TYPE_CHECKING:

        async def create_stream(self, config: StreamConfig) -> Stream: ...

        async def update_stream(self, config: StreamConfig) -> Stream: ...

        async def stream(self, name: str) -> Stream: ...

        async def delete_stream(self, name: str) -> bool: ...

        def stream_names(self, *, subject: str | None = None) -> AsyncIterator[str]: ...

        def streams(self, *, subject: str | None = None) -> AsyncIterator[StreamInfo]: ...

    def _obs_config(
        self,
        config: ObjectStoreConfig | None,
        bucket: str | None,
        description: str | None,
        ttl: float | None,
        max_bytes: int | None,
        storage: StorageType | None,
        replicas: int | None,
        compression: bool | None,
        placement: Placement | None,
        metadata: Mapping[str, str] | None,
    ) -> ObjectStoreConfig:
        if isinstance(config, str):
            raise TypeError(f"the bucket name is a keyword: bucket={config!r}")
        if config is None:
            if bucket is None:
                raise ValueError("give an ObjectStoreConfig or bucket=")
            config = ObjectStoreConfig(bucket=bucket)
        elif bucket is not None and bucket != config.bucket:
            raise ValueError(f"bucket={bucket!r} differs from the config's {config.bucket!r}")
        if description is not None:
            config.description = description
        if ttl is not None:
            config.ttl = ttl
        if max_bytes is not None:
            config.max_bytes = max_bytes
        if storage is not None:
            config.storage = storage
        if replicas is not None:
            config.replicas = replicas
        if compression is not None:
            config.compression = compression
        if placement is not None:
            config.placement = placement
        if metadata is not None:
            config.metadata = dict(metadata)
        validate_bucket(config.bucket)
        return config

    async def create_object_store(
        self,
        config: ObjectStoreConfig | None = None,
        *,
        bucket: str | None = None,
        description: str | None = None,
        ttl: float | None = None,
        max_bytes: int | None = None,
        storage: StorageType | None = None,
        replicas: int | None = None,
        compression: bool | None = None,
        placement: Placement | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> ObjectStore:
        """Create an object store bucket (``js.create_object_store(bucket="files")``).

        Creating a bucket that exists with the same config returns it.

        Args:
            ttl: seconds objects are kept (default: forever).
            max_bytes: size limit of the bucket (default: none).
            compression: store chunks S2-compressed.

        Raises:
            ValueError: an invalid bucket name (nothing is sent).
            ObjectStoreExistsError: the bucket exists with another config.
        """
        cfg = self._obs_config(
            config, bucket, description, ttl, max_bytes, storage, replicas, compression,
            placement, metadata,
        )  # fmt: skip
        try:
            stream = await self.create_stream(object_store_stream_config(cfg))
        except StreamNameInUseError as exc:
            raise ObjectStoreExistsError(
                exc.code,
                exc.err_code,
                f"object store bucket {cfg.bucket!r} exists with another config",
                request=exc.request,
            ) from None
        return _store(self, cfg.bucket, stream)

    async def update_object_store(
        self,
        config: ObjectStoreConfig | None = None,
        *,
        bucket: str | None = None,
        description: str | None = None,
        ttl: float | None = None,
        max_bytes: int | None = None,
        storage: StorageType | None = None,
        replicas: int | None = None,
        compression: bool | None = None,
        placement: Placement | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> ObjectStore:
        """Change an existing bucket's config.

        Raises:
            ObjectStoreNotFoundError: there is no such bucket.
        """
        cfg = self._obs_config(
            config, bucket, description, ttl, max_bytes, storage, replicas, compression,
            placement, metadata,
        )  # fmt: skip
        try:
            stream = await self.update_stream(object_store_stream_config(cfg))
        except StreamNotFoundError as exc:
            raise _not_found(cfg.bucket, exc.request) from None
        return _store(self, cfg.bucket, stream)

    async def create_or_update_object_store(
        self,
        config: ObjectStoreConfig | None = None,
        *,
        bucket: str | None = None,
        description: str | None = None,
        ttl: float | None = None,
        max_bytes: int | None = None,
        storage: StorageType | None = None,
        replicas: int | None = None,
        compression: bool | None = None,
        placement: Placement | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> ObjectStore:
        """Update the bucket when it exists, create it otherwise."""
        cfg = self._obs_config(
            config, bucket, description, ttl, max_bytes, storage, replicas, compression,
            placement, metadata,
        )  # fmt: skip
        try:
            return await self.update_object_store(cfg)
        except ObjectStoreNotFoundError:
            return await self.create_object_store(cfg)

    async def object_store(self, bucket: str) -> ObjectStore:
        """The handle of an existing bucket.

        Raises:
            ObjectStoreNotFoundError: there is no such bucket.
        """
        validate_bucket(bucket)
        try:
            stream = await self.stream(f"OBJ_{bucket}")
        except StreamNotFoundError as exc:
            raise _not_found(bucket, exc.request) from None
        return _store(self, bucket, stream)

    async def delete_object_store(self, bucket: str) -> bool:
        """Delete a bucket and every object in it.

        Raises:
            ObjectStoreNotFoundError: there is no such bucket.
        """
        validate_bucket(bucket)
        try:
            return await self.delete_stream(f"OBJ_{bucket}")
        except StreamNotFoundError as exc:
            raise _not_found(bucket, exc.request) from None

    async def object_store_names(self) -> AsyncIterator[str]:
        """The name of every object store bucket."""
        async for name in self.stream_names(subject="$O.*.M.>"):
            if name.startswith("OBJ_"):
                yield name[4:]

    async def object_stores(self) -> AsyncIterator[ObjectStoreStatus]:
        """The status of every object store bucket."""
        async for info in self.streams(subject="$O.*.M.>"):
            name = info.config.name
            if name.startswith("OBJ_"):
                yield status_from_info(name[4:], info)
