"""The object store: files of any size in a JetStream stream, chunked and digested
(see ``store.py`` for the layout, ``reader.py`` for streaming reads)."""

from ._input import ObjectData
from .manager import ObjectStoreManager, object_store_stream_config
from .meta import (
    DEFAULT_CHUNK_SIZE,
    ObjectInfo,
    ObjectLink,
    ObjectMeta,
    ObjectMetaOptions,
    ObjectStoreConfig,
    ObjectStoreStatus,
)
from .reader import ObjectReader
from .store import ObjectStore
from .watcher import ObjectWatcher

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "ObjectData",
    "ObjectInfo",
    "ObjectLink",
    "ObjectMeta",
    "ObjectMetaOptions",
    "ObjectReader",
    "ObjectStore",
    "ObjectStoreConfig",
    "ObjectStoreManager",
    "ObjectStoreStatus",
    "ObjectWatcher",
    "object_store_stream_config",
]
