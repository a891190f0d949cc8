"""Consumer management on a stream (the base of ``Stream``)."""

from __future__ import annotations

import datetime as _dt
from collections.abc import AsyncIterator

import msgspec

from ._context import Context, validate_name
from .api import (
    ConsumerAction,
    ConsumerConfig,
    ConsumerInfo,
    ConsumerListRequest,
    ConsumerListResponse,
    ConsumerNamesResponse,
    ConsumerPauseResponse,
    ConsumerResetResponse,
    CreateConsumerRequest,
    StreamInfo,
)
from .consumer import (
    Consumer,
    consumer_info,
    delete_consumer,
    pause_consumer,
    reset_consumer,
    resume_consumer,
    unpin_consumer,
)
from .protocol.subjects import next_nuid

__all__ = ["StreamConsumers", "stream_consumers"]


class StreamConsumers:
    """Create, update, look up, list, pause and delete the consumers of one stream."""

    def __init__(self, js: Context, info: StreamInfo) -> None:
        self._js = js
        self.name = info.config.name
        self.cached_info = info

    async def _upsert(
        self, config: ConsumerConfig, action: ConsumerAction, timeout: float | None = None
    ) -> Consumer:
        cfg = msgspec.structs.replace(config)
        if cfg.durable_name and cfg.name and cfg.durable_name != cfg.name:
            raise ValueError("durable_name and name differ; give one of them")
        name = cfg.name or cfg.durable_name
        if not name:
            cfg.name = name = next_nuid()  # ephemeral: the client names it
        validate_name("consumer", name)
        req = CreateConsumerRequest(stream_name=self.name, config=cfg, action=action)
        info = await self._js._api(
            f"CONSUMER.CREATE.{self.name}.{name}",
            req,
            ConsumerInfo,
            headers=self._js._level_headers(cfg),
            timeout=timeout,
        )
        return Consumer(self._js, info)

    async def create_consumer(self, config: ConsumerConfig) -> Consumer:
        """Create a consumer (a durable one when ``durable_name`` is set, else ephemeral).

        Raises:
            ConsumerExistsError: one of that name exists with another config.
        """
        return await self._upsert(config, ConsumerAction.CREATE)

    async def update_consumer(self, config: ConsumerConfig) -> Consumer:
        """Change an existing consumer's config.

        Raises:
            ConsumerDoesNotExistError: there is no such consumer.
        """
        return await self._upsert(config, ConsumerAction.UPDATE)

    async def create_or_update_consumer(self, config: ConsumerConfig) -> Consumer:
        """Create the consumer, or update it when it exists."""
        return await self._upsert(config, ConsumerAction.CREATE_OR_UPDATE)

    async def consumer(self, name: str) -> Consumer:
        """The handle of an existing consumer.

        Raises:
            ConsumerNotFoundError: there is no such consumer.
        """
        return Consumer(self._js, await self.consumer_info(name))

    async def consumer_info(self, name: str) -> ConsumerInfo:
        """A consumer's config and state."""
        return await consumer_info(self._js, self.name, name)

    async def delete_consumer(self, name: str) -> bool:
        """Delete a consumer.

        Raises:
            ConsumerNotFoundError: there is no such consumer.
        """
        return await delete_consumer(self._js, self.name, name)

    def consumers(self) -> AsyncIterator[ConsumerInfo]:
        """Every consumer's info (all pages)."""
        return self._js._paged(
            f"CONSUMER.LIST.{self.name}",
            lambda off: ConsumerListRequest(offset=off),
            ConsumerListResponse,
            lambda r: r.consumers,
        )

    def consumer_names(self) -> AsyncIterator[str]:
        """Every consumer's name (all pages)."""
        return self._js._paged(
            f"CONSUMER.NAMES.{self.name}",
            lambda off: ConsumerListRequest(offset=off),
            ConsumerNamesResponse,
            lambda r: r.consumers,
        )

    async def pause_consumer(self, name: str, until: _dt.datetime) -> ConsumerPauseResponse:
        """Pause a consumer until ``until`` (a timezone-aware datetime): nothing is delivered."""
        return await pause_consumer(self._js, self.name, name, until)

    async def resume_consumer(self, name: str) -> ConsumerPauseResponse:
        """Resume a paused consumer."""
        return await resume_consumer(self._js, self.name, name)

    async def unpin_consumer(self, name: str, group: str) -> None:
        """Unpin the pinned client of a ``pinned_client`` priority group: the next pull
        of any client in the group gets the pin."""
        await unpin_consumer(self._js, self.name, name, group)

    async def reset_consumer(self, name: str, seq: int | None = None) -> ConsumerResetResponse:
        """Reset a consumer to deliver again from stream sequence ``seq`` (server 2.14+);
        without ``seq`` it restarts from its deliver policy."""
        return await reset_consumer(self._js, self.name, name, seq)


async def stream_consumers(
    js: Context, name: str, *, timeout: float | None = None
) -> StreamConsumers:
    """The consumer management of the existing stream ``name`` (its info fetched once, as
    ``js.stream(name)`` fetches it).

    Raises:
        StreamNotFoundError: there is no such stream.
    """
    return StreamConsumers(js, await js._stream_info(name, timeout=timeout))
