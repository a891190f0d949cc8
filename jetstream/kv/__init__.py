"""KeyValue buckets on JetStream, in the layout every NATS client shares (ADR-8).

kv = await js.create_key_value(bucket="cfg", history=5)
rev = await kv.put("a.b", b"1")
entry = await kv.get("a.b")
async with kv.watch("a.>") as w:
    async for entry in w:          # None once: every current value was delivered
        ...

Its names are imported from their modules on first use: ``JetStream`` mixes in the
manager alone, and a program that opens no bucket loads nothing more of the package.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (mypy knows the name)
if TYPE_CHECKING:
    from typing import Any

    from .bucket import KeyValue
    from .config import KeyValueConfig, KeyValueStatus
    from .entry import (
        KeyValueEntry,
        KeyValueOp,
        validate_bucket,
        validate_key,
        validate_key_filter,
    )
    from .manager import KeyValueManager
    from .watcher import KeyWatcher

#: where each name lives: ``js.key_value()`` needs the bucket, a connection that makes no
#: bucket needs none of this package but the manager mixed into ``JetStream``
_FROM = {
    ".bucket": ("KeyValue",),
    ".config": ("KeyValueConfig", "KeyValueStatus"),
    ".entry": (
        "KeyValueEntry",
        "KeyValueOp",
        "validate_bucket",
        "validate_key",
        "validate_key_filter",
    ),
    ".manager": ("KeyValueManager",),
    ".watcher": ("KeyWatcher",),
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
    "KeyValue",
    "KeyValueConfig",
    "KeyValueEntry",
    "KeyValueManager",
    "KeyValueOp",
    "KeyValueStatus",
    "KeyWatcher",
    "validate_bucket",
    "validate_key",
    "validate_key_filter",
]
