"""The object store: files of any size in a JetStream stream, chunked and digested
(see ``store.py`` for the layout, ``reader.py`` for streaming reads).

Its names are imported from their modules on first use, as ``jetstream.kv``'s are.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (mypy knows the name)
if TYPE_CHECKING:
    from typing import Any

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

#: where each name lives (see ``jetstream.kv``: the same first-use imports)
_FROM = {
    "._input": ("ObjectData",),
    ".manager": ("ObjectStoreManager", "object_store_stream_config"),
    ".meta": (
        "DEFAULT_CHUNK_SIZE",
        "ObjectInfo",
        "ObjectLink",
        "ObjectMeta",
        "ObjectMetaOptions",
        "ObjectStoreConfig",
        "ObjectStoreStatus",
    ),
    ".reader": ("ObjectReader",),
    ".store": ("ObjectStore",),
    ".watcher": ("ObjectWatcher",),
}
_MODULE_OF = {name: module for module, names in _FROM.items() for name in names}


def __getattr__(name: str) -> Any:
    """Import a name of the package on first use, then keep it here."""
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


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
