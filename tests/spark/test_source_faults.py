"""The source's range reader and planning through faults, without Spark: a task's read
and the driver's planning wait through a server paused longer than the connection's
``timeout`` and through a kill -9 and restart, fail loudly after ``read_timeout``, and
end a range early only when the stream's state proves the rest is gone.

(The same faults under real Spark jobs, for every path: ``test_faults.py``.)"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import jetstream
from jetstream import StreamConfig
from jetstream.api import StorageType
from jetstream.embedded import NatsServer
from jetstream.spark import SparkConfigError, SparkDataLossError
from jetstream.spark._common import SparkReadTimeoutError
from jetstream.spark._range import RangeReader, read_rows
from jetstream.spark._readopts import ReadOptions
from jetstream.spark._source import StreamReader
from tests import leaks
from tests.spark.helpers import publish

N = 30_000


@pytest.fixture
def server() -> Iterator[NatsServer]:
    with NatsServer() as srv:
        yield srv


def file_stream(url: str, name: str, n: int) -> None:
    """A file-store stream ``name`` on ``<name>.>`` with ``n`` messages (sequences 1..n)."""

    async def go() -> None:
        async with jetstream.connect(url) as nc:
            await nc.jetstream().create_stream(
                StreamConfig(name=name, subjects=[f"{name}.>"], storage=StorageType.FILE)
            )

    leaks.run(go())
    publish(url, f"{name}.x", [b"%06d" % i for i in range(n)])


def opts(url: str, stream: str, **more: str) -> ReadOptions:
    # a short connection timeout: a pause of a few seconds outlasts it
    return ReadOptions.parse({"servers": url, "stream": stream, "timeout": "1", **more})


def read_with_fault(
    o: ReadOptions, end: int, fault: Callable[[], None], at: int = 1000, thread: bool = True
) -> list[int]:
    """The sequences of ``[1, end)`` as a task reads them, with ``fault`` run once ``at``
    rows were read: in a thread of its own, or with ``thread=False`` before the next row
    is taken (a fault that must land before the read runs further ahead)."""
    seqs: list[int] = []
    faulting: threading.Thread | None = None
    rows = read_rows(o, 1, end)
    try:
        for row in rows:
            seqs.append(row[3])
            if len(seqs) == at:
                if thread:
                    faulting = threading.Thread(target=fault)
                    faulting.start()
                else:
                    fault()
    finally:
        rows.close()
        if faulting is not None:
            faulting.join()
    return seqs


def test_a_pause_longer_than_the_timeout_is_waited_through(server: NatsServer) -> None:
    """The reported failure: a server frozen past the connection's timeout mid-range. The
    read waits, the ordered consumer is made again, and every row comes once."""
    file_stream(server.url, "P", N)

    def freeze() -> None:
        server.pause()
        time.sleep(4)  # four times the timeout
        server.resume()

    assert read_with_fault(opts(server.url, "P"), N + 1, freeze) == list(range(1, N + 1))


def test_a_kill_and_restart_is_waited_through(server: NatsServer) -> None:
    file_stream(server.url, "K", N)

    def restart() -> None:
        server.kill()
        time.sleep(1)
        server.restart()

    assert read_with_fault(opts(server.url, "K"), N + 1, restart) == list(range(1, N + 1))


def test_a_pause_past_read_timeout_fails_loudly_and_a_rerun_is_exact(
    server: NatsServer,
) -> None:
    # The server is paused at the 1,000th row, before the next is taken. By then the
    # reader can hold no more than its chunks ahead (1,000 + 2,000 + 4,000 + 8,000) and
    # what two pulls of 16,384 brought, fewer than the range's 60,000: the rest must wait
    # for the server. (A pause from a thread, on a loaded machine, came after all of a
    # range of 30,000 was in, and nothing timed out.)
    n = 60_000
    file_stream(server.url, "T", n)
    o = opts(server.url, "T", read_timeout="3s")
    with pytest.raises(SparkReadTimeoutError) as err:
        try:
            read_with_fault(o, n + 1, server.pause, thread=False)
        finally:
            server.resume()
    text = str(err.value)
    assert f"stream 'T', sequences 1-{n} ({n} in all; " in text
    assert "rows read, up to sequence" in text
    assert "read_timeout=3s" in text
    assert read_with_fault(o, n + 1, lambda: None) == list(range(1, n + 1))


def _opened(o: ReadOptions, first: int, end: int) -> tuple[RangeReader, Any]:
    """A reader of ``[first, end)`` opened on its own loop (and the loop)."""
    import asyncio

    loop = asyncio.new_event_loop()
    reader = RangeReader(o, first, end)
    loop.run_until_complete(reader.open())
    return reader, loop


def _change(url: str, stream: str, how: Callable[[Any], Any]) -> None:
    async def go() -> None:
        async with jetstream.connect(url) as nc:
            await how(await nc.jetstream().stream(stream))

    leaks.run(go())


def _rest_gone(o: ReadOptions, next_seq: int, change: Callable[[Any], Any]) -> tuple[bool, int]:
    """Open a reader of ``[1, 201)`` of stream ``o.stream`` (200 messages), as if read up
    to ``next_seq``, apply ``change`` to the stream, and ask the reader whether the
    stream proves the rest gone: (the answer, sequences counted lost)."""
    reader, loop = _opened(o, 1, 201)
    try:
        reader.next_seq = next_seq  # as if the rows before it were read
        _change(o.conn.servers[0], o.stream, change)
        return loop.run_until_complete(reader.rest_is_gone()), reader.lost
    finally:
        loop.run_until_complete(reader.close())
        loop.close()


async def _delete_from(stream: Any, first: int) -> None:
    for seq in range(first, 201):
        await stream.delete_msg(seq)


def test_the_rest_of_a_range_is_gone_only_when_the_stream_says_so(server: NatsServer) -> None:
    """Nothing arriving is never taken as "nothing there": the reader asks the stream.
    Messages left in the range: not gone. The rest deleted: gone (absent, not lost). A
    purge or the stream made again: gone and lost (raised, or counted)."""
    url = server.url

    async def nothing(stream: Any) -> None:
        pass

    for name, change, expected in [
        ("LEFT", nothing, (False, 0)),
        ("DELETED", lambda s: _delete_from(s, 101), (True, 0)),
        ("SOME", lambda s: _delete_from(s, 150), (False, 0)),
        ("PURGED", lambda s: s.purge(), (True, 100)),
    ]:
        file_stream(url, name, 200)
        assert _rest_gone(opts(url, name, fail_on_data_loss="false"), 101, change) == expected, name
    file_stream(url, "LOUD", 200)
    with pytest.raises(SparkDataLossError, match="sequences 101-200 were removed"):
        _rest_gone(opts(url, "LOUD"), 101, lambda s: s.purge())

    async def remake(stream: Any) -> None:
        js = stream.js
        await js.delete_stream(stream.name)
        await js.create_stream(StreamConfig(name=stream.name, subjects=["REMADE.>"]))

    file_stream(url, "REMADE", 200)
    with pytest.raises(SparkDataLossError, match="sequences 101-200 were lost: the stream was"):
        _rest_gone(opts(url, "REMADE"), 101, remake)


def test_planning_waits_through_a_pause_and_fails_loudly_after_read_timeout(
    server: NatsServer,
) -> None:
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    file_stream(server.url, "PL", 100)
    planner = StreamReader(opts(server.url, "PL", read_timeout="30s"))
    assert planner.initialOffset() == {"seq": 1}
    timer = threading.Timer(4, server.resume)
    server.pause()
    timer.start()
    try:
        assert planner.latestOffset({"seq": 1}, ReadAllAvailable()) == {"seq": 101}
    finally:
        timer.join()
    impatient = StreamReader(opts(server.url, "PL", read_timeout="2s"))
    impatient.initialOffset()
    server.pause()
    try:
        with pytest.raises(SparkReadTimeoutError, match="stream 'PL': planning the next batch"):
            impatient.latestOffset({"seq": 1}, ReadAllAvailable())
    finally:
        server.resume()


def test_the_first_contact_with_a_wrong_address_fails_at_once() -> None:
    planner = StreamReader(opts("nats://127.0.0.1:1", "S", read_timeout="5m"))
    began = time.monotonic()
    with pytest.raises(SparkConfigError, match="cannot connect to NATS"):
        planner.initialOffset()
    assert time.monotonic() - began < 60  # not read_timeout


def test_gaps_a_task_skips_are_counted_in_the_next_offset(
    server: NatsServer, caplog: pytest.LogCaptureFixture
) -> None:
    """With fail_on_data_loss=false, the head of a range removed between the planning and
    the task's read: the task skips it and tells the driver, and the next batch's offset
    counts it in ``lost`` (once, though the task ran twice), with a warning logged where
    the query is planned."""
    import pickle

    from pyspark.sql.streaming.datasource import ReadAllAvailable

    url = server.url
    file_stream(url, "GAP", 80)
    planner = StreamReader(opts(url, "GAP", fail_on_data_loss="false"))
    try:
        assert planner.initialOffset() == {"seq": 1}
        first = planner.latestOffset({"seq": 1}, ReadAllAvailable())
        assert first == {"seq": 81}
        (part,) = planner.partitions({"seq": 1}, first)
        _change(url, "GAP", lambda s: s.purge(seq=31))
        executor = pickle.loads(pickle.dumps(planner))  # as Spark ships it to a task
        with caplog.at_level("WARNING", logger="jetstream.spark"):
            for _ in range(2):  # the task, and the same task run again
                seqs = [s for b in executor.read(part) for s in b.column("sequence").to_pylist()]
                assert seqs == list(range(31, 81))
        publish(url, "GAP.x", [b"more"] * 10)
        assert planner.latestOffset(first, ReadAllAvailable()) == {"seq": 91, "lost": 30}
        assert planner.latestOffset({"seq": 91, "lost": 30}, ReadAllAvailable()) == {
            "seq": 91,
            "lost": 30,
        }
    finally:
        planner.stop()
    found = [r.getMessage() for r in caplog.records if "skipped by a task" in r.getMessage()]
    assert found == [
        "stream 'GAP': sequences 1-30 were removed (limits or a purge) before this query read "
        "them; skipped by a task (fail_on_data_loss=false)"
    ]
