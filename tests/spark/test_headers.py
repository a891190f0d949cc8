"""Headers kept as they are: the source's ``headers_format=array`` gives every value of a
header (``map<string,array<string>>``), and the writer's and the sink's ``headers_col``
send such a map (or a ``map<string,string>``) back as headers, each value on its own."""

from __future__ import annotations

from typing import Any

import pytest

import jetstream
from jetstream.embedded import NatsServer
from jetstream.spark import SparkConfigError, foreach_batch_sink
from tests import leaks
from tests.spark.helpers import classic_only, make_stream

# a header given twice, and a value holding a comma: joined, the two cannot be told apart
TWICE = [("Tag", "a, b"), ("Tag", "c"), ("One", "x")]
PLAIN = 300  # messages without headers around them: the source's bulk parser takes those


def _publish(url: str, subject: str) -> None:
    async def go() -> None:
        async with jetstream.connect(url) as nc:
            js = nc.jetstream()
            for i in range(PLAIN):
                await js.publish(subject, f"p{i}".encode())
            await js.publish(subject, b"h", headers=jetstream.Headers(TWICE))
            for i in range(PLAIN, 2 * PLAIN):
                await js.publish(subject, f"p{i}".encode())

    leaks.run(go())


def _headers(url: str, stream: str) -> list[tuple[str, list[tuple[str, str]]]]:
    """Each message's data and its headers, every value of each, in order."""

    async def go() -> list[tuple[str, list[tuple[str, str]]]]:
        async with jetstream.connect(url) as nc:
            s = await nc.jetstream().stream(stream)
            info = await s.info()
            out = []
            for seq in range(info.state.first_seq, info.state.last_seq + 1):
                m = await s.get_msg(seq)
                h = m.headers
                out.append((m.data.decode(), [(k, v) for k in h for v in h.get_all(k)]))
            return out

    return leaks.run(go())


def _read(spark: Any, url: str, stream: str, **options: str) -> Any:
    r = spark.read.format("jetstream").option("servers", url).option("stream", stream)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def test_source_gives_every_value_and_the_writer_sends_them_back(
    spark: Any, module_nats_server: NatsServer
) -> None:
    url = module_nats_server.url
    make_stream(url, "HDRIN", ["hdr.in"])
    make_stream(url, "HDROUT", ["hdr.out"])
    _publish(url, "hdr.in")
    joined = _read(spark, url, "HDRIN")
    assert joined.schema["headers"].dataType.simpleString() == "map<string,string>"
    row = joined.where("headers is not null").collect()
    assert [r.headers for r in row] == [{"Tag": "a, b, c", "One": "x"}]  # lossy
    arrays = _read(spark, url, "HDRIN", headers_format="array")
    assert arrays.schema["headers"].dataType.simpleString() == "map<string,array<string>>"
    rows = arrays.orderBy("sequence").collect()
    assert len(rows) == 2 * PLAIN + 1
    assert [r.headers for r in rows if r.headers] == [{"Tag": ["a, b", "c"], "One": ["x"]}]
    assert sum(1 for r in rows if r.headers is None) == 2 * PLAIN
    # back to a stream as they came, each value a header line of its own
    (
        arrays.selectExpr("data as value", "headers")
        .write.format("jetstream")
        .mode("append")
        .option("servers", url)
        .option("subject", "hdr.out")
        .option("job_id", "copy-1")
        .option("headers_col", "headers")
        .save()
    )
    got = _headers(url, "HDROUT")
    assert len(got) == 2 * PLAIN + 1
    with_headers = [(d, [h for h in hs if h[0] != "Nats-Msg-Id"]) for d, hs in got]
    assert [(d, hs) for d, hs in with_headers if hs] == [("h", TWICE)]


@classic_only
def test_sink_headers_col_in_both_write_paths(spark: Any, module_nats_server: NatsServer) -> None:
    url = module_nats_server.url
    make_stream(url, "HDRSINK", ["hs.rows", "hs.c.>"], allow_atomic=True)
    df = spark.createDataFrame(
        [
            ("v0", {"Tag": ["a, b", "c"]}, "t0"),
            ("v1", {"Tag": ["d"], "Empty": []}, "t1"),
            ("v2", None, "t2"),
        ],
        "value string, headers map<string,array<string>>, tenant string",
    ).coalesce(1)
    opts: dict[str, Any] = dict(subject="hs.rows", stream="HDRSINK", headers_col="headers")
    # by message id, and in commit chunks; a headers_cols column wins over the map's entry
    foreach_batch_sink(url, headers_cols=["tenant"], **opts).write(df, "ids")
    foreach_batch_sink(url, commit_subject="hs.c", **opts).write(df, "chunks")
    # (the Nats- headers of the id and of the atomic batch apart)
    rows = [
        (d, [h for h in hs if not h[0].startswith("Nats-")]) for d, hs in _headers(url, "HDRSINK")
    ]
    rows = [r for r in rows if r[0].startswith("v")]
    assert rows == [
        ("v0", [("Tag", "a, b"), ("Tag", "c"), ("tenant", "t0")]),
        ("v1", [("Tag", "d"), ("tenant", "t1")]),
        ("v2", [("tenant", "t2")]),
        ("v0", [("Tag", "a, b"), ("Tag", "c")]),
        ("v1", [("Tag", "d")]),
        ("v2", []),
    ]
    # a map of strings is taken too
    flat = spark.createDataFrame([("v9", {"Tag": "z"})], "value string, headers map<string,string>")
    foreach_batch_sink(url, **opts).write(flat, "flat")
    last, headers = _headers(url, "HDRSINK")[-1]
    assert (last, [h for h in headers if h[0] == "Tag"]) == ("v9", [("Tag", "z")])


@classic_only
def test_headers_options_refused_where_they_cannot_hold(
    spark: Any, module_nats_server: NatsServer
) -> None:
    url = module_nats_server.url
    make_stream(url, "HDRBAD", ["hb"])
    with pytest.raises(Exception, match=r"option headers_format='lists': give 'joined'"):
        _read(spark, url, "HDRBAD", headers_format="lists").collect()
    df = spark.createDataFrame([("v", 1)], "value string, headers int")
    with pytest.raises(SparkConfigError, match=r"headers_col='headers' is a int column"):
        foreach_batch_sink(url, subject="hb", headers_col="headers").write(df, "j")
    with pytest.raises(SparkConfigError, match=r"headers_col='nope' is not a column"):
        foreach_batch_sink(url, subject="hb", headers_col="nope").write(df, "j")
