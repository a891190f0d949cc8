"""What tracing costs a message: the same workloads with tracing off, on with an SDK
provider that records spans and exports none, and on with the SDK's in-memory exporter
(a ``SimpleSpanProcessor``: every span exported as it ends).

Run: ``.venv/bin/python -m benchmarks.tracing_cost`` (needs ``opentelemetry-sdk``, in the
dev extra). Prints microseconds a message per workload and mode, the best of
``--repeat`` runs; the docs' tracing figures come from it. That tracing *off* costs
nothing is measured by ``benchmarks.ab`` against the revision before tracing.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import jetstream
from jetstream import ConsumerConfig, StreamConfig
from jetstream.api import StorageType
from jetstream.embedded import NatsServer

MODES = ("off", "recorded", "exported")


def _tracing(mode: str) -> Any:
    if mode == "off":
        return None
    provider = TracerProvider()
    if mode == "exported":
        provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
    return provider


async def core_publish(nc: jetstream.Client, n: int) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        await nc.publish("trace.core", b"x" * 16)
    await nc.flush()
    return time.perf_counter() - t0


async def js_publish(nc: jetstream.Client, n: int) -> float:
    js = nc.jetstream()
    await js.create_stream(
        StreamConfig(name="TCOST", subjects=["tcost"], storage=StorageType.MEMORY)
    )
    try:
        t0 = time.perf_counter()
        for _ in range(n // 10):
            await js.publish("tcost", b"x" * 16)
        return (time.perf_counter() - t0) * 10
    finally:
        await js.delete_stream("TCOST")


async def publish_async(nc: jetstream.Client, n: int) -> float:
    js = nc.jetstream()
    await js.create_stream(
        StreamConfig(name="TCOST", subjects=["tcost"], storage=StorageType.MEMORY)
    )
    try:
        t0 = time.perf_counter()
        for _ in range(n):
            await js.publish_async("tcost", b"x" * 16)
        await js.publish_async_complete(60)
        return time.perf_counter() - t0
    finally:
        await js.delete_stream("TCOST")


async def messages_ack(nc: jetstream.Client, n: int) -> float:
    js = nc.jetstream()
    stream = await js.create_stream(
        StreamConfig(name="TCOST", subjects=["tcost"], storage=StorageType.MEMORY)
    )
    try:
        async with jetstream.connect(nc.connected_url or "") as plain:
            pjs = plain.jetstream()
            for _ in range(n):
                await pjs.publish_async("tcost", b"x" * 16)
            await pjs.publish_async_complete(60)
        cons = await stream.create_consumer(ConsumerConfig(durable_name="c"))
        t0 = time.perf_counter()
        async with cons.messages() as it:
            for _ in range(n):
                msg = await it.next(timeout=30)
                await msg.ack()
        return time.perf_counter() - t0
    finally:
        await js.delete_stream("TCOST")


WORKLOADS: dict[str, Callable[[jetstream.Client, int], Awaitable[float]]] = {
    "publish 16 B": core_publish,
    "js.publish (sync)": js_publish,
    "publish_async": publish_async,
    "messages() + ack": messages_ack,
}


async def main_async(args: argparse.Namespace) -> None:
    with NatsServer() as server:
        print(f"{'workload':20}" + "".join(f"{m:>12}" for m in MODES) + "   (µs a message)")
        for name, work in WORKLOADS.items():
            row = []
            for mode in MODES:
                best = float("inf")
                for _ in range(args.repeat):
                    async with jetstream.connect(server.url, tracing=_tracing(mode)) as nc:
                        best = min(best, await work(nc, args.count))
                row.append(best / args.count * 1e6)
            print(f"{name:20}" + "".join(f"{v:12.2f}" for v in row))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--count", type=int, default=20_000, help="messages a run")
    ap.add_argument("--repeat", type=int, default=3, help="runs a cell; the best is kept")
    asyncio.run(main_async(ap.parse_args()))


if __name__ == "__main__":
    main()
