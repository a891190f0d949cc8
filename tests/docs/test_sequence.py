"""The README and the docs, run as a newcomer meets them: in order, on one server, twice.

The steps, in the order of reading:

1. the README's quick start: its ``$ .venv/bin/jetstream ...`` lines, run as
   ``python -m jetstream ...`` (``tests/docs/test_cli_page.py`` says how a shown output
   line is matched);
2. the README's Python example, run as the script it is, which must print its Output
   block;
3. every page in the order of ``mkdocs.yml``'s nav: its python blocks, each printing its
   Output block (``tests/docs/test_docs.py`` gives the convention), the example scripts a
   page shows whole (``--8<-- "examples/<name>.py"``), run against the same server and
   checked as ``tests/examples`` checks them, and the console sessions of a page
   (``cli.md``).

All of them run against one nats-server, started once, and then all of them again on the
same server: the first time with each page's python blocks run as a file (in an ``async
def main()``), the second time pasted into ``python -m asyncio``, block by block in order
with the rest, the two ways getting-started.md offers (``tests/docs/runners.py``).
Nothing is deleted in between: each page makes streams and buckets of names of its own
and removes them at its end, and no two pages use the same message id, so a page works
whatever a reader ran before it, and again. (Examples shown only in sections,
those of the PySpark page, need Spark: ``tests/spark`` runs them.)
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from jetstream import Client
from jetstream.embedded import NatsServer
from tests.certs import CertPaths
from tests.docs.runners import run_page_as_file, run_pasted
from tests.docs.test_cli_page import console_sessions, run_command
from tests.docs.test_docs import PAGE_TIMEOUT, Block, _page_blocks, parse_blocks
from tests.docs.test_mkdocs import _nav_pages
from tests.examples.test_examples import CHECKS, run_example

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
#: how the python blocks run in each round of the sequence on the one server: the two ways
#: getting-started.md offers (``tests/docs/runners.py``)
WAYS = ("file", "pasted")
ROUNDS = len(WAYS)


@dataclass(frozen=True)
class Step:
    """One thing a reader runs: the README's quick start or example, or a page."""

    name: str
    blocks: tuple[Block, ...]
    script: bool = False  # a whole program (the README's example), run as a process

    def examples(self) -> list[str]:
        """The example scripts this step runs (those shown whole, with a check)."""
        return [
            name
            for block in self.blocks
            if block.snippets and ":" not in block.code
            for name in block.snippets
            if name in CHECKS
        ]

    def runs_something(self) -> bool:
        return bool(self.examples()) or any(
            (b.lang == "python" and not b.snippets and not b.skip_reason)
            or (b.lang == "console" and console_sessions(_fenced(b)))
            for b in self.blocks
        )


def _fenced(block: Block) -> str:
    return f"```{block.lang}\n{block.code}```\n"


def _readme_steps() -> list[Step]:
    blocks = parse_blocks(README.read_text(), "README.md")
    console = tuple(b for b in blocks if b.lang == "console")
    python = tuple(b for b in blocks if b.lang == "python")
    assert console, "the README's quick start is a ```console session"
    assert len(python) == 1 and python[0].output, "one README example, with its Output"
    return [Step("README quick start", console), Step("README example", python, script=True)]


def steps() -> list[Step]:
    """The README's steps, then the pages in the order of the nav (those with code)."""
    nav = _nav_pages(yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"])
    pages = [Step(page, tuple(_page_blocks(DOCS / page)[1])) for page in nav]
    return _readme_steps() + [s for s in pages if s.runs_something()]


STEPS = steps()


# ------------------------------------------------------------------------------ running


@pytest.fixture(scope="module")
def server(tls_certs: CertPaths) -> Iterator[NatsServer]:
    """The one server of the whole sequence; ``NATS_URL`` names it, ``NATS_WS_URL`` its
    WebSocket listener. The wss:// samples of the WebSocket page go to a second server,
    ``NATS_WSS_URL``, whose certificate the CA file ``NATS_CA_FILE`` verifies."""
    with (
        NatsServer(websocket=True) as one,
        NatsServer(
            jetstream=False,
            websocket=True,
            tls_cert=tls_certs.server_cert,
            tls_key=tls_certs.server_key,
        ) as wss,
        pytest.MonkeyPatch.context() as mp,
    ):
        mp.setenv("NATS_URL", one.url)
        mp.setenv("NATS_WS_URL", one.ws_url)
        mp.setenv("NATS_WSS_URL", wss.ws_url)
        mp.setenv("NATS_CA_FILE", tls_certs.ca_cert)
        yield one


def _run_script(block: Block, url: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", block.code],
        cwd=ROOT,
        env={**os.environ, "NATS_URL": url},
        capture_output=True,
        text=True,
        timeout=PAGE_TIMEOUT,
    )
    assert done.returncode == 0, f"{block.where} exited {done.returncode}:\n{done.stderr}"
    assert block.output is not None
    assert done.stdout.rstrip() == block.output.rstrip(), (
        f"{block.where}: printed\n{done.stdout}\ninstead of its Output\n{block.output}"
    )


def _check_output(block: Block, printed: str) -> None:
    if block.output is not None:
        assert printed.rstrip() == block.output.rstrip(), (
            f"{block.where}: printed\n{printed}\ninstead of the page's Output\n{block.output}"
        )


async def _run_page(step: Step, url: str, way: str) -> None:
    """Run a page ``way``: "pasted" runs each python block as pasted into ``python -m
    asyncio``, in order with the rest; "file" runs the page's python blocks as one file
    (``tests/docs/runners.py``), then its examples and console sessions."""
    namespace: dict[str, object] = {"__name__": "__docs__"}
    python = [b for b in step.blocks if b.lang == "python" and not b.snippets]
    try:
        async with asyncio.timeout(PAGE_TIMEOUT):
            if way == "file" and python:
                await run_page_as_file(python, namespace, _check_output)
            for block in step.blocks:
                if block.lang == "console":
                    whole = step.name == "README quick start"  # all a command prints
                    for command, shown in console_sessions(_fenced(block)):
                        await asyncio.to_thread(run_command, command, shown, url, whole=whole)
                elif block.lang != "python" or block.skip_reason:
                    continue
                elif block.snippets:
                    if ":" in block.code:
                        continue  # a section of a script: its whole runs elsewhere
                    for name in block.snippets:
                        if name in CHECKS:
                            out = await asyncio.to_thread(run_example, name, url=url)
                            CHECKS[name](out)
                elif way == "pasted":
                    _check_output(block, await run_pasted(block, namespace))
    finally:
        for value in list(namespace.values()):
            if isinstance(value, Client):
                await value.close()


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("round_", "step"),
    [(r, s) for r in range(1, ROUNDS + 1) for s in STEPS],
    ids=[f"{r}-{WAYS[r - 1]}-{s.name}" for r in range(1, ROUNDS + 1) for s in STEPS],
)
async def test_step(round_: int, step: Step, server: NatsServer) -> None:
    """One step of the sequence, on the server the steps before it used."""
    if step.script:
        (block,) = step.blocks
        await asyncio.to_thread(_run_script, block, server.url)
    else:
        await _run_page(step, server.url, WAYS[round_ - 1])


# ------------------------------------------------------------------------------ the names


_STREAMS = (
    r'StreamConfig\(\s*name="([^"]+)"',
    r"\bstream add (\S+)",
    r'^(?:STREAM|DLQ) = "([^"]+)"',
)
_BUCKETS = (r'\bbucket="([^"]+)"', r"\b(?:kv|obj) add (\S+)", r'^BUCKET = "([^"]+)"')
_MSG_IDS = (r'\bmsg_id=f?"([^"]+)"', r"--msg-id (\S+)")


def _code(step: Step) -> str:
    """What a step runs: its code blocks and the example scripts it shows."""
    parts = [b.code for b in step.blocks if b.lang in ("python", "console") and not b.snippets]
    parts += [(ROOT / "examples" / name).read_text() for name in step.examples()]
    return "\n".join(parts)


def _found(patterns: tuple[str, ...], text: str) -> set[str]:
    return {m for p in patterns for m in re.findall(p, text, flags=re.MULTILINE)}


def test_each_step_has_names_and_message_ids_of_its_own() -> None:
    """Two steps never make a stream or a bucket of the same name, nor publish with the
    same message id: whatever ran before, a step finds its names free."""
    for kind, patterns in (("stream", _STREAMS), ("bucket", _BUCKETS), ("msg id", _MSG_IDS)):
        owner: dict[str, str] = {}
        for step in STEPS:
            for name in _found(patterns, _code(step)):
                assert name not in owner, f"{kind} {name!r}: in {owner[name]} and in {step.name}"
                owner[name] = step.name
        assert len(owner) >= 5, f"only {len(owner)} {kind} names found: the patterns broke?"


def test_the_sequence_covers_the_readme_and_every_page_with_code() -> None:
    names = [s.name for s in STEPS]
    assert names[:2] == ["README quick start", "README example"]
    with_python = {
        str(p.relative_to(DOCS))
        for p in DOCS.rglob("*.md")
        if any(b.lang == "python" for b in _page_blocks(p)[1])
    }
    assert with_python - {"spark.md"} <= set(names)
    assert "cli.md" in names
    examples = {name for s in STEPS for name in s.examples()}
    assert examples == set(CHECKS), "every checked example runs in the sequence"
