"""Consumer management on a stream (mixed into ``Stream``)."""

from __future__ import annotations

import datetime as _dt
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import msgspec

from .api import (
    ConsumerAction,
    ConsumerConfig,
    ConsumerDeleteResponse,
    ConsumerInfo,
    ConsumerListRequest,
    ConsumerListResponse,
    ConsumerNamesResponse,
    ConsumerPauseRequest,
    ConsumerPauseResponse,
    ConsumerResetRequest,
    ConsumerResetResponse,
    ConsumerUnpinRequest,
    ConsumerUnpinResponse,
    CreateConsumerRequest,
)
from .protocol.subjects import next_nuid

if TYPE_CHECKING:
    from .api import StreamInfo
    from .consumer import Consumer
    from .js import JetStreamContext
    from .ordered import OrderedConsumer

__all__ = ["StreamConsumers"]


class StreamConsumers:
    """Create, update, look up, list, pause and delete the consumers of one stream."""

    _js: JetStreamContext
    name: str
    cached_info: StreamInfo

    async def _upsert(
        self, config: ConsumerConfig, action: ConsumerAction, timeout: float | None = None
    ) -> Consumer:
        from .consumer import Consumer
        from .js import validate_name

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
        from .consumer import Consumer

        return Consumer(self._js, await self.consumer_info(name))

    async def consumer_info(self, name: str) -> ConsumerInfo:
        """A consumer's config and state."""
        from .js import validate_name

        validate_name("consumer", name)
        return await self._js._api(f"CONSUMER.INFO.{self.name}.{name}", None, ConsumerInfo)

    async def delete_consumer(self, name: str) -> bool:
        """Delete a consumer.

        Raises:
            ConsumerNotFoundError: there is no such consumer.
        """
        from .js import validate_name

        validate_name("consumer", name)
        resp = await self._js._api(
            f"CONSUMER.DELETE.{self.name}.{name}", None, ConsumerDeleteResponse
        )
        return resp.success

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
        req = ConsumerPauseRequest(pause_until=until)
        return await self._js._api(f"CONSUMER.PAUSE.{self.name}.{name}", req, ConsumerPauseResponse)

    async def resume_consumer(self, name: str) -> ConsumerPauseResponse:
        """Resume a paused consumer."""
        return await self._js._api(
            f"CONSUMER.PAUSE.{self.name}.{name}", ConsumerPauseRequest(), ConsumerPauseResponse
        )

    async def unpin_consumer(self, name: str, group: str) -> None:
        """Unpin the pinned client of a ``pinned_client`` priority group: the next pull
        of any client in the group gets the pin."""
        await self._js._api(
            f"CONSUMER.UNPIN.{self.name}.{name}",
            ConsumerUnpinRequest(group=group),
            ConsumerUnpinResponse,
        )

    async def reset_consumer(self, name: str, seq: int | None = None) -> ConsumerResetResponse:
        """Reset a consumer to deliver again from stream sequence ``seq`` (server 2.14+);
        without ``seq`` it restarts from its deliver policy."""
        req: Any = ConsumerResetRequest(seq=seq if seq is not None else msgspec.UNSET)
        return await self._js._api(f"CONSUMER.RESET.{self.name}.{name}", req, ConsumerResetResponse)

    async def ordered_consumer(self, **options: Any) -> OrderedConsumer:
        """An ordered consumer: every message of the stream exactly once, in order,
        recreated from the next expected sequence whenever it breaks (see ``ordered.py``)."""
        from .ordered import OrderedConsumer

        return await OrderedConsumer.create(self._js, self.name, handle=self, **options)
