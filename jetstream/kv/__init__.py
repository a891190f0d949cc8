"""KeyValue buckets on JetStream, in the layout every NATS client shares (ADR-8).

kv = await js.create_key_value(bucket="cfg", history=5)
rev = await kv.put("a.b", b"1")
entry = await kv.get("a.b")
async with kv.watch("a.>") as w:
    async for entry in w:          # None once: every current value was delivered
        ...
"""

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
