"""pub, sub, req, reply; connection options from the environment; errors and exit codes.

Commands that do not depend on each other run at the same time (each is a process
start of a few hundred milliseconds).
"""

from __future__ import annotations

import json
import signal

from jetstream.embedded import NatsServer
from tests.certs import CertPaths

from .conftest import Cli, finish

DEAD_URL = "nats://127.0.0.1:1"  # nothing listens on port 1


def test_sub_receives_what_pub_publishes(cli: Cli) -> None:
    text = cli.spawn("sub", "cli.sub.>", "--count", "3", "--wait", "20")
    as_json = cli.spawn("sub", "cli.sub.*", "--count", "3", "--wait", "20", "--json")
    raw = cli.spawn("sub", "cli.raw", "--count", "1", "--raw", "--wait", "20")
    quiet = cli.spawn("sub", "cli.quiet", "--wait", "0.3")
    short = cli.spawn("sub", "cli.short", "--count", "2", "--wait", "0.3")
    for running in (text, as_json, raw):
        running.ready("Subscribing on")
    pub = cli.spawn("pub", "cli.sub.a", "msg {{Count}}", "--count", "3", "-H", "k:v", "-H", "k:w")
    stdin = cli.spawn("pub", "cli.raw", "--json", input="from stdin")
    assert 'Published 3 messages (15 bytes) to "cli.sub.a"' in pub.wait().stdout
    assert json.loads(stdin.wait().stdout) == {"subject": "cli.raw", "count": 1, "bytes": 10}

    out = text.wait().stdout
    assert [line for line in out.splitlines() if line.startswith("[#")] == [
        f'[#{n}] Received on "cli.sub.a"' for n in (1, 2, 3)
    ]
    assert "msg 1" in out and "msg 3" in out and "k: v" in out and "k: w" in out

    docs = [json.loads(line) for line in as_json.wait().stdout.splitlines()]
    assert [d["data"] for d in docs] == ["msg 1", "msg 2", "msg 3"]  # UTF-8: as text
    assert not any("data_encoding" in d for d in docs)
    assert {d["subject"] for d in docs} == {"cli.sub.a"}
    assert docs[0]["headers"] == {"k": ["v", "w"]}

    assert raw.wait().stdout == "from stdin\n"
    assert quiet.wait().stdout == ""  # --wait without --count: silence ends it, status 0
    assert "got 0 of 2 messages" in short.wait(1).stderr


def test_req_and_reply(cli: Cli) -> None:
    responder = cli.spawn("reply", "cli.svc", "pong {{Count}}", "--count", "2")
    nobody = cli.spawn("req", "cli.nobody", "x")
    responder.ready("Listening")
    first = cli("req", "cli.svc", "ping", "-H", "x:1")
    assert "pong 1" in first.stdout and "Received a reply in" in first.stdout
    second = cli("req", "cli.svc", "ping again", "--json")
    assert json.loads(second.stdout)["data"] == "pong 2"
    out = responder.wait().stdout
    assert "ping" in out and "ping again" in out and "x: 1" in out
    assert "no responders" in nobody.wait(1).stderr


def test_ctrl_c_and_sigterm_end_sub_cleanly(cli: Cli) -> None:
    interrupted = cli.spawn("sub", "cli.forever")
    terminated = cli.spawn("sub", "cli.forever")
    for running, sig, status in (
        (interrupted, signal.SIGINT, 130),
        (terminated, signal.SIGTERM, 143),
    ):
        running.ready("Subscribing on")
        running.proc.send_signal(sig)
        _, err = finish(running.proc)
        assert running.proc.returncode == status
        assert "Traceback" not in err


def test_errors_and_exit_statuses(cli: Cli) -> None:
    bad_subject = cli.spawn("pub", "bad subject", "x")
    unreachable = cli.spawn("--server", DEAD_URL, "stream", "ls", server=False)
    no_verb = cli.spawn("stream")
    no_subject = cli.spawn("pub")
    bad_timeout = cli.spawn("--timeout", "soon", "stream", "ls")
    missing_file = cli.spawn("obj", "put", "B", "no-such-file.bin")

    proc = bad_subject.wait(1)
    assert "invalid subject" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    proc = unreachable.wait(1)
    assert proc.stderr.startswith("error: could not connect")
    assert proc.stdout == ""
    no_verb.wait(2)
    no_subject.wait(2)
    assert "not a duration" in bad_timeout.wait(2).stderr
    assert "no-such-file.bin" in missing_file.wait(1).stderr


def test_nats_url_from_the_environment(cli: Cli) -> None:
    assert cli.url is not None
    live, dead = {"NATS_URL": cli.url}, {"NATS_URL": DEAD_URL}
    sub = cli.spawn("sub", "cli.env", "--count", "1", "--wait", "20", server=False, env=live)
    # an option given on the command line wins over the environment, before or after the verb
    before = cli.spawn("--server", cli.url, "stream", "ls", server=False, env=dead)
    after = cli.spawn("stream", "ls", "--server", cli.url, server=False, env=dead)
    env_only = cli.spawn("stream", "ls", server=False, env=dead)
    sub.ready("Subscribing")
    cli("pub", "cli.env", "via env", server=False, env=live)
    assert "via env" in sub.wait().stdout
    before.wait()
    after.wait()
    env_only.wait(1)


def test_user_password_from_the_environment(cli: Cli) -> None:
    secret = "s3cret-Pa55word"
    wrong = "wr0ng-" + secret
    with NatsServer(jetstream=False, user="cliuser", password=secret) as server:
        good = {"NATS_URL": server.url, "NATS_USER": "cliuser", "NATS_PASSWORD": secret}
        bad = {**good, "NATS_PASSWORD": wrong}
        in_url = server.url.replace("nats://", f"nats://cliuser:{wrong}@")
        runs = [
            cli.spawn("pub", "cli.auth", "hi", server=False, env=good),
            cli.spawn(
                "--user",
                "cliuser",
                "--password",
                secret,
                "--server",
                server.url,
                "pub",
                "cli.auth",
                "hi",
                server=False,
            ),
            cli.spawn("pub", "cli.auth", "hi", server=False, env=bad),
            cli.spawn("--server", in_url, "pub", "cli.auth", "hi", server=False),
            cli.spawn("pub", "cli.auth", "hi", server=False, env={"NATS_URL": server.url}),
        ]
        for run in runs[:2]:
            assert "Published 1 message" in run.wait().stdout
        for run in runs[2:]:
            proc = run.wait(1)
            assert "authorization" in proc.stderr.lower()
            assert wrong not in proc.stderr + proc.stdout


def test_tls_ca_from_the_environment(cli: Cli, tls_certs: CertPaths) -> None:
    with NatsServer(
        jetstream=False, tls_cert=tls_certs.server_cert, tls_key=tls_certs.server_key
    ) as server:
        url = server.url.replace("nats://", "tls://")
        trusted = cli.spawn(
            "pub", "cli.tls", "x", server=False, env={"NATS_URL": url, "NATS_CA": tls_certs.ca_cert}
        )
        untrusted = cli.spawn("pub", "cli.tls", "x", server=False, env={"NATS_URL": url})
        assert "Published" in trusted.wait().stdout
        assert "certificate" in untrusted.wait(1).stderr.lower()
