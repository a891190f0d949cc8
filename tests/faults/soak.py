"""Soak (``make soak``): publish and consume on a 3-node cluster through cuts,
blackholes, leader elections and restarts, for minutes.

An R3 stream and an R3 durable pull consumer; the publishing and the consuming
client each reach the three nodes through proxies of their own. Every ~0.5 s the
publishing connection is cut; every ~10 s the consuming connection goes through a
3 s blackhole (0.5 s heartbeats); every 20 s the stream's or the consumer's leader
steps down; every 60 s a node is killed (SIGKILL) and restarted, each node in turn.
At the end: every published message stored once and consumed, no publish error
reached the application, the client's memory grown by less than 20 MB, and tasks,
subscriptions and pending futures back at their baseline. Exits non-zero when a
check fails.

The memory check measures the client, not the soak: consumed ids go to a bitmap
(``tests.faults.ids``, 250 KB for two million ids), and the figure compared is the
current RSS (``/proc/self/statm`` after ``gc.collect()``), sampled after a warm-up
minute, never the peak (``ru_maxrss`` does not come down). Every 30 s a line gives
it with the client's own buffers: each subscription's pending messages, the bytes
held for the socket (the outgoing buffer, or the reconnect buffer while disconnected,
and the transport's write buffer), the pending request and publish_async acks.

Run: ``.venv/bin/python -m tests.faults.soak [--seconds 600]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import itertools
import os
import sys
import time
from typing import Any

import jetstream
from jetstream import Client, ConsumerConfig, JetStream, StreamConfig
from jetstream.embedded import NatsCluster
from tests.faults.ids import IdTracker
from tests.faults.placing import placed
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
    out = {
        "subs": nc.subscription_count,
        "sub_pending_msgs": msgs,
        "sub_pending_bytes": nbytes,
        # The write buffer, flushed every loop iteration when connected (the reconnect
        # buffer, bounded by reconnect_buf_size, when not), and the transport's.
        "buffered": nc.buffered_bytes,
        "requests": nc.pending_requests,
        "pongs": len(conn.pongs) if conn is not None else 0,
        "pub_prefixes": len(nc._pub_prefixes),
        "pub_heads": sum(map(len, nc._pub_heads.values())),
    }
    if js is not None:
        out["async_acks"] = js.publish_async_pending
        out["async_tries"] = len(js._publisher._tries)
    return out


def _fmt(b: dict[str, int]) -> str:
    return " ".join(f"{k}={v}" for k, v in b.items())


#: the subscriptions a client keeps for its lifetime: the request inbox, and per
#: JetStream context the publish_async inbox and, in a cluster, the election watch
_OWN = {"RequestMux", "AsyncPublisher", "LeaderWatch"}


def _left_subs(*clients: Client) -> list[str]:
    """Subscriptions left at the end that are not a client's own (a leak)."""
    return [
        repr(d)[:100] for nc in clients for d in nc._subs.values() if type(d).__name__ not in _OWN
    ]


class Faults:
    """The soak's disruptions of a 3-node cluster, each its own loop: the publishing
    connection cut every ~0.5 s, the consuming one blackholed 3 s every 10 s, a leader
    election every 20 s (the stream's and the consumer's in turn), a node killed and
    restarted every 60 s (each in turn)."""

    def __init__(
        self,
        cluster: NatsCluster,
        pub_proxies: list[FaultProxy],
        sub_proxies: list[FaultProxy],
        admin: JetStream,
        stop: asyncio.Event,
    ) -> None:
        self.cluster, self.admin, self.stop = cluster, admin, stop
        self.pub_proxies, self.sub_proxies = pub_proxies, sub_proxies
        self.counts = {"cuts": 0, "blackholes": 0, "elections": 0, "restarts": 0}
        #: what the faults themselves failed to do (a step-down refused...): reported
        self.admin_errors: list[str] = []

    async def _pause(self, seconds: float) -> bool:
        """Sleep, or return False as soon as the soak stops."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self.stop.wait()
        return not self.stop.is_set()

    async def cutter(self) -> None:
        while await self._pause(0.5):
            for p in self.pub_proxies:
                p.cut()
            self.counts["cuts"] += 1

    async def blackholer(self) -> None:
        while await self._pause(10):
            for p in self.sub_proxies:
                p.blackhole = True
            await asyncio.sleep(3)
            for p in self.sub_proxies:
                p.blackhole = False
            self.counts["blackholes"] += 1

    async def elector(self) -> None:
        n = 0
        while await self._pause(20):
            what = "STREAM.LEADER.STEPDOWN.SOAK"
            if n % 2:
                what = "CONSUMER.LEADER.STEPDOWN.SOAK.soak"
            n += 1
            try:
                reply = await self.admin.client.request(
                    self.admin.api_subject(what), b"", timeout=5
                )
            except jetstream.NatsError as exc:
                self.admin_errors.append(f"{what}: {exc!r}")
                continue
            if b'"success":true' in reply.data:
                self.counts["elections"] += 1
            else:
                self.admin_errors.append(f"{what}: {reply.data[:200]!r}")

    async def restarter(self) -> None:
        i = 0
        while await self._pause(60):
            node = i % len(self.cluster)
            i += 1
            await asyncio.to_thread(self.cluster.servers[node].kill)
            await asyncio.sleep(2)
            try:
                await self.cluster.restart_async(node)
            except jetstream.NatsError as exc:
                self.admin_errors.append(f"restart of n{node + 1}: {exc!r}")
                continue
            self.counts["restarts"] += 1

    def start(self) -> list[asyncio.Task[None]]:
        return [
            asyncio.create_task(f())
            for f in (self.cutter, self.blackholer, self.elector, self.restarter)
        ]


def _through(proxies: list[FaultProxy]) -> Any:
    """A ``reconnect_to_server_cb`` that keeps a client on its proxies (the servers'
    own addresses, learnt from INFO, would take it past them), in turn."""
    urls = itertools.cycle([p.url for p in proxies])

    def choose(servers: list[str], info: object) -> tuple[str, float]:
        return next(urls), 0.05

    return choose


async def soak(seconds: float) -> bool:
    warmup = min(WARMUP, seconds / 4)
    async with NatsCluster(3) as cluster, contextlib.AsyncExitStack() as stack:
        pub_proxies = [await stack.enter_async_context(FaultProxy(s.port)) for s in cluster]
        sub_proxies = [await stack.enter_async_context(FaultProxy(s.port)) for s in cluster]
        admin_nc = await stack.enter_async_context(jetstream.connect(cluster.urls, **FAST))
        pub = await stack.enter_async_context(
            jetstream.connect(
                [p.url for p in pub_proxies], reconnect_to_server_cb=_through(pub_proxies), **FAST
            )
        )
        sub = await stack.enter_async_context(
            jetstream.connect(
                [p.url for p in sub_proxies],
                reconnect_to_server_cb=_through(sub_proxies),
                ping_interval=60,
                **FAST,
            )
        )
        admin = admin_nc.jetstream()
        js_pub = pub.jetstream(timeout=2)
        js_sub = sub.jetstream()
        s = await placed(
            lambda: admin.create_stream(
                StreamConfig(name="SOAK", subjects=["soak"], num_replicas=3)
            )
        )
        await placed(
            lambda: s.create_consumer(
                ConsumerConfig(durable_name="soak", ack_wait=30, num_replicas=3)
            )
        )
        # Consumed through the blackholed connection.
        c = await (await js_sub.stream("SOAK")).consumer("soak")
        stop = asyncio.Event()
        faults = Faults(cluster, pub_proxies, sub_proxies, admin, stop)
        published = 0
        publish_errors = 0
        seen = IdTracker()

        async def publisher() -> None:
            nonlocal published, publish_errors
            i = 0
            while not stop.is_set():
                try:
                    # A whole-call deadline well past a cut, an election or a restart.
                    await js_pub.publish("soak", b"%d" % i, msg_id=f"s{i}", timeout=30)
                except jetstream.NatsError as exc:
                    # Reached the application. The same id again: the msg id makes a
                    # second store impossible.
                    publish_errors += 1
                    print(f"publish of {i} raised, publishing it again: {exc!r}", flush=True)
                    continue
                i += 1
                published = i

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
                f"ids {seen.nbytes() / 1024:.0f} KB tasks {len(asyncio.all_tasks())} "
                f"{_fmt(faults.counts)}\n"
                f"        pub: {_fmt(buffers(pub, js_pub))}\n"
                f"        sub: {_fmt(buffers(sub))}",
                flush=True,
            )

        await asyncio.sleep(1)
        start_rss = rss_mb()
        base_tasks = len(asyncio.all_tasks())
        tasks = [asyncio.create_task(publisher()), *faults.start()]
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
        # the PONG after the reader's UNSUBs: the inboxes it cut (kept until then, to
        # give back what was still on the way) are gone
        await sub.flush(timeout=30)
        stored = (await admin.stream("SOAK")).cached_info.state.messages
        end_rss = rss_mb()
        lost = seen.missing_count(published)
        print(
            f"published {published} (raised and published again: {publish_errors}) "
            f"stored {stored} consumed {seen.distinct} lost {lost} {seen.missing(published)} "
            f"redelivered {seen.duplicates} beyond {max(seen.high - published, 0)}\n"
            f"faults: {_fmt(faults.counts)}; admin errors {len(faults.admin_errors)} "
            f"{faults.admin_errors[:3]}\n"
            f"rss {start_rss:.1f} MB at start, {base_rss:.1f} MB after the warm-up, "
            f"{end_rss:.1f} MB at the end: {end_rss - base_rss:+.1f} MB "
            f"(bound {RSS_BOUND_MB:.0f} MB); id tracker {seen.nbytes() / 1024:.0f} KB",
            flush=True,
        )
        report(time.monotonic() - t0)
        checks = {
            "stored exactly once": stored == published,
            "consumed everything": lost == 0 and seen.high <= published,
            "no publish error reached the application": publish_errors == 0,
            f"rss growth < {RSS_BOUND_MB:.0f} MB": end_rss - base_rss < RSS_BOUND_MB,
            "tasks back to baseline": len(asyncio.all_tasks()) <= base_tasks,
            "no subscription left but the clients' own": not (left_subs := _left_subs(pub, sub)),
            "no publish_async futures pending": js_pub.publish_async_pending == 0,
            "every kind of fault happened": all(faults.counts.values()),
        }
    for name, ok in checks.items():
        print(f"{name:42s} {'ok' if ok else 'FAILED'}")
    if left_subs:
        print(f"subscriptions left: {left_subs}")
    return all(checks.values())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    ap.add_argument("--seconds", type=float, default=600)
    args = ap.parse_args()
    sys.exit(0 if asyncio.run(soak(args.seconds)) else 1)


if __name__ == "__main__":
    main()
