"""Bucket management, mixed into ``JetStream``: create, look up, update, list, delete."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from ..errors import (
    BadBucketError,
    BucketExistsError,
    BucketNotFoundError,
    StreamNameInUseError,
    StreamNotFoundError,
)
from .config import STREAM_PREFIX, SUBJECT_PREFIX
from .entry import validate_bucket

if TYPE_CHECKING:
    from ..api import StreamConfig, StreamInfo
    from ..core.client import Client
    from ..stream import Stream
    from .bucket import KeyValue
    from .config import KeyValueConfig, KeyValueStatus

__all__ = ["KeyValueManager"]


def _config(config: KeyValueConfig | None, options: dict[str, Any]) -> KeyValueConfig:
    from .config import KeyValueConfig

    if isinstance(config, str):
        raise TypeError(f"the bucket name is a keyword: bucket={config!r}")
    if config is not None:
        if options:
            raise TypeError("give a KeyValueConfig or keywords, not both")
        return config
    return KeyValueConfig(**options)


def _bucket_not_found(bucket: str, exc: StreamNotFoundError) -> BucketNotFoundError:
    return BucketNotFoundError(
        exc.code, exc.err_code, f"no bucket {bucket!r}: {exc.description}", request=exc.request
    )


class KeyValueManager:
    """Mixed into ``JetStream``: the KeyValue bucket helpers."""

    if TYPE_CHECKING:

        @property
        def client(self) -> Client: ...

        async def stream(self, name: str) -> Stream: ...

        async def create_stream(self, config: StreamConfig) -> Stream: ...

        async def update_stream(self, config: StreamConfig) -> Stream: ...

        async def delete_stream(self, name: str) -> bool: ...

        def streams(self, *, subject: str | None = None) -> AsyncIterator[StreamInfo]: ...

        def stream_names(self, *, subject: str | None = None) -> AsyncIterator[str]: ...

    def _kv(self, stream: Stream) -> KeyValue:
        # The bucket's modules come with the first bucket (this mixin is in every JetStream).
        from .bucket import KeyValue

        return KeyValue(self, stream)  # type: ignore[arg-type]

    async def create_key_value(
        self, config: KeyValueConfig | None = None, /, **options: Any
    ) -> KeyValue:
        """Create a bucket: ``await js.create_key_value(bucket="cfg", history=5)`` (or pass
        a ``KeyValueConfig``). Creating a bucket that exists with the same config
        returns it.

        Raises:
            BadNameError: the bucket name is invalid (nothing is sent).
            ValueError: history not in 1..64 (nothing is sent).
            BucketExistsError: it exists with another config.
        """
        cfg = _config(config, options)
        scfg = cfg.to_stream_config()
        try:
            stream = await self.create_stream(scfg)
        except StreamNameInUseError as exc:
            raise BucketExistsError(
                exc.code,
                exc.err_code,
                f"bucket {cfg.bucket!r} exists with another config: {exc.description}",
                request=exc.request,
            ) from None
        return self._kv(stream)

    async def update_key_value(
        self, config: KeyValueConfig | None = None, /, **options: Any
    ) -> KeyValue:
        """Change a bucket's config (history, ttl, limits, ...).

        Raises:
            BucketNotFoundError: there is no such bucket.
        """
        cfg = _config(config, options)
        try:
            stream = await self.update_stream(cfg.to_stream_config())
        except StreamNotFoundError as exc:
            raise _bucket_not_found(cfg.bucket, exc) from None
        return self._kv(stream)

    async def create_or_update_key_value(
        self, config: KeyValueConfig | None = None, /, **options: Any
    ) -> KeyValue:
        """Update the bucket when it exists, create it otherwise."""
        cfg = _config(config, options)
        try:
            return await self.update_key_value(cfg)
        except BucketNotFoundError:
            return await self.create_key_value(cfg)

    async def key_value(self, bucket: str) -> KeyValue:
        """The handle of an existing bucket.

        Raises:
            BadNameError: the bucket name is invalid (nothing is sent).
            BucketNotFoundError: there is no such bucket.
            BadBucketError: ``KV_<bucket>`` exists but is not a KeyValue stream.
        """
        validate_bucket(bucket)
        try:
            stream = await self.stream(STREAM_PREFIX + bucket)
        except StreamNotFoundError as exc:
            raise _bucket_not_found(bucket, exc) from None
        cfg = stream.cached_info.config
        if not cfg.max_msgs_per_subject or cfg.max_msgs_per_subject < 1:
            raise BadBucketError(f"stream {cfg.name!r} is not a KeyValue bucket (no history)")
        return self._kv(stream)

    async def delete_key_value(self, bucket: str) -> bool:
        """Delete a bucket and everything in it.

        Raises:
            BucketNotFoundError: there is no such bucket.
        """
        validate_bucket(bucket)
        try:
            return await self.delete_stream(STREAM_PREFIX + bucket)
        except StreamNotFoundError as exc:
            raise _bucket_not_found(bucket, exc) from None

    async def key_value_store_names(self) -> AsyncIterator[str]:
        """The names of every bucket (those with ``$KV.<bucket>.>`` subjects)."""
        async for name in self.stream_names(subject=f"{SUBJECT_PREFIX}*.>"):
            if name.startswith(STREAM_PREFIX):
                yield name[len(STREAM_PREFIX) :]

    async def key_values(self) -> AsyncIterator[KeyValueStatus]:
        """The status of every bucket."""
        from .config import KeyValueStatus

        async for info in self.streams(subject=f"{SUBJECT_PREFIX}*.>"):
            name = info.config.name
            if name.startswith(STREAM_PREFIX):
                yield KeyValueStatus(name[len(STREAM_PREFIX) :], info)
