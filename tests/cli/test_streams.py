"""stream ls|info|add|rm|purge|get and consumer ls|info|add|rm|next, text and --json."""

from __future__ import annotations

import base64
import json

from .conftest import Cli


def test_stream_and_consumer_lifecycle(cli: Cli) -> None:
    added = cli(
        "stream", "add", "CLIS", "--subjects", "cli.s.>", "--storage", "memory",
        "--max-age", "1h", "--max-msgs", "100", "--json",
    )  # fmt: skip
    info = json.loads(added.stdout)
    assert info["config"]["name"] == "CLIS"
    assert info["config"]["subjects"] == ["cli.s.>"]
    assert info["config"]["storage"] == "memory"
    assert info["config"]["max_age"] == 3600 * 10**9  # the API's nanoseconds
    assert info["config"]["max_msgs"] == 100

    acks = cli("pub", "cli.s.a", "m{{Count}}", "--count", "3", "--js", "--json")
    docs = [json.loads(line) for line in acks.stdout.splitlines()]
    assert [(d["stream"], d["seq"]) for d in docs] == [("CLIS", 1), ("CLIS", 2), ("CLIS", 3)]

    ls_text = cli.spawn("stream", "ls")
    ls_plain = cli.spawn("stream", "ls", "--plain")
    ls_json = cli.spawn("stream", "ls", "--json")
    names = cli.spawn("stream", "ls", "--names", "--json")
    info_text = cli.spawn("stream", "info", "CLIS")
    info_json = cli.spawn("stream", "info", "CLIS", "--json")
    get_text = cli.spawn("stream", "get", "CLIS", "2")
    get_last = cli.spawn("stream", "get", "CLIS", "--last-for", "cli.s.a", "--json")
    missing = cli.spawn("stream", "info", "NOPE")
    no_msg = cli.spawn("stream", "get", "CLIS", "99")
    cons = cli.spawn(
        "consumer", "add", "CLIS", "C1", "--filter", "cli.s.a", "--pull", "--ack", "explicit",
        "--json",
    )  # fmt: skip

    out = ls_text.wait().stdout
    assert "CLIS" in out and "cli.s.>" in out and "│" in out  # a rich table
    lines = ls_plain.wait().stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("Name"))
    assert set(lines[header + 1].replace(" ", "")) == {"-"}  # an aligned plain table
    row = next(line for line in lines if line.startswith("CLIS "))
    assert row.split()[:4] == ["CLIS", "cli.s.>", "memory", "3"]
    assert "CLIS" in [i["config"]["name"] for i in json.loads(ls_json.wait().stdout)]
    assert "CLIS" in json.loads(names.wait().stdout)
    out = info_text.wait().stdout
    assert "Stream CLIS" in out and "Max age: 1h" in out and "Messages: 3" in out
    state = json.loads(info_json.wait().stdout)["state"]
    assert (state["messages"], state["first_seq"], state["last_seq"]) == (3, 1, 3)
    out = get_text.wait().stdout
    assert "CLIS#2" in out and "m2" in out
    last = json.loads(get_last.wait().stdout)
    assert (last["seq"], last["subject"], base64.b64decode(last["data"])) == (3, "cli.s.a", b"m3")
    assert "stream 'NOPE' not found" in missing.wait(1).stderr
    assert "no message found" in no_msg.wait(1).stderr.lower()
    cinfo = json.loads(cons.wait().stdout)
    assert cinfo["name"] == "C1"
    assert cinfo["config"]["ack_policy"] == "explicit"
    assert cinfo["config"]["filter_subject"] == "cli.s.a"
    assert cinfo["num_pending"] == 3

    two = cli("consumer", "next", "CLIS", "C1", "--count", "2")
    assert "m1" in two.stdout and "m2" in two.stdout
    assert two.stderr.count("Acknowledged") == 2
    third = json.loads(cli("consumer", "next", "CLIS", "C1", "--json").stdout)
    assert (third["seq"], third["consumer"], third["pending"]) == (3, "C1", 0)
    assert base64.b64decode(third["data"]) == b"m3"

    c_info = cli.spawn("consumer", "info", "CLIS", "C1", "--json")
    c_text = cli.spawn("consumer", "info", "CLIS", "C1")
    c_ls = cli.spawn("consumer", "ls", "CLIS")
    c_ls_json = cli.spawn("consumer", "ls", "CLIS", "--json")
    empty = cli.spawn("--timeout", "0.5", "consumer", "next", "CLIS", "C1")
    purge = cli.spawn("stream", "purge", "CLIS", "--keep", "1", "--json")
    state = json.loads(c_info.wait().stdout)
    assert state["delivered"]["stream_seq"] == 3
    assert state["num_ack_pending"] == 0 and state["num_pending"] == 0
    assert "Consumer CLIS > C1" in c_text.wait().stdout
    assert "C1" in c_ls.wait().stdout
    assert [c["name"] for c in json.loads(c_ls_json.wait().stdout)] == ["C1"]
    assert "within 0.5s" in empty.wait(1).stderr
    assert json.loads(purge.wait().stdout) == {"stream": "CLIS", "purged": 2}

    assert "deleted" in cli("consumer", "rm", "CLIS", "C1").stdout
    gone = cli.spawn("consumer", "info", "CLIS", "C1")
    assert "consumer 'C1' of stream 'CLIS' not found" in gone.wait(1).stderr
    assert json.loads(cli("stream", "rm", "CLIS", "--json").stdout)["deleted"] is True
    assert "stream 'CLIS' not found" in cli("stream", "info", "CLIS", status=1).stderr


def test_plain_output_without_rich(cli: Cli) -> None:
    cli("stream", "add", "NORICH", "--subjects", "cli.norich", "--storage", "memory")
    out = cli.spawn("stream", "ls", no_rich=True).wait().stdout
    lines = out.splitlines()
    assert any(line.startswith("Name ") for line in lines)
    assert "│" not in out and "─" not in out
    cli("stream", "rm", "NORICH")
