"""Object store benchmarks, jetstream and nats-py (and natsio where it is installed; the
official next-generation client has no ObjectStore) side by side in one process run.

Workloads (one embedded nats-server, file storage, 128 KiB chunks):

- put 64 MiB: one object from bytes in memory;
- get 64 MiB (bytes): the same object read back whole into bytes (nats-py grows its
  result with ``bytes +=``, which copies everything read so far once per chunk);
- get 64 MiB (stream): the chunks handed over one by one and dropped (ours: the
  reader's ``async for``; nats-py: ``get(writeinto=...)``, one executor write per chunk);
- with ``--big``: a 1 GiB object put from a file and read back into a file, with the
  growth of the process's peak RSS during each (Linux: the peak is reset first).

The clients take turns within each workload (ours, theirs, ours, ...): run one after the
other, the first read of a file-stored object came out up to a third slower than later ones.

Run: ``.venv/bin/python -m benchmarks.bench_objectstore [--big] [--loop uvloop] [--cpu]``;
``--cpu`` prints the CPU each run took a MiB, this process's and the server's.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import hashlib
import io
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import nats

import jetstream
from benchmarks import _peers
from benchmarks._floor import CLIENT_FLOOR, FLOOR, deliver_all, publish_all
from benchmarks._report import (
    Measurement,
    arg_parser,
    race_async,
    report,
    run_on_loop,
    with_cpu,
)
from jetstream.embedded import NatsServer
from jetstream.objectstore import DEFAULT_CHUNK_SIZE

MiB = 1024 * 1024


def _status(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def reset_peak() -> int:
    """Reset the peak RSS to the current RSS (Linux); returns the baseline in bytes.

    Freed heap is handed back to the system first (glibc ``malloc_trim``): memory the
    process keeps from earlier workloads would otherwise hide any growth.
    """
    gc.collect()
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return _status("VmHWM")
    return _status("VmRSS")


class Ours:
    name = "jetstream"

    def __init__(self, url: str) -> None:
        self.url = url

    async def __aenter__(self) -> Ours:
        self.nc = await jetstream.connect(self.url)
        self.obs = await self.nc.jetstream().create_object_store(bucket="bench_ours")
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.obs.destroy()
        await self.nc.close()

    async def put(self, data: bytes) -> float:
        t = time.perf_counter()
        await self.obs.put("obj", data)
        return time.perf_counter() - t

    async def get(self, size: int) -> float:
        t = time.perf_counter()
        got = await self.obs.get_bytes("obj")
        elapsed = time.perf_counter() - t
        assert len(got) == size
        return elapsed

    async def stream(self, size: int) -> float:
        t = time.perf_counter()
        n = 0
        async with self.obs.get("obj") as reader:
            async for chunk in reader:
                n += len(chunk)
        elapsed = time.perf_counter() - t
        assert n == size
        return elapsed

    async def put_file(self, path: Path) -> float:
        t = time.perf_counter()
        await self.obs.put("big", path)
        return time.perf_counter() - t

    async def get_file(self, path: Path) -> float:
        t = time.perf_counter()
        await self.obs.get_file("big", path)
        return time.perf_counter() - t


class Theirs:
    name = "nats-py"

    def __init__(self, url: str) -> None:
        self.url = url

    async def __aenter__(self) -> Theirs:
        self.nc = await nats.connect(self.url)
        self.js = self.nc.jetstream()
        self.obs = await self.js.create_object_store("bench_theirs")
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.js.delete_object_store("bench_theirs")
        await self.nc.close()

    async def put(self, data: bytes) -> float:
        t = time.perf_counter()
        await self.obs.put("obj", data)
        return time.perf_counter() - t

    async def get(self, size: int) -> float:
        t = time.perf_counter()
        res = await self.obs.get("obj")
        elapsed = time.perf_counter() - t
        assert len(res.data) == size
        return elapsed

    async def stream(self, size: int) -> float:
        sink = _Sink()
        t = time.perf_counter()
        await self.obs.get("obj", writeinto=sink)  # type: ignore[arg-type]
        elapsed = time.perf_counter() - t
        assert sink.n == size
        return elapsed

    async def put_file(self, path: Path) -> float:
        t = time.perf_counter()
        with open(path, "rb") as f:  # noqa: ASYNC230
            await self.obs.put("big", f)
        return time.perf_counter() - t

    async def get_file(self, path: Path) -> float:
        t = time.perf_counter()
        with open(path, "wb") as f:  # noqa: ASYNC230
            await self.obs.get("big", writeinto=f)
        return time.perf_counter() - t


class _Sink:
    """A writable that counts and drops what it is given (nats-py's ``writeinto``)."""

    def __init__(self) -> None:
        self.n = 0

    def write(self, data: bytes) -> int:
        self.n += len(data)
        return len(data)


def _write_file(path: Path, size: int) -> None:
    block = os.urandom(MiB)
    with open(path, "wb") as f:
        for i in range(size // MiB):
            f.write(block[i:] + block[:i])


async def _floors(url: str, ours: Ours, data: bytes, mib: int, repeat: int) -> list[Measurement]:
    """The put and the gets on bare sockets (``_floor``), best of ``repeat`` runs: the
    chunks of ``data`` published all at once to ours's bucket (under a subject of their
    own), and the chunks of ours's object sent to a socket that drops them."""
    info = await ours.obs.info("obj")
    stream, chunks = "OBJ_bench_ours", info.chunks
    delivered = min(
        deliver_all(url, stream, f"$O.bench_ours.C.{info.nuid}", chunks) for _ in range(repeat)
    )
    step = DEFAULT_CHUNK_SIZE
    parts = [data[i : i + step] for i in range(0, len(data), step)]
    # as the workload replaces its object: each run purges the chunks of the run before
    # (the first run's, those of an untimed one)
    subject = "$O.bench_ours.C.floor{}"
    publish_all(url, subject.format(0), parts)
    stored = min(
        publish_all(
            url,
            subject.format(i),
            parts,
            (f"$JS.API.STREAM.PURGE.{stream}", b'{"filter":"%b"}' % subject.format(i - 1).encode()),
        )
        for i in range(1, repeat + 1)
    )
    await (await ours.obs.js.stream(stream)).purge(filter="$O.bench_ours.C.floor*")
    size = len(data)
    digest, whole = min(_client_share(parts) for _ in range(repeat))
    print(
        f"socket floor: put {size / stored / 1e6:.1f} MB/s, "
        f"get {size / delivered / 1e6:.1f} MB/s ({chunks} chunks); a reader's own share: "
        f"SHA-256 {digest * 1e3:.1f} ms, one bytes of it {whole * 1e3:.1f} ms"
    )
    return [
        Measurement(f"put {mib} MiB", FLOOR, stored, 1, size),
        *(
            Measurement(f"get {mib} MiB ({how})", FLOOR, delivered, 1, size)
            for how in ("bytes", "stream")
        ),
        Measurement(f"get {mib} MiB (bytes)", CLIENT_FLOOR, digest + whole, 1, size),
        Measurement(f"get {mib} MiB (stream)", CLIENT_FLOOR, digest, 1, size),
    ]


def _client_share(parts: list[bytes]) -> tuple[float, float]:
    """What a reader of an object spends on its own thread however it receives the
    chunks: the SHA-256 of every chunk (a get checks the digest), and, for a get into
    one bytes object, copying fresh chunks into it. Seconds of each, in that order."""
    h = hashlib.sha256()
    t0 = time.perf_counter()
    for part in parts:
        h.update(part)
    digest = time.perf_counter() - t0
    # fresh chunks, as a connection's reads make them, and one result, as read_all does
    fresh = [bytes(bytearray(part)) for part in parts]
    t0 = time.perf_counter()
    out = io.BytesIO()
    for part in fresh:
        out.write(part)
    out.getvalue()
    return digest, time.perf_counter() - t0


async def main_async(args: Any) -> tuple[list[Measurement], list[str]]:
    results: list[Measurement] = []
    rss_lines: list[str] = []
    size = args.size * MiB
    data = os.urandom(size)
    with NatsServer() as server, tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "src.bin"
        if args.big:
            _write_file(src, 1024 * MiB)
        impls: list[Any] = [Ours(server.url)]
        if not args.no_peer:
            impls.append(Theirs(server.url))
            # nats-core has no ObjectStore: it is not in this table (n/a)
            impls += [m.Obj(server.url) for m in _peers.load() if hasattr(m, "Obj")]
        async with contextlib.AsyncExitStack() as stack:
            for impl in impls:
                await stack.enter_async_context(impl)
            # the clients take turns within each workload (ours, theirs, ours, ...), so
            # that a busy or a cold moment of the server (file storage) falls on all alike
            for label, run in (
                (f"put {args.size} MiB", lambda i: i.put(data)),
                (f"get {args.size} MiB (bytes)", lambda i: i.get(size)),
                (f"get {args.size} MiB (stream)", lambda i: i.stream(size)),
            ):
                runs = {impl.name: (lambda i=impl, r=run: r(i)) for impl in impls}
                if args.cpu:  # CPU a MiB of each side, printed per run
                    pid = server.pid or 0
                    runs = {
                        name: with_cpu(r, label, name, args.size, pid, whole=True)
                        for name, r in runs.items()
                    }
                cpu: dict[str, tuple[float, float]] = {}
                best = await race_async(runs, args.repeat, cpu)
                for name, secs in best.items():
                    results.append(
                        Measurement(label, name, secs, 1, size, *cpu.get(name, (None, None)))
                    )
                    print(f"  {name:9s} {label:24s} {size / secs / 1e6:8.1f} MB/s", flush=True)
            results += await _floors(server.url, impls[0], data, args.size, args.repeat)
            for impl in impls:
                name = impl.name
                if args.big and hasattr(impl, "put_file"):
                    big = 1024 * MiB
                    out = Path(tmp) / f"out-{name}.bin"
                    gc.collect()
                    base = reset_peak()
                    secs = await impl.put_file(src)
                    grown = (_status("VmHWM") - base) / MiB
                    results.append(Measurement("put 1 GiB (file)", name, secs, 1, big))
                    rss_lines.append(f"{name:9s} put 1 GiB: peak RSS +{grown:.1f} MiB")
                    print(f"  {name:9s} put 1 GiB {big / secs / 1e6:8.1f} MB/s", flush=True)
                    gc.collect()
                    base = reset_peak()
                    secs = await impl.get_file(out)
                    grown = (_status("VmHWM") - base) / MiB
                    results.append(Measurement("get 1 GiB (file)", name, secs, 1, big))
                    rss_lines.append(f"{name:9s} get 1 GiB: peak RSS +{grown:.1f} MiB")
                    print(f"  {name:9s} get 1 GiB {big / secs / 1e6:8.1f} MB/s", flush=True)
                    out.unlink()
    return results, rss_lines


def main() -> None:
    parser = arg_parser("Object store put/get vs nats-py")
    parser.add_argument("--size", type=int, default=64, help="object size in MiB")
    parser.add_argument("--big", action="store_true", help="also a 1 GiB put/get with peak RSS")
    parser.add_argument("--no-peer", action="store_true", help="skip nats-py")
    parser.add_argument("--loop", choices=["asyncio", "uvloop"], default="asyncio")
    parser.add_argument("--cpu", action="store_true", help="client/server CPU a MiB")
    parser.set_defaults(repeat=3)
    args = parser.parse_args()
    results, rss = run_on_loop(main_async(args), args.loop)
    title = f"Object store ({args.loop} loop, best of {args.repeat})"
    report(results, title=title, json_output=args.json)
    for line in rss:
        print(line)


if __name__ == "__main__":
    main()
