"""counter add|get, and stream add --allow-counter/--allow-schedules/--allow-msg-ttl,
text and --json."""

from __future__ import annotations

import json

from .conftest import Cli


def test_counter_lifecycle(cli: Cli) -> None:
    made = json.loads(
        cli("stream", "add", "CLICNT", "--subjects", "cnt.>", "--allow-counter", "--json").stdout
    )
    assert made["config"]["allow_msg_counter"] is True
    assert "Counters: True" in cli("stream", "info", "CLICNT", "--plain").stdout

    assert cli("counter", "add", "CLICNT", "cnt.hits").stdout == "CLICNT > cnt.hits = 1\n"
    assert cli("counter", "add", "CLICNT", "cnt.hits", "41").stdout == "CLICNT > cnt.hits = 42\n"
    # a negative number is a value, not an option
    assert "cnt.hits = 40" in cli("counter", "add", "CLICNT", "cnt.hits", "-2").stdout
    big = str(10**30)
    added = json.loads(cli("counter", "add", "CLICNT", "cnt.big", big, "--json").stdout)
    assert added == {"stream": "CLICNT", "subject": "cnt.big", "value": big}
    once = ("counter", "add", "CLICNT", "cnt.once", "5", "--msg-id", "c-1")
    assert "= 5" in cli(*once).stdout and "= 5" in cli(*once).stdout

    assert cli("counter", "get", "CLICNT", "cnt.hits").stdout == "CLICNT > cnt.hits = 40\n"
    assert cli("counter", "get", "CLICNT", "cnt.hits", "--raw").stdout == "40\n"
    one = json.loads(cli("counter", "get", "CLICNT", "cnt.big", "--json").stdout)
    assert one == {"stream": "CLICNT", "subject": "cnt.big", "value": big, "increment": big}
    many = json.loads(cli("counter", "get", "CLICNT", "--json").stdout)
    assert [(d["subject"], d["value"]) for d in many] == [
        ("cnt.hits", "40"),
        ("cnt.big", big),
        ("cnt.once", "5"),
    ]
    assert cli("counter", "get", "CLICNT", "cnt.hits", "cnt.once", "--raw").stdout == (
        "cnt.hits 40\ncnt.once 5\n"
    )
    table = cli("counter", "get", "CLICNT", "cnt.*", "--plain").stdout
    assert "Counters of CLICNT (3)" in table and "cnt.big" in table

    missing = cli.spawn("counter", "get", "CLICNT", "cnt.none")
    outside = cli.spawn("counter", "add", "CLICNT", "other.a", "1")
    not_int = cli.spawn("counter", "add", "CLICNT", "cnt.hits", "1.5")
    assert "no counter on 'cnt.none'" in missing.wait(1).stderr
    assert "does not store 'other.a'" in outside.wait(1).stderr
    assert "not a whole number" in not_int.wait(2).stderr
    cli("stream", "rm", "CLICNT")


def test_a_stream_that_is_not_a_counter(cli: Cli) -> None:
    cli("stream", "add", "CLIPLAIN", "--subjects", "plain.>")
    err = cli("counter", "add", "CLIPLAIN", "plain.a", status=1).stderr
    assert "not a counter stream" in err and "allow_msg_counter" in err
    cli("stream", "rm", "CLIPLAIN")


def test_stream_add_with_schedules_and_ttls(cli: Cli) -> None:
    made = json.loads(
        cli(
            "stream",
            "add",
            "CLISCH",
            "--subjects",
            "sch.>,out.>",
            "--allow-schedules",
            "--allow-msg-ttl",
            "--json",
        ).stdout
    )
    assert made["config"]["allow_msg_schedules"] is True
    assert made["config"]["allow_msg_ttl"] is True
    info = cli("stream", "info", "CLISCH", "--plain").stdout
    assert "Schedules: True" in info and "Message TTLs: True" in info
    cli("stream", "rm", "CLISCH")
