"""docs/cookbook.md says that any one of its recipes runs after the page's first block, in
any order: here each runs alone after it, the last recipe first, pasted into ``python -m
asyncio`` as a reader would, each printing its Output blocks. (The page as a whole, in
order, runs in ``tests/docs/test_sequence.py``, as a file and pasted.)"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from jetstream import Client
from jetstream.embedded import NatsServer
from tests.docs.runners import run_pasted
from tests.docs.test_docs import Block, _page_blocks

PAGE = Path(__file__).resolve().parents[2] / "docs" / "cookbook.md"


def recipes() -> tuple[list[Block], list[tuple[str, list[Block]]]]:
    """The page's first block(s), before any recipe, and each recipe's (title, blocks)."""
    text, blocks = _page_blocks(PAGE)
    headings = [
        (i + 1, m.group(1))
        for i, line in enumerate(text.splitlines())
        if (m := re.match(r"## (.+)", line))
    ]
    python = [b for b in blocks if b.lang == "python"]
    first = [b for b in python if b.line < headings[0][0]]
    out = []
    for k, (line, title) in enumerate(headings):
        end = headings[k + 1][0] if k + 1 < len(headings) else 10**9
        out.append((title, [b for b in python if line < b.line < end]))
    return first, out


FIRST, RECIPES = recipes()


@pytest.fixture(scope="module")
def server(module_nats_server: NatsServer) -> Iterator[NatsServer]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NATS_URL", module_nats_server.url)
        yield module_nats_server


def test_the_page_has_ten_recipes() -> None:
    assert len(RECIPES) == 10 and all(blocks for _, blocks in RECIPES)
    assert all(any(b.output for b in blocks) for _, blocks in RECIPES)


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("title", "blocks"), list(reversed(RECIPES)), ids=[t for t, _ in reversed(RECIPES)]
)
async def test_a_recipe_runs_alone(title: str, blocks: list[Block], server: NatsServer) -> None:
    namespace: dict[str, object] = {"__name__": "__docs__"}
    try:
        for block in [*FIRST, *blocks]:
            printed = await run_pasted(block, namespace)
            if block.output is not None:
                assert printed.rstrip() == block.output.rstrip(), f"{block.where}: {printed}"
    finally:
        for value in list(namespace.values()):
            if isinstance(value, Client):
                await value.close()
