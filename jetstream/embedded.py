"""``jetstream.embedded``: the name the embedded servers had before ``jetstream.testing``.

Everything is the same object as in ``jetstream.testing`` (``NatsServer``,
``NatsCluster``, ...); new code may import either.
"""

from __future__ import annotations

from .testing import (
    LOOPBACK,
    ClusterOptions,
    EmbeddedServerError,
    NatsCluster,
    NatsServer,
    find_nats_server,
)

__all__ = [
    "LOOPBACK",
    "ClusterOptions",
    "EmbeddedServerError",
    "NatsCluster",
    "NatsServer",
    "find_nats_server",
]
