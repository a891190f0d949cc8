"""Every script in ``examples/`` runs, as a user would run it, and prints what it should.

Each example is run as a subprocess twice: against this module's server through
``NATS_URL``, and with ``--embedded`` (its own server; ``NATS_URL`` then names a port
where nothing listens, to show it is not used). Its output is checked line by
line: exactly where the example is deterministic, by shape and totals where the
server is free to choose (which queue worker gets a message, for one).
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from jetstream.embedded import NatsServer

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
#: where no server listens: ``--embedded`` must not use ``NATS_URL``
NOWHERE = "nats://127.0.0.1:1"

#: Consumer 1 of the seed's confirmed-ack table, the line after its plain ``ack()``:
#: the server may or may not have processed that ack when the info is read.
RACY_LINE = 10

#: The table of the seed (NATS by Example, "Confirmed Message Ack in JetStream", Go),
#: which ``make demo`` prints too.
SEED_TABLE = """\
Consumer 1
  Start
    # pending messages: 2
    # messages with ack pending: 0
  After received but before ack
    # pending messages: 1
    # messages with ack pending: 1
  After ack
    # pending messages: 1
    # messages with ack pending: 1
Consumer 2
  Start
    # pending messages: 2
    # messages with ack pending: 0
  After received but before ack
    # pending messages: 1
    # messages with ack pending: 1
  After ack
    # pending messages: 1
    # messages with ack pending: 1
""".splitlines()


def run_example(name: str, *args: str, url: str, timeout: float = 60) -> str:
    """Run ``examples/<name>`` with ``NATS_URL=url``; its stdout (it must exit 0)."""
    env = {**os.environ, "NATS_URL": url}
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, f"{name} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def _table(lines: list[str]) -> list[str]:
    """The confirmed-ack table with Consumer 1's racy line normalised."""
    table = list(lines)
    assert re.fullmatch(r"    # messages with ack pending: [01]", table[RACY_LINE - 1])
    table[RACY_LINE - 1] = "    # messages with ack pending: 0 or 1"
    return table


# ------------------------------------------------------------------------------ checks


def check_confirmed_ack(out: str) -> None:
    lines = out.splitlines()
    assert re.fullmatch(r"connected to nats-server \S+ at nats://127\.0\.0\.1:\d+", lines[0])
    assert lines[1] == ""
    table = lines[2:]
    assert len(table) == len(SEED_TABLE)
    # The seed's table, except the very line the example is about: after the
    # confirmed ack_sync(), no message is left awaiting its ack.
    expected = list(SEED_TABLE)
    expected[-1] = "    # messages with ack pending: 0"
    assert _table(table) == _table(expected)


def check_pull_fetch(out: str) -> None:
    assert out.splitlines() == [
        "batch 1: order 1, order 2, order 3, order 4",
        "  6 more waiting",
        "batch 2: order 5, order 6, order 7, order 8",
        "  2 more waiting",
        "batch 3: order 9, order 10",
        "fetch_no_wait: 0 message(s)",
        "acked up to stream sequence 10, 0 pending, 0 awaiting an ack",
    ]


def check_push_queue(out: str) -> None:
    lines = out.splitlines()
    assert lines[-1] == "30 of 30 tasks processed, 0 twice"
    counts = {}
    for line in lines[:-1]:
        m = re.fullmatch(r"(worker-[123]) processed (\d+) task\(s\)", line)
        assert m is not None, line
        counts[m.group(1)] = int(m.group(2))
    assert sum(counts.values()) == 30 and all(n > 0 for n in counts.values())


def check_ordered_consumer(out: str) -> None:
    lines = out.splitlines()
    readings = [line for line in lines if line.startswith("stream seq")]
    assert readings == [f"stream seq {s:2}: reading {s} from a" for s in (1, 3, 5, 7, 9)]
    # The rug is pulled after the second message and the third still comes next.
    deleted = lines.index("  (consumer deleted under the reader)")
    assert lines[deleted - 1] == readings[1]
    assert next(x for x in lines[deleted:] if x.startswith("stream seq")) == readings[2]
    m = re.fullmatch(r"read 5 messages in order; consumer recreated (\d+)x", lines[-1])
    assert m is not None and int(m.group(1)) >= 1, lines[-1]


def check_dead_letter_queue(out: str) -> None:
    lines = out.splitlines()
    dlq = lines.index("dead-letter stream:")
    assert sorted(lines[:dlq]) == sorted(
        [
            'payments.ok: processed {"amount": 10}',
            "payments.flaky: failed (delivery 1), nak",
            "payments.bad: cannot parse, term",
            'payments.ok: processed {"amount": 30}',
            "payments.flaky: failed (delivery 2), nak",
            "payments.flaky: failed (delivery 3), nak",
        ]
    )
    assert sorted(lines[dlq + 1 :]) == [
        "  dlq.payments.bad '{\"amount\": ': terminated: invalid JSON (stream seq 3)",
        "  dlq.payments.flaky '{\"amount\": 20}': not acked after 3 deliveries (stream seq 2)",
    ]


def check_kv_watch(out: str) -> None:
    assert out.splitlines() == [
        "ui.language = en (revision 2)",
        "ui.theme = dark (revision 3)",
        "-- up to date; now watching for changes --",
        "ui.language = fr (revision 5)",
        "ui.theme DEL (revision 7)",
        "ui.font_size = 14 (revision 8)",
        "history of ui.theme: ['light', 'dark', 'DEL']",
    ]


def check_objectstore_file(out: str) -> None:
    content = b"".join(hashlib.sha256(b"%d" % i).digest() for i in range(32768))
    digest = base64.urlsafe_b64encode(hashlib.sha256(content).digest()).decode()
    assert out.splitlines() == [
        "put reports/2024.bin: 1048576 bytes in 8 chunks",
        f"digest SHA-256={digest}",
        "got it back into copy.bin: 1048576 bytes, identical: True",
        "listed reports/2024.bin (1048576 bytes)",
        "listed notes.txt (27 bytes)",
    ]


CHECKS: dict[str, Callable[[str], None]] = {
    "confirmed_ack.py": check_confirmed_ack,
    "pull_fetch.py": check_pull_fetch,
    "push_queue.py": check_push_queue,
    "ordered_consumer.py": check_ordered_consumer,
    "dead_letter_queue.py": check_dead_letter_queue,
    "kv_watch.py": check_kv_watch,
    "objectstore_file.py": check_objectstore_file,
}


# ------------------------------------------------------------------------------ tests


#: examples whose test lives elsewhere (they need more than a nats-server)
TESTED_ELSEWHERE = {
    "spark_pipeline.py": ROOT / "tests" / "spark" / "test_pipeline_example.py",
    "spark_lag.py": ROOT / "tests" / "spark" / "test_lag_example.py",
}


def test_every_example_is_checked() -> None:
    scripts = {p.name for p in EXAMPLES.glob("*.py") if not p.name.startswith("_")}
    assert scripts == set(CHECKS) | set(TESTED_ELSEWHERE)
    for name, test in TESTED_ELSEWHERE.items():
        assert test.is_file(), f"{name} is said to be tested by {test}, which is missing"


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_example_against_nats_url(name: str, module_nats_server: NatsServer) -> None:
    CHECKS[name](run_example(name, url=module_nats_server.url))


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_example_with_embedded_server(name: str) -> None:
    CHECKS[name](run_example(name, "--embedded", url=NOWHERE))


def test_example_cleans_up_and_runs_again(module_nats_server: NatsServer) -> None:
    """The examples delete what they made: a second run prints the same."""
    first = run_example("kv_watch.py", url=module_nats_server.url)
    assert run_example("kv_watch.py", url=module_nats_server.url) == first


def _shown_table(page: str) -> list[str]:
    """The lines of the ```text block of ``docs/<page>`` that shows the confirmed-ack table."""
    blocks = re.findall(r"^```text\n(.*?)^```$", (ROOT / "docs" / page).read_text(), re.M | re.S)
    (block,) = [b for b in blocks if "Consumer 1" in b]
    return str(block).splitlines()


def _same_run(shown: list[str], printed: list[str]) -> None:
    """A run prints what a page shows: the same first line but for the version and the
    port, then the same table, where the line after consumer 1's plain ack() may read 0
    or 1 (the pages say why) and every other line is exactly as shown."""
    head = r"\d+".join(re.escape(piece) for piece in re.split(r"\d+", shown[0]))
    assert re.fullmatch(head, printed[0]), (shown[0], printed[0])
    assert printed[1] == shown[1] == ""
    assert _table(printed[2:]) == _table(shown[2:])


def test_confirmed_ack_prints_the_table_of_make_demo() -> None:
    """``make demo`` runs ``python -m jetstream demo``: the same table, from the same code,
    and each is what its page shows (the getting-started page ``make demo``'s, the acks
    page the example's)."""
    demo = subprocess.run(
        [sys.executable, "-m", "jetstream", "demo"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert demo.returncode == 0, demo.stderr
    demo_lines = demo.stdout.splitlines()
    assert demo_lines[1] == ""
    example = run_example("confirmed_ack.py", "--embedded", url=NOWHERE)
    assert _table(example.splitlines()[2:]) == _table(demo_lines[2:])
    _same_run(_shown_table("getting-started.md"), demo_lines)
    _same_run(_shown_table("jetstream/acks.md"), example.splitlines())
