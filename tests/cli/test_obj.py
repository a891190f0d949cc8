"""obj add|put|get|ls|info|rm: round trips of files, progress bars, --json."""

from __future__ import annotations

import json
import os
import subprocess

from .conftest import Cli, base_env


def test_obj_round_trip(cli: Cli) -> None:
    data = os.urandom(700_000)  # six 128 KiB chunks
    (cli.cwd / "src").mkdir()
    (cli.cwd / "src" / "data.bin").write_bytes(data)
    assert "Object store bucket CLIOBJ" in cli("obj", "add", "CLIOBJ", "--storage", "memory").stdout

    put = cli.spawn("obj", "put", "CLIOBJ", "src/data.bin", "--description", "random")
    piped = cli.spawn("obj", "put", "CLIOBJ", "-", "--name", "piped", "--json", input="via stdin")
    proc = put.wait()
    assert "Object data.bin in bucket CLIOBJ" in proc.stdout and "700,000 bytes" in proc.stdout
    assert "put data.bin" in proc.stderr and "100%" in proc.stderr  # the rich progress bar
    assert json.loads(piped.wait().stdout)["size"] == len("via stdin")

    get = cli.spawn("obj", "get", "CLIOBJ", "data.bin", "-O", "copy.bin")
    get_plain = cli.spawn("obj", "get", "CLIOBJ", "data.bin", "--plain")
    ls = cli.spawn("obj", "ls", "CLIOBJ")
    ls_json = cli.spawn("obj", "ls", "CLIOBJ", "--json")
    buckets = cli.spawn("obj", "ls", "--json")
    info = cli.spawn("obj", "info", "CLIOBJ", "data.bin", "--json")
    bucket_info = cli.spawn("obj", "info", "CLIOBJ", "--json")
    missing = cli.spawn("obj", "get", "CLIOBJ", "nope")

    assert "Wrote" in get.wait().stdout
    assert (cli.cwd / "copy.bin").read_bytes() == data
    proc = get_plain.wait()  # no -O: a file named after the object, here in cli.cwd
    assert "Wrote 683.6 KiB (700,000 bytes) to data.bin" in proc.stdout
    assert (cli.cwd / "data.bin").read_bytes() == data
    assert "get data.bin: " in proc.stderr and "(100%)" in proc.stderr and "/s" in proc.stderr
    out = ls.wait().stdout
    assert "data.bin" in out and "piped" in out and "700,000" not in out  # sizes in KiB
    names = sorted(i["name"] for i in json.loads(ls_json.wait().stdout))
    assert names == ["data.bin", "piped"]
    assert "CLIOBJ" in [b["bucket"] for b in json.loads(buckets.wait().stdout)]
    doc = json.loads(info.wait().stdout)
    assert (doc["size"], doc["description"]) == (len(data), "random")
    assert doc["digest"].startswith("SHA-256=")
    assert json.loads(bucket_info.wait().stdout)["size"] > len(data)
    assert "no object 'nope'" in missing.wait(1).stderr

    to_stdout = subprocess.run(
        cli.argv(("obj", "get", "CLIOBJ", "piped", "-O", "-"), True),
        env=base_env(),
        capture_output=True,
        timeout=60,
        check=True,
    )
    assert to_stdout.stdout == b"via stdin"
    exists = cli("obj", "get", "CLIOBJ", "data.bin", "-O", "copy.bin", status=1)
    assert "exists" in exists.stderr and "--force" in exists.stderr

    assert "deleted" in cli("obj", "rm", "CLIOBJ", "data.bin").stdout
    gone = cli.spawn("obj", "info", "CLIOBJ", "data.bin")
    refused = cli.spawn("obj", "rm", "CLIOBJ")
    no_rich = cli.spawn("obj", "put", "CLIOBJ", "copy.bin", no_rich=True)
    assert "deleted" in gone.wait(1).stderr
    assert "--force" in refused.wait(1).stderr
    proc = no_rich.wait()
    assert "put copy.bin: " in proc.stderr and "(100%)" in proc.stderr

    cli("obj", "rm", "CLIOBJ", "--force")
    assert "CLIOBJ" not in cli("obj", "ls").stdout
