"""Soak (``make soak``): publishes with cuts and pull consumption with blackholes, for minutes.

Every ~0.5 s the proxy cuts the publishing connection; every ~10 s the consuming
connection goes through a 3 s blackhole (0.5 s heartbeats). At the end: every
published message stored once and consumed, the client's memory grown by less than
20 MB, and tasks, subscriptions and pending futures back at their baseline. Exits
non-zero when a check fails.

The memory check measures the client, not the soak: consumed ids go to a bitmap
(``tests.faults.ids``, 250 KB for two million ids), and the figure compared is the
current RSS (``/proc/self/statm`` after ``gc.collect()``), sampled after a warm-up
minute, never the peak (``ru_maxrss`` does not come down). Every 30 s a line gives
it with the client's own buffers: each subscription's pending messages, the
outgoing buffer (the reconnect buffer while disconnected), the transport's write
buffer, the pending request and publish_async acks.

Run: ``.venv/bin/python -m tests.faults.soak [--seconds 600]``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import sys
import time
from typing import Any

import jetstream
from jetstream import Client, ConsumerConfig, JetStream, StreamConfig
from jetstream.embedded import NatsServer
from tests.faults.ids import IdTracker
from tests.faults.proxy import FaultProxy

FAST = {"reconnect_time_wait": 0.05, "reconnect_jitter": 0.02, "max_reconnect_attempts": -1}
RSS_BOUND_MB = 20.0
WARMUP = 60.0
REPORT_EVERY = 30.0
_PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_mb() -> float:
    """The current resident set size in MB, after a full collection."""
    gc.collect()
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * _PAGE / (1024 * 1024)


def _pending(delivery: Any) -> tuple[int, int]:
    """Messages and payload bytes a subscription holds, not yet handed over."""
    if hasattr(delivery, "pending_bytes"):  # a core Subscription
        return delivery.pending_msgs, delivery.pending_bytes
    buf = getattr(delivery, "_buf", None)  # a pull MessageStream / fetch
    if buf is not None:
        return len(buf), sum(len(m.data) for m in buf)
    return 0, 0


def buffers(nc: Client, js: JetStream | None = None) -> dict[str, int]:
    """The client's own buffers, by name (sizes in bytes, or counts)."""
    msgs = nbytes = 0
    for d in nc._subs.values():
        m, b = _pending(d)
        msgs += m
        nbytes += b
    conn = nc._conn
    transport = conn.transport if conn is not None else None
    out = {
        "subs": len(nc._subs),
        "sub_pending_msgs": msgs,
        "sub_pending_bytes": nbytes,
        # One buffer: flushed every loop iteration when connected, the reconnect
        # buffer (bounded by reconnect_buf_size) when not.
        "wbuf" if conn is not None else "reconnect_buf": len(nc._wbuf),
        "transport_wbuf": transport.get_write_buffer_size() if transport is not None else 0,
        "requests": len(nc._mux.waiters) if nc._mux is not None else 0,
        "pongs": len(conn.pongs) if conn is not None else 0,
        "pub_prefixes": len(nc._pub_prefixes),
    }
    if js is not None:
        out["async_acks"] = js.publish_async_pending
        out["async_tries"] = len(js._publisher._tries)
    return out


def _fmt(b: dict[str, int]) -> str:
    return " ".join(f"{k}={v}" for k, v in b.items())


async def soak(seconds: float) -> bool:
    warmup = min(WARMUP, seconds / 4)
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
            await s.create_consumer(ConsumerConfig(durable_name="soak", ack_wait=30))
            # Consumed through the blackholed connection (a consumer made by js_pub would
            # pull through the publishing connection, and no blackhole would reach it).
            c = await (await js_sub.stream("SOAK")).consumer("soak")
            stop = asyncio.Event()
            published = 0
            publish_errors = 0
            seen = IdTracker()

            async def publisher() -> None:
                nonlocal published, publish_errors
                i = 0
                while not stop.is_set():
                    try:
                        # A whole-call deadline well past a cut and its reconnect.
                        await js_pub.publish(
                            "soak", b"%d" % i, msg_id=f"s{i}", timeout=30, retry_attempts=50
                        )
                    except jetstream.NatsError as exc:
                        # The same id again: the msg id makes a second store impossible.
                        publish_errors += 1
                        print(f"publish of {i} failed, again: {exc!r}", flush=True)
                        continue
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
                    while not stop.is_set() or seen.distinct < published:
                        try:
                            msg = await it.next(timeout=1)
                        except jetstream.TimeoutError:
                            continue
                        seen.add(int(msg.data))
                        await msg.ack()

            def report(t: float) -> None:
                print(
                    f"{t:6.0f}s published {published} consumed {seen.distinct} "
                    f"redelivered {seen.duplicates} rss {rss_mb():.1f} MB "
                    f"ids {seen.nbytes() / 1024:.0f} KB tasks {len(asyncio.all_tasks())}\n"
                    f"        pub: {_fmt(buffers(pub, js_pub))}\n"
                    f"        sub: {_fmt(buffers(sub))}",
                    flush=True,
                )

            await asyncio.sleep(1)
            start_rss = rss_mb()
            base_tasks = len(asyncio.all_tasks())
            base_subs = len(pub._subs) + len(sub._subs)
            tasks = [asyncio.create_task(f()) for f in (publisher, cutter, blackholer)]
            reader = asyncio.create_task(consumer())
            t0 = time.monotonic()
            print(f"start rss {start_rss:.1f} MB; warm-up {warmup:.0f}s", flush=True)
            await asyncio.sleep(warmup)
            base_rss = rss_mb()
            print(f"{warmup:6.0f}s warm-up over: rss {base_rss:.1f} MB (the baseline)", flush=True)
            report(time.monotonic() - t0)
            while (left := seconds - (time.monotonic() - t0)) > 0:
                await asyncio.sleep(min(REPORT_EVERY, left))
                report(time.monotonic() - t0)
            stop.set()
            await asyncio.gather(*tasks)
            await asyncio.wait_for(reader, 120)
            stored = (await js_sub.stream("SOAK")).cached_info.state.messages
            end_rss = rss_mb()
            lost = seen.missing_count(published)
            print(
                f"published {published} (errors retried {publish_errors}) stored {stored} "
                f"consumed {seen.distinct} lost {lost} {seen.missing(published)} "
                f"redelivered {seen.duplicates} beyond {max(seen.high - published, 0)}\n"
                f"rss {start_rss:.1f} MB at start, {base_rss:.1f} MB after the warm-up, "
                f"{end_rss:.1f} MB at the end: {end_rss - base_rss:+.1f} MB "
                f"(bound {RSS_BOUND_MB:.0f} MB); id tracker {seen.nbytes() / 1024:.0f} KB",
                flush=True,
            )
            report(time.monotonic() - t0)
            checks = {
                "stored exactly once": stored == published,
                "consumed everything": lost == 0 and seen.high <= published,
                f"rss growth < {RSS_BOUND_MB:.0f} MB": end_rss - base_rss < RSS_BOUND_MB,
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
