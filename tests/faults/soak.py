"""Soak (``make soak``): publishes with cuts and pull consumption with blackholes, for minutes.

Every ~0.5 s the proxy cuts the publishing connection; every ~10 s the consuming
connection goes through a 3 s blackhole (0.5 s heartbeats). At the end: every
published message stored once and consumed, RSS grown by less than 20 MB, and
tasks, subscriptions and pending futures back at their baseline. Exits non-zero
when a check fails.

Run: ``.venv/bin/python -m tests.faults.soak [--seconds 600]``.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import sys
import time

import jetstream
from jetstream import ConsumerConfig, StreamConfig
from jetstream.embedded import NatsServer
from tests.faults.proxy import FaultProxy

FAST = {"reconnect_time_wait": 0.05, "reconnect_jitter": 0.02, "max_reconnect_attempts": -1}


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def soak(seconds: float) -> bool:
    with NatsServer() as server:
        async with (
            FaultProxy(server.port) as pub_proxy,
            FaultProxy(server.port) as sub_proxy,
            jetstream.connect(pub_proxy.url, **FAST) as pub,
            jetstream.connect(sub_proxy.url, ping_interval=60, **FAST) as sub,
        ):
            js_pub = pub.jetstream(timeout=2)
            js_sub = sub.jetstream()
            s = await js_pub.create_stream(StreamConfig(name="SOAK", subjects=["soak"]))
            c = await s.create_consumer(ConsumerConfig(durable_name="soak", ack_wait=30))
            stop = asyncio.Event()
            published = 0
            seen: set[int] = set()

            async def publisher() -> None:
                nonlocal published
                i = 0
                while not stop.is_set():
                    await js_pub.publish("soak", b"%d" % i, msg_id=f"s{i}", retry_attempts=50)
                    i += 1
                    published = i

            async def cutter() -> None:
                while not stop.is_set():
                    await asyncio.sleep(0.5)
                    pub_proxy.cut()

            async def blackholer() -> None:
                while not stop.is_set():
                    await asyncio.sleep(10)
                    sub_proxy.blackhole = True
                    await asyncio.sleep(3)
                    sub_proxy.blackhole = False

            async def consumer() -> None:
                async with c.messages(
                    max_messages=100, expires=5, heartbeat=0.5, error_cb=lambda e: None
                ) as it:
                    while not stop.is_set() or len(seen) < published:
                        try:
                            msg = await it.next(timeout=1)
                        except jetstream.TimeoutError:
                            continue
                        seen.add(int(msg.data))
                        await msg.ack()

            await asyncio.sleep(1)
            base_rss = rss_mb()
            base_tasks = len(asyncio.all_tasks())
            base_subs = len(pub._subs) + len(sub._subs)
            tasks = [asyncio.create_task(f()) for f in (publisher, cutter, blackholer)]
            reader = asyncio.create_task(consumer())
            t0 = time.monotonic()
            while time.monotonic() - t0 < seconds:
                await asyncio.sleep(min(30, seconds))
                print(
                    f"{time.monotonic() - t0:6.0f}s published {published} consumed {len(seen)} "
                    f"rss {rss_mb():.1f} MB tasks {len(asyncio.all_tasks())}",
                    flush=True,
                )
            stop.set()
            await asyncio.gather(*tasks)
            await asyncio.wait_for(reader, 120)
            stored = (await js_sub.stream("SOAK")).cached_info.state.messages
            checks = {
                "stored exactly once": stored == published,
                "consumed everything": seen == set(range(published)),
                "rss growth < 20 MB": rss_mb() - base_rss < 20,
                "tasks back to baseline": len(asyncio.all_tasks()) <= base_tasks,
                "subscriptions back to baseline": len(pub._subs) + len(sub._subs) <= base_subs + 1,
                "no publish_async futures pending": js_pub.publish_async_pending == 0,
            }
    for name, ok in checks.items():
        print(f"{name:32s} {'ok' if ok else 'FAILED'}")
    return all(checks.values())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    ap.add_argument("--seconds", type=float, default=600)
    args = ap.parse_args()
    sys.exit(0 if asyncio.run(soak(args.seconds)) else 1)


if __name__ == "__main__":
    main()
