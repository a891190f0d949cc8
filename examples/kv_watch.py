"""KeyValue watch: the current values of some keys first, then every change live.

A watcher delivers the latest value of each matching key, then ``None`` once (it
is up to date: every value as of the watch's start has been delivered), then each
put, delete and purge as it happens. Underneath is an ordered consumer, so a
watcher that loses its connection resumes where it was without losing a change.

Run: ``python examples/kv_watch.py`` (server at ``$NATS_URL``, default
``nats://127.0.0.1:4222``) or ``python examples/kv_watch.py --embedded``.
"""

from __future__ import annotations

import asyncio

import jetstream
from jetstream import KeyValue, KeyValueOp

BUCKET = "example_settings"


async def watch(kv: KeyValue, up_to_date: asyncio.Event, changes: int) -> None:
    """Print what a watcher of ``ui.>`` sees: the current values, then ``changes`` changes."""
    async with kv.watch("ui.>") as watcher:
        async for entry in watcher:
            if entry is None:
                print("-- up to date; now watching for changes --")
                up_to_date.set()
                continue
            if entry.operation is KeyValueOp.PUT:
                print(f"{entry.key} = {entry.value.decode()} (revision {entry.revision})")
            else:
                print(f"{entry.key} {entry.operation.value} (revision {entry.revision})")
            if up_to_date.is_set():
                changes -= 1
                if changes == 0:
                    return


async def run(url: str) -> None:
    async with jetstream.connect(url) as nc:
        js = nc.jetstream()
        kv = await js.create_key_value(bucket=BUCKET, history=5)
        try:
            await kv.put("ui.theme", b"light")
            await kv.put("ui.language", b"en")
            await kv.put("ui.theme", b"dark")  # the watcher starts with this one
            await kv.put("db.pool_size", b"10")  # not under ui.>: never seen

            up_to_date = asyncio.Event()
            watcher = asyncio.create_task(watch(kv, up_to_date, changes=3))
            await up_to_date.wait()
            await kv.put("ui.language", b"fr")
            await kv.put("db.pool_size", b"20")
            await kv.delete("ui.theme")
            await kv.put("ui.font_size", b"14")
            await asyncio.wait_for(watcher, 10)

            history = [e.value.decode() or e.operation.value for e in await kv.history("ui.theme")]
            print(f"history of ui.theme: {history}")
        finally:
            await js.delete_key_value(BUCKET)


if __name__ == "__main__":
    from _runner import main

    main(run, __doc__)
