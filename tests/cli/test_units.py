"""The CLI's helpers in-process: durations, sizes, redaction, tables, argument parsing."""

from __future__ import annotations

import pytest

from jetstream.cli import build_parser
from jetstream.cli._output import Output
from jetstream.cli._util import (
    fmt_bytes,
    fmt_duration,
    one_line,
    parse_duration,
    parse_header,
    parse_size,
    redact_url,
)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90", 90), ("1.5s", 1.5), ("500ms", 0.5), ("1h30m", 5400), ("2d", 172800), ("1m 5s", 65)],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "^empty duration$"),
        ("soon", r"^not a duration: 'soon' \(try 30s"),
        ("5x", r"^not a duration: '5x' \(try 30s"),
        ("1h-", r"^not a duration: '1h-' \(try 30s"),
    ],
)
def test_parse_duration_refuses(text: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        parse_duration(text)


def test_sizes_and_formats() -> None:
    assert parse_size("512") == 512
    assert parse_size("1KB") == parse_size("1KiB") == parse_size("1k") == 1024
    assert parse_size("10MiB") == 10 * 1024**2
    assert parse_size("-1") == -1
    with pytest.raises(ValueError, match=r"not a size: 'lots' \(try 512"):
        parse_size("lots")
    assert fmt_bytes(1536) == "1.5 KiB"
    assert fmt_duration(5400) == "1h30m"
    assert fmt_duration(0) == "-"
    assert parse_header("k: v") == ("k", "v")
    with pytest.raises(ValueError, match="a header is KEY:VALUE, not 'novalue'"):
        parse_header("novalue")


def test_secrets_never_shown() -> None:
    assert redact_url("nats://bob:pw@host:4222,nats://other:4222") == (
        "nats://***@host:4222,nats://other:4222"
    )
    assert one_line(ValueError("bad\npassword hunter2"), ["hunter2"]) == "bad password ***"


def test_plain_table(capsys: pytest.CaptureFixture[str]) -> None:
    Output(plain=True).table("T", ["Name", "N"], [["a", 1], ["long", 200]], right=(1,))
    assert capsys.readouterr().out.splitlines() == [
        "T",
        "",
        "Name    N",
        "----  ---",
        "a       1",
        "long  200",
    ]


def test_options_before_and_after_the_verb(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NATS_URL", "nats://env:4222")
    monkeypatch.setenv("NATS_PASSWORD", "from-env")
    args = build_parser().parse_args(["stream", "ls"])
    assert (args.server, args.password, args.timeout, args.json) == (
        "nats://env:4222",
        "from-env",
        5.0,
        False,
    )
    args = build_parser().parse_args(
        ["--json", "-s", "nats://a:1", "stream", "ls", "--timeout", "1m"]
    )
    assert (args.server, args.timeout, args.json) == ("nats://a:1", 60.0, True)
    args = build_parser().parse_args(["stream", "ls", "--server", "nats://b:2"])
    assert args.server == "nats://b:2"
