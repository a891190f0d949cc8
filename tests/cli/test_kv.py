"""kv add|info|put|create|get|del|rm|watch|history|ls, text and --json."""

from __future__ import annotations

import base64
import json
import signal
import subprocess

from .conftest import RUN_TIMEOUT, Cli, base_env


def _value(doc: dict[str, object]) -> bytes:
    """The value of a JSON entry: text when it is valid UTF-8, else base64 and said so."""
    value = doc["value"]
    assert isinstance(value, str)
    if doc.get("value_encoding") == "base64":
        return base64.b64decode(value)
    assert "value_encoding" not in doc
    return value.encode()


def test_kv_lifecycle(cli: Cli) -> None:
    status = json.loads(cli("kv", "add", "CLIKV", "--history", "5", "--json").stdout)
    assert (status["bucket"], status["history"], status["values"]) == ("CLIKV", 5, 0)
    assert "CLIKV > a.b revision 1" in cli("kv", "put", "CLIKV", "a.b", "one").stdout

    watch = cli.spawn("kv", "watch", "CLIKV", "--count", "3", "--wait", "20", "--json")
    forever = cli.spawn("kv", "watch", "CLIKV", "a.*")
    watch.ready("Watching CLIKV")
    forever.ready("Watching CLIKV > a.*")
    assert "revision 2" in cli("kv", "put", "CLIKV", "a.b", "two").stdout
    created = json.loads(cli("kv", "create", "CLIKV", "a.c", "--json", input="three").stdout)
    assert created == {"bucket": "CLIKV", "key": "a.c", "revision": 3}
    seen = [json.loads(line) for line in watch.wait().stdout.splitlines()]
    forever.proc.send_signal(signal.SIGINT)  # Ctrl-C
    proc = forever.wait(130)
    assert "Traceback" not in proc.stderr
    assert [(e["key"], e["revision"], _value(e)) for e in seen] == [
        ("a.b", 1, b"one"),
        ("a.b", 2, b"two"),
        ("a.c", 3, b"three"),
    ]

    get_text = cli.spawn("kv", "get", "CLIKV", "a.b")
    get_json = cli.spawn("kv", "get", "CLIKV", "a.b", "--json")
    get_old = cli.spawn("kv", "get", "CLIKV", "a.b", "--revision", "1", "--raw")
    hist_json = cli.spawn("kv", "history", "CLIKV", "a.b", "--json")
    hist_text = cli.spawn("kv", "history", "CLIKV", "a.b", "--plain")
    buckets = cli.spawn("kv", "ls")
    buckets_json = cli.spawn("kv", "ls", "--json")
    info = cli.spawn("kv", "info", "CLIKV", "--json")
    missing = cli.spawn("kv", "get", "CLIKV", "nope")
    exists = cli.spawn("kv", "create", "CLIKV", "a.c", "again")
    bad_key = cli.spawn("kv", "put", "CLIKV", "bad key", "x")

    out = get_text.wait().stdout
    assert "CLIKV > a.b revision 2" in out and "two" in out
    doc = json.loads(get_json.wait().stdout)
    assert (doc["revision"], doc["operation"], doc["value"]) == (2, "PUT", "two")
    assert "value_encoding" not in doc
    assert get_old.wait().stdout == "one"  # --raw: the value exactly
    assert [(e["revision"], _value(e)) for e in json.loads(hist_json.wait().stdout)] == [
        (1, b"one"),
        (2, b"two"),
    ]
    rows = [line.split() for line in hist_text.wait().stdout.splitlines()]
    assert rows[-2][:3] == ["a.b", "1", "PUT"] and rows[-1][:3] == ["a.b", "2", "PUT"]
    assert "CLIKV" in buckets.wait().stdout
    assert "CLIKV" in [b["bucket"] for b in json.loads(buckets_json.wait().stdout)]
    assert json.loads(info.wait().stdout)["values"] == 3
    assert "no key 'nope'" in missing.wait(1).stderr
    exists.wait(1)
    bad_key.wait(1)

    deleted = json.loads(cli("kv", "del", "CLIKV", "a.c", "--json").stdout)
    assert deleted["deleted"] is True and deleted["revision"] == 4
    gone = cli.spawn("kv", "get", "CLIKV", "a.c")
    keys = cli.spawn("kv", "ls", "CLIKV", "--json")
    keys_text = cli.spawn("kv", "ls", "CLIKV")
    assert "a.c" in gone.wait(1).stderr
    assert json.loads(keys.wait().stdout) == ["a.b"]
    assert keys_text.wait().stdout == "a.b\n"

    assert "deleted" in cli("kv", "rm", "CLIKV").stdout
    assert "no bucket 'CLIKV'" in cli("kv", "info", "CLIKV", status=1).stderr


def test_kv_json_values_are_text_unless_they_are_not_utf8(cli: Cli) -> None:
    cli("kv", "add", "CLIKVJ")
    cli("kv", "put", "CLIKVJ", "doc", '{"x":1}')
    put = subprocess.run(
        cli.argv(("kv", "put", "CLIKVJ", "bin"), True),
        input=b"\xff\x00raw",
        env=base_env(),
        capture_output=True,
        timeout=RUN_TIMEOUT,
    )
    assert put.returncode == 0, put.stderr
    text = cli("kv", "get", "CLIKVJ", "doc", "--json").stdout
    assert '"value": "{\\"x\\":1}"' in text  # readable at a glance
    doc = json.loads(text)
    assert doc["value"] == '{"x":1}' and "value_encoding" not in doc
    raw = json.loads(cli("kv", "get", "CLIKVJ", "bin", "--json").stdout)
    assert raw["value_encoding"] == "base64"
    assert base64.b64decode(raw["value"]) == b"\xff\x00raw"
    cli("kv", "rm", "CLIKVJ")


def test_a_value_that_is_not_utf8_is_kept_and_marked(cli: Cli) -> None:
    """A value given as an argument is the bytes the shell passed (here b"v\\xff"), and
    what prints text shows ``<binary, N bytes>`` instead of guessing at them."""
    cli("kv", "add", "CLIKVB", "--storage", "memory")
    cli("kv", "put", "CLIKVB", "k", "v\udcff")  # the argument's bytes: b"v\xff"
    assert cli.run_bytes("kv", "get", "CLIKVB", "k", "--raw").stdout == b"v\xff"
    shown = cli("kv", "get", "CLIKVB", "k").stdout
    watched = cli("kv", "watch", "CLIKVB", "--count", "1", "--wait", "20").stdout
    history = cli("kv", "history", "CLIKVB", "k", "--plain").stdout
    for out in (shown, watched, history):
        assert "<binary, 2 bytes>" in out and "\ufffd" not in out, out
    cli("kv", "rm", "CLIKVB")
