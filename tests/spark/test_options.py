"""Options and arguments the adapter does not know are refused, and its errors reach the
user as themselves.

Each format (the ``jetstream`` source and writer, the ``jetstream-kv`` writer) checks its
options against its table (``jetstream/spark/_options.py``) before anything is read or
sent: a misspelt option names the closest known one, one of Kafka's names ours. The
sinks tell an unknown keyword argument from a connect option that cannot be shipped to
executors. Errors raised through ``run_sync`` carry no stray context.
"""

from __future__ import annotations

import asyncio
import re
import ssl
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from jetstream.spark import SparkConfigError, foreach_batch_sink, kv_sink, write_dataframe
from jetstream.spark._common import run_sync
from jetstream.spark._kvwriter import KvWriteOptions
from jetstream.spark._options import KV_WRITE_OPTIONS, READ_OPTIONS, WRITE_OPTIONS
from jetstream.spark._readopts import ReadOptions
from jetstream.spark._writer import WriteOptions

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
