"""Fixtures of the integration tests: a client of the test's own server and its
JetStream context. A module that needs other connect options defines its own ``nc``;
``js`` then comes from that one."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

import jetstream
from jetstream import Client, JetStream


@pytest_asyncio.fixture
async def nc(nats_url: str) -> AsyncIterator[Client]:
    """A client of the test's own server, closed after the test."""
    async with jetstream.connect(nats_url) as client:
        yield client


@pytest.fixture
def js(nc: Client) -> JetStream:
    """The JetStream context of ``nc``."""
    return nc.jetstream()
