"""The options of the adapter's Spark formats, one table each, and the check that refuses
a name in none of them: the ``jetstream`` source (``spark.read`` / ``spark.readStream``),
the ``jetstream`` writer (``df.write`` / ``df.writeStream``) and the ``jetstream-kv``
writer. Each format's ``parse`` checks its options first, so that a misspelt option (or
one of Kafka's) fails the query at ``.load()``, ``.save()`` or ``.start()``, before
anything is read or sent, instead of being ignored."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from ._common import CONNECT_OPTIONS, SparkConfigError, did_you_mean

__all__ = ["KV_WRITE_OPTIONS", "READ_OPTIONS", "SPARK_OPTIONS", "WRITE_OPTIONS", "check_options"]

#: the ``jetstream`` source's options (see ``_source``)
READ_OPTIONS = (
    "servers",
    "stream",
    "subjects",
    "start_seq",
    "start_time",
    "end_seq",
    "max_rows_per_batch",
    "max_bytes_per_batch",
    "min_rows_per_batch",
    "max_trigger_delay",
    "fail_on_data_loss",
    "partitions",
    "read_timeout",
    "headers_format",
    *CONNECT_OPTIONS,
)

#: the ``jetstream`` writer's options (see ``_writer``)
WRITE_OPTIONS = (
    "servers",
    "subject",
    "subject_col",
    "stream",
    "value_col",
    "key_col",
    "headers_cols",
    "headers_col",
    "max_pending",
    "retries",
    "write_timeout",
    "min_duplicate_window",
    "commit_subject",
    "job_id",
    "report_subject",
    "traceparent",
    "tracestate",
    *CONNECT_OPTIONS,
)

#: the ``jetstream-kv`` writer's options (see ``_kvwriter``)
KV_WRITE_OPTIONS = (
    "servers",
    "bucket",
    "key_col",
    "value_col",
    "max_pending",
    "retries",
    "commit_bucket",
    "job_id",
    *CONNECT_OPTIONS,
)

#: what Spark itself adds to a data source's options, in classic and Spark Connect
#: sessions alike: ``path`` (``load(p)``, ``save(p)``, ``start(p)``), ``paths``
#: (``load(p, q)``), and for a streaming write ``checkpointLocation`` and ``queryName``.
#: Every format takes them and leaves them to Spark.
SPARK_OPTIONS = frozenset({"path", "paths", "checkpointlocation", "queryname"})

# Kafka's options (of Spark's Kafka source and sink), by their lowercase names, with
# their spelling and what they are called here (the first of these a format has)
_KAFKA = {
    name.lower(): (name, ours)
    for name, ours in (
        ("kafka.bootstrap.servers", ("servers",)),
        ("subscribe", ("stream",)),
        ("subscribePattern", ("stream", "subjects")),
        ("assign", ("stream",)),
        ("topic", ("subject", "bucket")),
        ("startingOffsets", ("start_seq", "start_time")),
        ("startingTimestamp", ("start_time",)),
        ("startingOffsetsByTimestamp", ("start_time",)),
        ("endingOffsets", ("end_seq",)),
        ("maxOffsetsPerTrigger", ("max_rows_per_batch",)),
        ("minOffsetsPerTrigger", ("min_rows_per_batch",)),
        ("maxTriggerDelay", ("max_trigger_delay",)),
        ("failOnDataLoss", ("fail_on_data_loss",)),
        ("minPartitions", ("partitions",)),
        ("kafkaConsumer.pollTimeoutMs", ("read_timeout",)),
    )
}


_CONNECT = ("servers", *CONNECT_OPTIONS)


def _hint(name: str, known: Collection[str]) -> str:
    """What to say of the unknown option ``name``: ours for a Kafka name, else the
    closest known option."""
    kafka = _KAFKA.get(name)
    if kafka is not None:
        spelt, ours = kafka
        here = [o for o in ours if o in known]
        if here:
            return f" (Kafka's {spelt}; here: {' or '.join(here)})"
        return f" (Kafka's {spelt}; no such option here)"
    if name.startswith("kafka."):
        return f" (a Kafka client setting; how to connect here: {', '.join(_CONNECT)})"
    return did_you_mean(name, known)


def check_options(options: Mapping[str, str], known: Collection[str], what: str) -> None:
    """Refuse the ``options`` (lowercase names) that are neither in ``known`` nor Spark's
    own: a ``SparkConfigError`` naming each, with the closest known option (for a Kafka
    option: ours). ``what`` names the format in the message ("the jetstream source")."""
    unknown = sorted(set(options) - set(known) - SPARK_OPTIONS)
    if not unknown:
        return
    hints = [(name, _hint(name, known)) for name in unknown]
    said = "; ".join(f"{name!r}{hint}" for name, hint in hints)
    plural = "s" if len(unknown) > 1 else ""
    message = f"unknown option{plural} of {what}: {said}"
    if not all(hint for _, hint in hints):
        message += f"; its options: {', '.join(known)}"
    raise SparkConfigError(message)
