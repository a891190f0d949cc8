"""stream ls|info|add|rm|purge|get and consumer ls|info|add|rm|next, text and --json."""

from __future__ import annotations

import base64
import json
import subprocess

from .conftest import RUN_TIMEOUT, Cli, base_env


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
    assert (last["seq"], last["subject"], last["data"]) == (3, "cli.s.a", "m3")
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
    assert third["data"] == "m3" and "data_encoding" not in third

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


def _pub_bytes(cli: Cli, subject: str, body: bytes) -> None:
    """``pub --js`` with ``body`` on stdin, bytes as they are."""
    done = subprocess.run(
        cli.argv(("pub", subject, "--js"), True),
        input=body,
        env=base_env(),
        capture_output=True,
        timeout=RUN_TIMEOUT,
    )
    assert done.returncode == 0, done.stderr


def test_json_payloads_are_text_unless_they_are_not_utf8(cli: Cli) -> None:
    cli("stream", "add", "CLIJ", "--subjects", "cli.j.>", "--storage", "memory")
    cli("pub", "cli.j.doc", '{"x":1}', "--js")
    _pub_bytes(cli, "cli.j.bin", b"\xff\x00\x01raw")
    cli("pub", "cli.j.text", "h\u00e9llo", "--js")

    shown = cli("stream", "get", "CLIJ", "1", "--json").stdout
    assert '"data":"{\\"x\\":1}"' in shown  # the JSON body reads at a glance
    doc = json.loads(shown)
    assert doc["data"] == '{"x":1}' and "data_encoding" not in doc
    binary = json.loads(cli("stream", "get", "CLIJ", "2", "--json").stdout)
    assert binary["data_encoding"] == "base64"
    assert base64.b64decode(binary["data"]) == b"\xff\x00\x01raw"
    text = json.loads(cli("stream", "get", "CLIJ", "3", "--json").stdout)
    assert text["data"] == "h\u00e9llo" and "data_encoding" not in text

    # through a consumer too; and a consumer without a filter shows none
    cli("consumer", "add", "CLIJ", "ALL", "--pull", "--ack", "explicit")
    got = [
        json.loads(line)
        for line in cli(
            "consumer", "next", "CLIJ", "ALL", "--count", "2", "--json"
        ).stdout.splitlines()
    ]
    assert [d.get("data_encoding") for d in got] == [None, "base64"]
    assert got[0]["data"] == '{"x":1}'
    info = cli("consumer", "info", "CLIJ", "ALL", "--plain").stdout
    assert "Ack policy: explicit" in info
    assert "Filter" not in info and ">" not in info.replace("CLIJ > ALL", ""), info
    rows = cli("consumer", "ls", "CLIJ", "--plain").stdout.splitlines()
    row = next(line for line in rows if line.startswith("ALL "))
    assert row.split()[:3] == ["ALL", "pull", "explicit"], row  # an empty Filter cell
    cli("consumer", "add", "CLIJ", "DOCS", "--pull", "--filter", "cli.j.doc")
    assert "Filter: cli.j.doc" in cli("consumer", "info", "CLIJ", "DOCS", "--plain").stdout
    cli("stream", "rm", "CLIJ")


def test_stream_edit_changes_what_is_given_and_keeps_the_rest(cli: Cli) -> None:
    cli("stream", "add", "CLIE", "--subjects", "cli.e.>", "--storage", "memory",
        "--max-msgs", "50", "--description", "before")  # fmt: skip
    taken = cli("stream", "add", "CLIE", "--subjects", "cli.e.*", status=1).stderr
    assert "stream 'CLIE' exists with another config: change it with " in taken
    assert "'python -m jetstream stream edit CLIE'" in taken
    assert "'python -m jetstream stream rm CLIE'" in taken
    nothing = cli("stream", "edit", "CLIE", status=1).stderr
    assert "nothing to change" in nothing and "stream edit --help" in nothing

    edited = cli("stream", "edit", "CLIE", "--max-age", "1h", "--subjects", "cli.e.>,cli.f",
                 "--allow-direct")  # fmt: skip
    assert "Stream CLIE: changed subjects, max age, allow direct" in edited.stderr
    assert "Subjects: cli.e.>, cli.f" in edited.stdout and "Max age: 1h" in edited.stdout
    config = json.loads(cli("stream", "info", "CLIE", "--json").stdout)["config"]
    assert config["max_age"] == 3600 * 10**9 and config["allow_direct"] is True
    assert (config["max_msgs"], config["description"], config["storage"]) == (
        50,
        "before",
        "memory",
    )
    config = json.loads(cli("stream", "update", "CLIE", "--no-allow-direct", "--json").stdout)[
        "config"
    ]
    assert config["allow_direct"] is False and config["subjects"] == ["cli.e.>", "cli.f"]
    assert "stream 'NOPE' not found" in cli("stream", "edit", "NOPE", "--max-msgs", "1",
                                             status=1).stderr  # fmt: skip
    cli("stream", "rm", "CLIE")


def test_stream_ls_leaves_out_the_streams_of_buckets_unless_all(cli: Cli) -> None:
    cli("stream", "add", "CLIL", "--subjects", "cli.l.>", "--storage", "memory")
    cli("kv", "add", "clil", "--storage", "memory")
    cli("obj", "add", "clil", "--storage", "memory")
    plain = cli("stream", "ls", "--plain")
    names = cli("stream", "ls", "--names")
    every = cli("stream", "ls", "--all", "--names")
    as_json = cli("stream", "ls", "--json")
    assert "CLIL" in plain.stdout and "KV_clil" not in plain.stdout
    assert "OBJ_clil" not in plain.stdout
    assert "(not shown: 2 streams of KeyValue or object store buckets; --all lists them)" in (
        plain.stderr
    )
    assert "CLIL" in names.stdout.split() and "KV_clil" not in names.stdout.split()
    assert {"CLIL", "KV_clil", "OBJ_clil"} <= set(every.stdout.split())
    assert "not shown" not in every.stderr
    assert not [i for i in json.loads(as_json.stdout) if i["config"]["name"].endswith("clil")]
    cli("kv", "rm", "clil")
    cli("obj", "rm", "clil", "--force")
    cli("stream", "rm", "CLIL")


def test_raw_bodies_are_byte_exact_and_binary_ones_are_marked(cli: Cli) -> None:
    cli("stream", "add", "CLIB", "--subjects", "cli.b.>", "--storage", "memory")
    body = b"\x89PNG\r\n\x1a\n\xff\x00"
    _pub_bytes(cli, "cli.b.img", body)
    _pub_bytes(cli, "cli.b.txt", b"no newline")
    assert cli.run_bytes("stream", "get", "CLIB", "1", "--raw").stdout == body
    assert cli.run_bytes("stream", "get", "CLIB", "2", "--raw").stdout == b"no newline"
    shown = cli("stream", "get", "CLIB", "1").stdout
    assert "<binary, 10 bytes>" in shown and "\ufffd" not in shown
    cli("consumer", "add", "CLIB", "R", "--pull")
    assert cli.run_bytes("consumer", "next", "CLIB", "R", "--raw").stdout == body
    assert cli.run_bytes("consumer", "next", "CLIB", "R", "--raw").stdout == b"no newline"
    cli("consumer", "add", "CLIB", "T", "--pull")
    text = cli("consumer", "next", "CLIB", "T", "--count", "2").stdout
    assert "<binary, 10 bytes>" in text and "no newline" in text and "\ufffd" not in text
    cli("stream", "rm", "CLIB")
