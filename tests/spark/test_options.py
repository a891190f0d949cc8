"""Options and arguments the adapter does not know are refused, and its errors reach the
user as themselves.

Each format (the ``jetstream`` source and writer, the ``jetstream-kv`` writer) checks its
options against its table (``jetstream/spark/_options.py``) before anything is read or
sent: a misspelt option names the closest known one, one of Kafka's names ours. The
sinks tell an unknown keyword argument from a connect option that cannot be shipped to
executors. Errors raised through ``run_sync`` carry no stray context, and a stream reader
that cannot be made fails at its first call rather than under PySpark's own
``UnboundLocalError``.
"""

from __future__ import annotations

import asyncio
import pickle
import re
import ssl
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from jetstream.embedded import NatsServer
from jetstream.spark import SCHEMA, SparkConfigError, foreach_batch_sink, kv_sink, write_dataframe
from jetstream.spark._common import run_sync
from jetstream.spark._datasource import RefusedStreamReader
from jetstream.spark._kvwriter import KvWriteOptions
from jetstream.spark._options import KV_WRITE_OPTIONS, READ_OPTIONS, WRITE_OPTIONS
from jetstream.spark._readopts import ReadOptions
from jetstream.spark._writer import WriteOptions
from tests.spark.helpers import make_stream, stream_state

ROOT = Path(__file__).resolve().parents[2]
URL = "nats://127.0.0.1:1"  # parse never connects

Parse = Callable[[Mapping[str, str]], object]
FORMATS: dict[str, tuple[Parse, dict[str, str]]] = {
    "the jetstream source": (ReadOptions.parse, {"servers": URL, "stream": "S"}),
    "the jetstream writer": (WriteOptions.parse, {"servers": URL, "subject": "s"}),
    "the jetstream-kv writer": (KvWriteOptions.parse, {"servers": URL, "bucket": "b"}),
}


# --------------------------------------------------------------------------- the tables


@pytest.mark.parametrize(
    ("what", "option", "hint"),
    [
        ("the jetstream source", "max_row_per_batch", "did you mean max_rows_per_batch?"),
        ("the jetstream source", "end_sq", "did you mean end_seq?"),
        ("the jetstream source", "readtimeout", "did you mean read_timeout?"),
        ("the jetstream writer", "key_column", "did you mean key_col?"),
        ("the jetstream writer", "max_pendng", "did you mean max_pending?"),
        ("the jetstream-kv writer", "buckets", "did you mean bucket?"),
        ("the jetstream-kv writer", "value_column", "did you mean value_col?"),
    ],
)
def test_an_unknown_option_is_refused_with_the_closest_known(
    what: str, option: str, hint: str
) -> None:
    parse, required = FORMATS[what]
    message = f"unknown option of {what}: '{option}' ({hint})"
    with pytest.raises(SparkConfigError, match=re.escape(message)):
        parse({**required, option: "1"})
    # as Spark hands them over (lowercase) and as typed
    with pytest.raises(SparkConfigError, match=re.escape(f"'{option.lower()}'")):
        parse({**required, option.upper(): "1"})


def test_an_option_with_no_close_one_lists_the_known() -> None:
    with pytest.raises(SparkConfigError) as info:
        ReadOptions.parse({"servers": URL, "stream": "S", "zzz": "1"})
    assert str(info.value) == (
        "unknown option of the jetstream source: 'zzz'; its options: " + ", ".join(READ_OPTIONS)
    )


def test_every_unknown_option_is_named_at_once() -> None:
    with pytest.raises(SparkConfigError) as info:
        WriteOptions.parse({"servers": URL, "subject": "s", "key_column": "id", "retry": "2"})
    assert str(info.value) == (
        "unknown options of the jetstream writer: 'key_column' (did you mean key_col?); "
        "'retry' (did you mean retries?)"
    )


@pytest.mark.parametrize(
    ("what", "kafka", "ours"),
    [
        ("the jetstream source", "maxOffsetsPerTrigger", "max_rows_per_batch"),
        ("the jetstream source", "minOffsetsPerTrigger", "min_rows_per_batch"),
        ("the jetstream source", "maxTriggerDelay", "max_trigger_delay"),
        ("the jetstream source", "failOnDataLoss", "fail_on_data_loss"),
        ("the jetstream source", "startingOffsets", "start_seq or start_time"),
        ("the jetstream source", "startingTimestamp", "start_time"),
        ("the jetstream source", "endingOffsets", "end_seq"),
        ("the jetstream source", "kafka.bootstrap.servers", "servers"),
        ("the jetstream source", "subscribe", "stream"),
        ("the jetstream source", "minPartitions", "partitions"),
        ("the jetstream writer", "topic", "subject"),
        ("the jetstream writer", "kafka.bootstrap.servers", "servers"),
        ("the jetstream-kv writer", "topic", "bucket"),
        ("the jetstream-kv writer", "kafka.bootstrap.servers", "servers"),
    ],
)
def test_a_kafka_option_names_ours(what: str, kafka: str, ours: str) -> None:
    parse, required = FORMATS[what]
    for given in (kafka, kafka.lower()):  # Spark lowercases option names on some paths
        with pytest.raises(SparkConfigError) as info:
            parse({**required, given: "1"})
        assert str(info.value) == (
            f"unknown option of {what}: '{kafka.lower()}' (Kafka's {kafka}; here: {ours})"
        )


def test_kafka_names_without_an_equivalent_say_so() -> None:
    with pytest.raises(SparkConfigError, match=r"'subscribe' \(Kafka's subscribe; no such option"):
        KvWriteOptions.parse({"servers": URL, "bucket": "b", "subscribe": "t"})
    with pytest.raises(
        SparkConfigError, match=r"'kafka\.security\.protocol' \(a Kafka client setting; how to "
    ):
        ReadOptions.parse({"servers": URL, "stream": "S", "kafka.security.protocol": "SSL"})


@pytest.mark.parametrize("what", list(FORMATS))
def test_the_options_spark_adds_are_taken(what: str) -> None:
    """What Spark passes on its own (found by running each kind of read and write in a
    classic and a Spark Connect session): ``path``, ``paths``, and a streaming write's
    ``checkpointLocation`` and ``queryName``."""
    parse, required = FORMATS[what]
    spark_own = {
        "path": "/p",
        "paths": '["/a","/b"]',
        "checkpointLocation": "/c",
        "queryName": "q",
    }
    parse({**required, **spark_own})
    parse({**required, **{k.lower(): v for k, v in spark_own.items()}})


def test_read_timeout_is_an_option_of_the_source() -> None:
    assert ReadOptions.parse({"servers": URL, "stream": "S", "read_timeout": "5"}).read_timeout == 5


def _docs_table(heading: str) -> set[str]:
    """The option names of the first table of options after ``heading`` in
    docs/spark.md."""
    lines = (ROOT / "docs" / "spark.md").read_text().splitlines()
    start = next(
        i for i in range(lines.index(heading), len(lines)) if lines[i].startswith("| option ")
    )
    names: set[str] = set()
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        names.update(re.findall(r"`([a-z_]+)`", line.split("|")[1]))
    return names


@pytest.mark.parametrize(
    ("heading", "table"),
    [
        ("## Writing: the `jetstream` writer", WRITE_OPTIONS),
        ("### The `jetstream-kv` format", KV_WRITE_OPTIONS),
        ("## Reading: the `jetstream` source", READ_OPTIONS),
    ],
)
def test_the_docs_list_each_format_s_options(heading: str, table: tuple[str, ...]) -> None:
    assert _docs_table(heading) == set(table)


# --------------------------------------------------------------------------- the sinks


def test_an_unknown_argument_of_a_sink_is_named_as_such() -> None:
    with pytest.raises(SparkConfigError) as info:
        foreach_batch_sink(URL, subject="s", max_pendng=5)
    assert str(info.value) == "unknown argument 'max_pendng' (did you mean max_pending?)"
    with pytest.raises(SparkConfigError) as info:
        kv_sink(URL, bucket="b", bad=1)
    assert str(info.value) == (
        "unknown argument 'bad' (neither an argument here nor an option of jetstream.connect)"
    )
    # the closest of the function's own arguments and the connect options
    with pytest.raises(SparkConfigError, match=r"'buckett' \(did you mean bucket\?\)"):
        kv_sink(URL, bucket="b", buckett="c")
    with pytest.raises(SparkConfigError, match=r"'conect_timeout' \(did you mean connect_t"):
        foreach_batch_sink(URL, subject="s", conect_timeout=1)
    # write_dataframe passes its options on to foreach_batch_sink
    with pytest.raises(SparkConfigError, match=r"unknown argument 'max_pendng' \(did you mean"):
        write_dataframe(None, URL, key_col="id", max_pendng=1)  # type: ignore[arg-type]


def test_a_connect_option_that_cannot_be_pickled_says_so() -> None:
    with pytest.raises(SparkConfigError) as info:
        foreach_batch_sink(URL, subject="s", error_cb=print)
    assert str(info.value).startswith(
        "connect options ['error_cb'] cannot be given here: Spark ships the connect options "
        "to its executors, and callbacks, SSL contexts and tracers cannot be pickled"
    )
    with pytest.raises(SparkConfigError, match=r"\['tls'\] cannot be given here.*tls_ca"):
        kv_sink(URL, bucket="b", tls=ssl.create_default_context())
    # what can be pickled is taken
    foreach_batch_sink(URL, subject="s", user="u", password="p", reconnect_time_wait=0.1)


# --------------------------------------------------------------------------- errors


async def _fail() -> None:
    raise SparkConfigError("the real cause")


def _no_context(exc: BaseException) -> None:
    assert exc.__context__ is None
    assert exc.__cause__ is None
    text = "".join(traceback.format_exception(exc))
    assert "no running event loop" not in text
    assert "During handling" not in text
    assert text.rstrip().splitlines()[-1].endswith("SparkConfigError: the real cause")


def test_a_run_sync_error_carries_no_context() -> None:
    with pytest.raises(SparkConfigError) as info:
        run_sync(_fail())
    _no_context(info.value)


def test_a_run_sync_error_from_a_running_loop_carries_no_context() -> None:
    async def inside() -> None:
        run_sync(_fail())  # on a thread of its own: this thread's loop is running

    with pytest.raises(SparkConfigError) as info:
        asyncio.run(inside())
    _no_context(info.value)


def test_a_refused_stream_reader_raises_at_its_first_call() -> None:
    error = SparkConfigError("unknown option of the jetstream source: 'x'")
    reader = pickle.loads(pickle.dumps(RefusedStreamReader(error)))  # Spark ships it
    calls: list[Callable[[], object]] = [
        reader.initialOffset,
        reader.prepareForTriggerAvailableNow,
        reader.getDefaultReadLimit,
        lambda: reader.latestOffset({"seq": 1}, None),
        lambda: reader.partitions({"seq": 1}, {"seq": 2}),
    ]
    for call in calls:
        with pytest.raises(SparkConfigError, match="unknown option of the jetstream source"):
            call()
    reader.stop()  # what PySpark calls in its finally: nothing to raise


# --------------------------------------------------------------------------- in Spark


def _python_error(exc: BaseException) -> list[str]:
    """The lines of the Python error Spark carries in ``exc``'s message: from Spark's
    heading of the step that failed down to the traceback's last line, without what
    Spark adds after it (`` SQLSTATE: ...``, a streaming query's state, the JVM's stack
    trace in Spark Connect)."""
    lines = [line for line in str(exc).splitlines() if line.strip()]
    for i, line in enumerate(lines):
        if "SQLSTATE:" in line and not line.lstrip().startswith("jetstream"):
            return lines[:i]
        if line.startswith(("JVM stacktrace:", "=== Streaming Query ===")):
            return lines[:i]
    return lines


def _refused(where: str, option: str) -> str:
    """The ``match=`` of an unknown ``option`` refused by ``where`` (the format's name)."""
    return "SparkConfigError: " + re.escape(f"unknown option of the {where}: '{option}'")


def _only(exc: BaseException, cause: str) -> None:
    """``exc`` reports ``cause`` as the one error and as the traceback's last line."""
    text = str(exc)
    for stray in ("UnboundLocalError", "no running event loop", "During handling", "direct cause"):
        assert stray not in text, text
    lines = _python_error(exc)
    assert re.search(r"SparkConfigError: " + re.escape(cause), lines[-1]), text


def test_unknown_options_stop_each_format_at_its_start(
    spark: Any, module_nats_server: NatsServer, tmp_path: Path
) -> None:
    url = module_nats_server.url
    make_stream(url, "OPTS", ["opts.>"])

    def read(**options: str) -> Any:
        r = spark.read.format("jetstream").option("servers", url).option("stream", "OPTS")
        return r.options(**options)

    with pytest.raises(
        Exception,
        match=_refused("jetstream source", "max_row_per_batch"),
    ) as info:
        read(max_row_per_batch="100").load().collect()
    _only(info.value, "unknown option of the jetstream source: 'max_row_per_batch' (did you")
    with pytest.raises(Exception, match=_refused("jetstream source", "end_sq")) as info:
        read(end_sq="10").load().count()
    _only(info.value, "unknown option of the jetstream source: 'end_sq' (did you mean end_seq?)")

    def run(query: Any) -> None:
        try:
            query.awaitTermination(120)
        finally:
            query.stop()

    # a streaming read, with Spark asking for the schema (refused there) and with the
    # schema given (refused by the stream reader's first call, not by streamReader)
    headings = {
        None: "Failed to create Python data source instance",
        SCHEMA: "[PYTHON_STREAMING_DATA_SOURCE_RUNTIME_ERROR] Failed when Python streaming",
    }
    for given, heading in headings.items():
        r = spark.readStream.format("jetstream")
        if given is not None:
            r = r.schema(given)
        with pytest.raises(
            Exception,
            match=_refused("jetstream source", "maxoffsetspertrigger"),
        ) as info:
            r = r.option("servers", url).option("stream", "OPTS").option("maxOffsetsPerTrigger", 5)
            df = r.load()
            ckpt = tmp_path / f"ckpt-{given is None}"
            run(df.writeStream.format("noop").option("checkpointLocation", str(ckpt)).start())
        _only(
            info.value,
            "unknown option of the jetstream source: 'maxoffsetspertrigger' (Kafka's "
            "maxOffsetsPerTrigger; here: max_rows_per_batch)",
        )
        assert heading in _python_error(info.value)[0]
    df = spark.range(3).selectExpr("cast(id as string) as id", "cast(id as string) as value")
    w = df.write.format("jetstream").mode("append").option("servers", url)
    with pytest.raises(Exception, match=_refused("jetstream writer", "key_column")) as info:
        w.option("subject", "opts.a").option("key_column", "id").save()
    _only(info.value, "unknown option of the jetstream writer: 'key_column' (did you mean key_col")
    stream = spark.readStream.format("rate").load().selectExpr("cast(value as string) as value")
    with pytest.raises(Exception, match=_refused("jetstream writer", "topic")) as info:
        run(
            stream.writeStream.format("jetstream")
            .option("servers", url)
            .option("subject", "opts.a")
            .option("topic", "opts.a")
            .option("checkpointLocation", str(tmp_path / "wckpt"))
            .start()
        )
    _only(info.value, "unknown option of the jetstream writer: 'topic' (Kafka's topic; here: sub")
    kv = df.selectExpr("id as key", "value").write.format("jetstream-kv").mode("append")
    with pytest.raises(
        Exception,
        match=_refused("jetstream-kv writer", "kafka.bootstrap.servers"),
    ) as info:
        kv.option("servers", url).option("bucket", "b").option(
            "kafka.bootstrap.servers", "x"
        ).save()
    _only(
        info.value,
        "unknown option of the jetstream-kv writer: 'kafka.bootstrap.servers' (Kafka's "
        "kafka.bootstrap.servers; here: servers)",
    )
    assert stream_state(url, "OPTS") == (0, 0)  # nothing was written


def test_what_spark_prints_for_a_missing_stream(spark: Any, module_nats_server: NatsServer) -> None:
    """The Python error Spark reports is ours alone, and its last line names the cause.

    What remains is Spark's: its first line is Spark's heading of the step that failed,
    ending in ``Traceback (most recent call last):`` (PySpark formats a data source's
    error as its traceback, simplified, which drops any exception chained before it); and
    after the traceback Spark adds `` SQLSTATE: 38000`` (and, in Spark Connect, the JVM's
    stack trace)."""
    url = module_nats_server.url
    with pytest.raises(Exception, match="stream 'NOPE' does not exist") as info:
        spark.read.format("jetstream").option("servers", url).option(
            "stream", "NOPE"
        ).load().collect()
    cause = f"stream='NOPE': stream 'NOPE' does not exist on {url}"
    _only(info.value, cause)
    lines = _python_error(info.value)
    assert lines[0] == (
        "[PYTHON_DATA_SOURCE_ERROR] Failed to generate Python data source read partitions: "
        "Traceback (most recent call last):"
    )
    assert sum(cause in line for line in lines) == 1
