"""The Spark fault matrix (issue 48): each path of the adapter against each fault, the fault
landing inside the work. A cell passes when the output is exact, or when the job failed
loudly and running it again (from its checkpoint, for a streaming query) made it exact.

The paths, each a real Spark job (``run_job``):

* ``read``: ``spark.read.format("jetstream")`` of a stream of ``N_READ`` messages,
  counted on the executors (rows, distinct sequences, lowest and highest);
* ``stream``: ``spark.readStream.format("jetstream")`` under ``availableNow`` in batches
  of a quarter of the stream, each batch's sequences saved as parquet by batch id (a batch
  Spark runs again overwrites its own);
* ``sink``: ``foreach_batch_sink`` of a streaming query over ``FILES`` parquet files
  (``N_WRITE`` rows, ids 0..N-1, a few files a batch) into stream ``OUT``, the id the key;
* ``writer``: ``df.write.format("jetstream")`` of the same rows, the id the key;
* ``kv``: ``kv_sink`` of the same rows as a streaming query into bucket ``KVB``.

The faults (``FAULTS``; every path connects with a ``timeout`` of ``TIMEOUT`` seconds, so
each fault outlasts it):

* ``sigstop``: the server frozen for ``PAUSE`` s;
* ``restart``: the server killed (SIGKILL) and started again on its port and store;
* ``leader``: in a 3-node cluster (R3 streams and bucket), the leader of the stream the
  job reads or writes killed, and started again;
* ``blackhole``: every connection of Spark's (it goes through a fault proxy) forwards
  nothing for ``BLACKHOLE`` s;
* ``worker``: Spark's Python workers killed (SIGKILL) mid-task;
* ``driver``: the job runs in a driver process of its own (``fault_job.py``), killed with
  SIGKILL mid-job, then started again (a streaming query from its checkpoint);
* ``window`` (the writing paths only): as ``driver``, but the job writes exactly once at
  any distance in time (the sink and the writer with ``commit_subject``, the KeyValue
  sink with ``commit_bucket``) into a stream whose duplicate window is ``WINDOW`` s, and
  it is started again only once that window has passed.

The fault is set off when the work is seen under way from outside (a reader's consumer
on the stream, the first rows stored), and what the work had done then is recorded: the
cell fails if it had already finished.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jetstream
from jetstream import StreamConfig
from jetstream.api import StorageType
from jetstream.embedded import NatsCluster, NatsServer
from tests import leaks
from tests.faults.proxy import FaultProxy

__all__ = ["CELLS_ALL", "CELLS_QUICK", "FAULTS", "PATHS", "Cell", "Rig", "run_cell", "run_job"]

PATHS = ("read", "stream", "sink", "writer", "kv")
FAULTS = ("sigstop", "restart", "leader", "blackhole", "worker", "driver", "window")
#: the paths that write (``window`` is theirs)
WRITING = ("sink", "writer", "kv")

N_READ = 200_000
FILES = 20
PER_FILE = 5_000
N_WRITE = FILES * PER_FILE
#: the ``timeout`` option of every path (requests, publishes): every fault outlasts it
TIMEOUT = 2.0
PAUSE = 6.0
BLACKHOLE = 12.0
#: a killed server or leader is started again after this
DOWN = 2.0
#: the duplicate window of the ``window`` cells' stream (the job is run again after it)
WINDOW = 1.0
#: the work must be seen under way within this, once the job started
START_BOUND = 240.0

#: where the stream or bucket each path reads or writes lives
TARGET = {"read": "SRC", "stream": "SRC", "sink": "OUT", "writer": "OUT", "kv": "KV_KVB"}

CONF = {
    "spark.ui.enabled": "false",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.sql.shuffle.partitions": "4",
    "spark.python.worker.reuse": "true",
    "spark.ui.showConsoleProgress": "false",
}

# the cells of ``make test``: one per path, the faults spread over them (the whole matrix:
# ``make spark-faults``)
CELLS_QUICK = [
    ("read", "sigstop", "classic"),
    ("stream", "restart", "classic"),
    ("sink", "blackhole", "classic"),
    ("writer", "worker", "classic"),
    ("kv", "leader", "classic"),
    ("stream", "driver", "classic"),
]
# the whole matrix, and Spark Connect where it takes another path: the driver side
# (planning, and the foreachBatch functions, run in the Connect server)
CELLS_ALL = [(p, f, "classic") for p in PATHS for f in FAULTS if f != "window" or p in WRITING] + [
    (p, f, "connect") for p in ("stream", "sink", "kv") for f in ("sigstop", "restart")
]


# -------------------------------------------------------------------------------- servers


class _ProxyThread:
    """A ``FaultProxy`` on an event loop of its own thread, for Spark's processes."""

    def __init__(self, port: int) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.proxy = self._call(FaultProxy(port).start())

    def _call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(30)

    @property
    def url(self) -> str:
        return self.proxy.url

    def blackhole(self, seconds: float) -> None:
        self.proxy.blackhole = True
        time.sleep(seconds)
        self.proxy.blackhole = False

    def close(self) -> None:
        self._call(self.proxy.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


class Rig:
    """The servers of one cell: a file-store server (behind a fault proxy for
    ``blackhole``), or a 3-node cluster for ``leader``; and the stream or bucket the
    path reads or writes, with its input."""

    def __init__(self, path: str, fault: str, workdir: Path) -> None:
        self.path, self.fault, self.workdir = path, fault, workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.server: NatsServer | None = None
        self.cluster: NatsCluster | None = None
        self.proxy: _ProxyThread | None = None
        if fault == "leader":
            self.cluster = NatsCluster(3).start()
        else:
            self.server = NatsServer().start()
            if fault == "blackhole":
                self.proxy = _ProxyThread(self.server.port)
        self.replicas = 3 if self.cluster else 1
        self.input = workdir / "input"
        self.out = workdir / "out"
        self.checkpoint = workdir / "checkpoint"

    @property
    def admin_url(self) -> str:
        """Where the test itself connects: the servers, never through the proxy."""
        return ",".join(self.cluster.urls) if self.cluster else self._server().url

    @property
    def url(self) -> str:
        """Where Spark connects."""
        return self.proxy.url if self.proxy else self.admin_url

    def _server(self) -> NatsServer:
        assert self.server is not None
        return self.server

    def close(self) -> None:
        if self.proxy is not None:
            self.proxy.close()
        if self.cluster is not None:
            self.cluster.close()
        if self.server is not None:
            self.server.close()

    # -- the data ------------------------------------------------------------------------

    def prepare(self, spark: Any) -> None:
        """The stream to read, or the input files and the stream or bucket to write."""

        async def go() -> None:
            async with jetstream.connect(self.admin_url.split(",")) as nc:
                js = nc.jetstream()
                if self.path in ("read", "stream"):
                    await js.create_stream(self._config("SRC", ["src.>"]))
                    for i in range(N_READ):
                        await js.publish_async("src.x", b"%07d" % i)
                    await js.publish_async_complete(timeout=120)
                elif self.path == "kv":
                    await js.create_key_value(
                        bucket="KVB", replicas=self.replicas, storage=StorageType.FILE
                    )
                    if self.fault == "window":
                        await js.create_key_value(bucket="KVREC", storage=StorageType.FILE)
                elif self.fault == "window":
                    config = self._config("OUT", ["out.>"], dedup=WINDOW)
                    config.allow_atomic = True
                    await js.create_stream(config)
                else:
                    await js.create_stream(self._config("OUT", ["out.>"], dedup=600.0))

        leaks.run(go())
        if self.path in ("sink", "writer", "kv"):
            (
                spark.range(N_WRITE)
                .selectExpr("id", "concat('row-', cast(id as string)) as value")
                .repartition(FILES, "id")
                .sortWithinPartitions("id")
                .write.mode("overwrite")
                .parquet(str(self.input))
            )

    def _config(self, name: str, subjects: list[str], dedup: float = 120.0) -> StreamConfig:
        return StreamConfig(
            name=name,
            subjects=subjects,
            storage=StorageType.FILE,
            num_replicas=self.replicas,
            duplicate_window=dedup,
        )

    # -- the fault -----------------------------------------------------------------------

    def under_way(self) -> str | None:
        """What the work has done, once it is seen under way (else None): the reader's
        consumer on the stream, the first rows stored."""

        async def go() -> str | None:
            async with jetstream.connect(self.admin_url.split(","), connect_timeout=2) as nc:
                stream = await nc.jetstream().stream(TARGET[self.path])
                state = stream.cached_info.state
                if self.path in ("read", "stream"):
                    if not state.consumer_count:
                        return None
                    return f"{state.consumer_count} reader(s) on {state.messages} messages"
                if not state.messages:
                    return None
                return f"{state.messages} of {N_WRITE} rows stored"

        try:
            return leaks.run(go())
        except jetstream.NatsError:
            return None

    def leader_of(self, name: str) -> int:
        assert self.cluster is not None

        async def go() -> str:
            async with jetstream.connect(self.cluster_urls()) as nc:
                info = await (await nc.jetstream().stream(name)).info()
                assert info.cluster is not None and info.cluster.leader
                return info.cluster.leader

        leader = leaks.run(go())
        return next(i for i, s in enumerate(self.cluster.servers) if s.server_name == leader)

    def cluster_urls(self) -> list[str]:
        assert self.cluster is not None
        return self.cluster.urls

    def strike(self) -> None:
        """The fault (not ``driver``, which the cell itself deals)."""
        if self.fault == "sigstop":
            server = self._server()
            server.pause()
            time.sleep(PAUSE)
            server.resume()
        elif self.fault == "restart":
            server = self._server()
            server.kill()
            time.sleep(DOWN)
            server.restart()
        elif self.fault == "leader":
            assert self.cluster is not None
            i = self.leader_of(TARGET[self.path])
            self.cluster.kill(i)
            time.sleep(DOWN)
            self.cluster.restart(i)
        elif self.fault == "blackhole":
            assert self.proxy is not None
            self.proxy.blackhole(BLACKHOLE)
        elif self.fault == "worker":
            if not kill_python_workers():
                raise AssertionError("no Python worker of Spark's was found to kill")
        else:
            raise ValueError(self.fault)

    # -- the output ----------------------------------------------------------------------

    def problems(self, spark: Any) -> list[str]:
        """What is wrong with the output (nothing: it is exact)."""
        if self.path == "read":
            got = json.loads((self.out / "result.json").read_text())
            want = {"rows": N_READ, "distinct": N_READ, "low": 1, "high": N_READ}
            return [] if got == want else [f"read {got}, not {want}"]
        if self.path == "stream":
            seqs = sorted(r[0] for r in spark.read.parquet(str(self.out)).collect())
            return _exact("sequences", seqs, list(range(1, N_READ + 1)))
        if self.path == "kv":
            return self._kv_problems()
        return self._out_problems()

    def _out_problems(self) -> list[str]:
        async def go() -> list[tuple[str, bytes]]:
            async with jetstream.connect(self.admin_url.split(",")) as nc:
                stream = await nc.jetstream().stream("OUT")
                total = stream.cached_info.state.messages
                out: list[tuple[str, bytes]] = []
                if not total:
                    return out
                oc = await stream.ordered_consumer()
                async with oc.messages(max_messages=5000) as it:
                    while len(out) < total:
                        m = await it.next(timeout=30)
                        out.append((m.headers.get("Nats-Msg-Id") or "", m.data))
                return out

        rows = leaks.run(go())
        if self.fault == "window":
            # rows named by position, in chunks with markers (on out.commits.>): the ids
            # are in the data
            rows = [(d[4:].decode(), d) for i, d in rows if d.startswith(b"row-")]
        problems = _exact("msg ids", sorted(int(i) for i, _ in rows), list(range(N_WRITE)))
        wrong = [i for i, data in rows if data != b"row-" + i.encode()]
        if wrong:
            problems.append(f"{len(wrong)} rows hold another value (first: id {wrong[0]})")
        return problems

    def _kv_problems(self) -> list[str]:
        async def go() -> dict[str, bytes]:
            async with jetstream.connect(self.admin_url.split(",")) as nc:
                kv = await nc.jetstream().key_value("KVB")
                last: dict[str, bytes] = {}
                async with kv.watch(">") as w:
                    async for entry in w:
                        if entry is None:
                            break
                        last[entry.key] = entry.value
                return last

        last = leaks.run(go())
        problems = _exact("keys", sorted(int(k[1:]) for k in last), list(range(N_WRITE)))
        wrong = [k for k, v in last.items() if v != b"row-" + k[1:].encode()]
        if wrong:
            problems.append(f"{len(wrong)} keys hold another value (first: {wrong[0]})")
        return problems


def _exact(what: str, got: list[int], want: list[int]) -> list[str]:
    if got == want:
        return []
    have = set(got)
    missing = [w for w in want if w not in have]
    dups = len(got) - len(have)
    return [
        f"{what}: {len(got)} of {len(want)}, {len(missing)} missing (first "
        f"{missing[:5]}), {dups} twice"
    ]


def kill_python_workers() -> int:
    """SIGKILL the Python workers that the daemons of this process's own Spark forked
    (the tasks' processes); the number killed. A daemon that does not descend from this
    process belongs to another test run's Spark (the Spark Connect server of the other
    pytest worker, say) and is left alone: killing its workers failed that run's tests."""
    daemons: set[int] = set()
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes()
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        if b"pyspark.daemon" in cmd:
            daemons.add(int(entry))
        parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    me = os.getpid()

    def ours(pid: int) -> bool:
        seen = 0
        while pid > 1 and seen < 64:
            if pid == me:
                return True
            pid = parents.get(pid, 0)
            seen += 1
        return False

    daemons = {d for d in daemons if ours(d)}
    killed = 0
    for pid, parent in parents.items():
        if parent in daemons:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except ProcessLookupError:
                pass
    return killed


# ---------------------------------------------------------------------------------- the jobs


def run_job(path: str, spark: Any, url: str, workdir: Path, commits: bool = False) -> None:
    """The job of ``path`` against the servers at ``url`` (its input under ``workdir``,
    its output and checkpoint there too); ``commits``: exactly once at any distance in
    time (``commit_subject``, ``commit_bucket``), rows named by position. Raises what the
    job raised."""
    from pyspark.sql import functions as F

    from jetstream.spark import foreach_batch_sink, kv_sink

    out, checkpoint, inp = workdir / "out", str(workdir / "checkpoint"), str(workdir / "input")
    common = {"servers": url, "timeout": str(TIMEOUT)}
    if path == "read":
        df = spark.read.format("jetstream").options(stream="SRC", **common).load()
        row = df.agg(
            F.count("*").alias("rows"),
            F.countDistinct("sequence").alias("distinct"),
            F.min("sequence").alias("low"),
            F.max("sequence").alias("high"),
        ).collect()[0]
        out.mkdir(parents=True, exist_ok=True)
        (out / "result.json").write_text(json.dumps(row.asDict()))
        return
    if path == "writer":
        named = (
            {"commit_subject": "out.commits", "job_id": "faults"} if commits else {"key_col": "id"}
        )
        (
            spark.read.parquet(inp)
            .write.format("jetstream")
            .options(subject="out.x", stream="OUT", value_col="value", **named, **common)
            .mode("append")
            .save()
        )
        return
    if path == "stream":
        target = str(out)

        def save(df: Any, batch_id: int) -> None:
            df.select("sequence").write.mode("overwrite").parquet(f"{target}/batch={batch_id}")

        source = (
            spark.readStream.format("jetstream")
            .options(stream="SRC", max_rows_per_batch=str(N_READ // 4), **common)
            .load()
        )
        writer = source.writeStream.foreachBatch(save)
    else:
        rows = spark.readStream.schema("id long, value string").option("maxFilesPerTrigger", 4)
        source = rows.parquet(inp)
        if path == "sink":
            how: dict[str, Any] = (
                {"commit_subject": "out.commits"} if commits else {"key_col": "id"}
            )
            sink = foreach_batch_sink(url, subject="out.x", stream="OUT", timeout=TIMEOUT, **how)
            writer = source.writeStream.foreachBatch(sink)
        else:
            keyed = source.selectExpr("concat('k', cast(id as string)) as key", "value")
            records = {"commit_bucket": "KVREC"} if commits else {}
            writer = keyed.writeStream.foreachBatch(
                kv_sink(url, bucket="KVB", timeout=TIMEOUT, **records)
            )
    query = writer.option("checkpointLocation", checkpoint).trigger(availableNow=True).start()
    query.awaitTermination()
    error = query.exception()
    if error is not None:
        raise RuntimeError(f"the query failed: {error}")


# --------------------------------------------------------------------------------- the cells


@dataclass
class Cell:
    path: str
    fault: str
    kind: str
    #: what the work had done when the fault hit
    landed: str = ""
    #: how the first run ended: "completed", or the loud failure
    first_run: str = ""
    #: the output's faults after the last run (none: exact)
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def name(self) -> str:
        return f"{self.path}|{self.fault}|{self.kind}"


def _strike_when_under_way(rig: Rig, cell: Cell, strike: Callable[[], None]) -> threading.Thread:
    """A thread that waits until the work is under way, records it and strikes."""

    def watch() -> None:
        deadline = time.monotonic() + START_BOUND
        while time.monotonic() < deadline:
            seen = rig.under_way()
            if seen is not None:
                cell.landed = seen
                strike()
                return
            time.sleep(0.02)
        cell.landed = "never: the work was not seen under way"

    thread = threading.Thread(target=watch, name=f"fault-{cell.name}", daemon=True)
    thread.start()
    return thread


def _in_process(rig: Rig, cell: Cell, spark: Any) -> None:
    fault = _strike_when_under_way(rig, cell, rig.strike)
    try:
        run_job(cell.path, spark, rig.url, rig.workdir)
        cell.first_run = "completed"
    except Exception as exc:
        cell.first_run = f"failed loudly: {type(exc).__name__}: {str(exc)[:300]}"
    finally:
        fault.join(START_BOUND + 120)
    if cell.first_run != "completed":
        run_job(cell.path, spark, rig.url, rig.workdir)


def _job_process(rig: Rig) -> subprocess.Popen[bytes]:
    """``fault_job.py`` as a driver process of its own (and its own process group)."""
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ)
    for var in ("SPARK_REMOTE", "SPARK_LOCAL_REMOTE", "SPARK_CONNECT_MODE_ENABLED"):
        env.pop(var, None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
    args = json.dumps(
        {
            "path": rig.path,
            "url": rig.url,
            "workdir": str(rig.workdir),
            "commits": rig.fault == "window",
        }
    )
    with (rig.workdir / "driver.log").open("ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.spark.fault_job", args],
            cwd=root,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _driver(rig: Rig, cell: Cell) -> None:
    """Kill the driver process (and its JVM and workers) mid-job, then run it again."""
    job = _job_process(rig)

    def kill() -> None:
        os.killpg(job.pid, signal.SIGKILL)

    fault = _strike_when_under_way(rig, cell, kill)
    try:
        code = job.wait(START_BOUND + 300)
    finally:
        fault.join(10)
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait(30)
    cell.first_run = "completed" if code == 0 else f"killed (exit {code})"
    if rig.fault == "window":
        time.sleep(WINDOW + 1.0)  # the stream has forgotten every id the first run sent
    again = _job_process(rig)
    if again.wait(START_BOUND + 300) != 0:
        tail = (rig.workdir / "driver.log").read_text(errors="replace")[-3000:]
        raise AssertionError(f"{cell.name}: the job run again failed:\n{tail}")


def run_cell(path: str, fault: str, kind: str, spark: Any, workdir: Path) -> Cell:
    """One cell: the servers, the data, the job with the fault, and the output checked."""
    cell = Cell(path, fault, kind)
    began = time.monotonic()
    rig = Rig(path, fault, workdir)
    try:
        rig.prepare(spark)
        if fault in ("driver", "window"):
            _driver(rig, cell)
        else:
            _in_process(rig, cell, spark)
        cell.problems = rig.problems(spark)
    finally:
        rig.close()
        cell.seconds = time.monotonic() - began
        shutil.rmtree(workdir, ignore_errors=True)
    return cell


def cells(which: str) -> Iterator[tuple[str, str, str]]:
    yield from CELLS_ALL if which == "all" else CELLS_QUICK
