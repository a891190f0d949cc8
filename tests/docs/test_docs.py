"""Every ```python block of docs/**/*.md: the convention, and how a block is run.

The convention of the code blocks in the docs (checked here; a block that breaks it
fails its page's test):

- A ```python block is top-level code as you would type it into ``python -m asyncio``:
  ``await`` works at the top level, and there is no ``asyncio.run()`` (a whole script
  belongs in ``examples/``, where ``tests/examples`` runs it).
- A block runs both ways getting-started.md offers (``tests/docs/runners.py``): pasted
  into ``python -m asyncio`` on Python 3.11, so a blank line ends each indented block
  that another statement follows, and none stands inside one (checked here by pasting
  the block into the console's own compiler), and as a file, the page's blocks in an
  ``async def main()`` (so no ``global`` statement, no ``import *``).
  ``tests/docs/test_sequence.py`` runs the pages both ways.
- The blocks of one page run in order, in one namespace: a page is one session, so a
  later block uses the ``nc`` or ``js`` an earlier block made. Pages read the server URL
  with ``os.environ.get("NATS_URL", "nats://127.0.0.1:4222")``; the test sets
  ``NATS_URL`` to its server.
- The pages run in the order of the site, after the README's samples, all on one server
  and then all again (``tests/docs/test_sequence.py`` runs them; nothing is deleted in
  between): a page makes streams and buckets of names no other page uses, publishes with
  message ids of its own, and deletes what it made at its end. Clients the page left
  open are closed after it.
- A block followed by a ```text block titled "Output" (```` ```text title="Output" ````)
  must print exactly that text.
- A block made only of snippet lines (``--8<-- "examples/<name>.py"``) shows an example
  script, or one section of it (``"examples/<name>.py:<section>"``, between
  ``# --8<-- [start:<section>]`` and ``# --8<-- [end:<section>]``); the file must exist in
  ``examples/``, whose own test runs it.
- A block may not define a function or class that the page never uses (it would be
  code nobody runs).
- Runnable Python is tagged ``python``; ``py``, ``python3``, ``pycon`` and ``ipython``
  are refused, so no sample escapes by its tag. A block that is not code meant to run
  (the shape of an API, say) is preceded by ``<!-- docs-test: skip REASON -->``, with a
  reason; keep these rare.
- Shell blocks (``sh``, ``console``) are not run as such, but the example scripts and
  benchmark modules they name must exist; the ``jetstream`` command lines of a
  ```console session are run with their output checked (``tests/docs/test_cli_page.py``).
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import io
import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from jetstream._version import __version__, install_hint
from tests.docs.runners import PasteError, file_source, paste, run_page_as_file, run_pasted
from tests.examples.test_examples import CHECKS as EXAMPLE_CHECKS

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
EXAMPLES = ROOT / "examples"

#: seconds a page may take, all its blocks together
PAGE_TIMEOUT = 60.0

_FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})\s*(?P<lang>[\w+-]*)(?P<attrs>.*)$")
_SKIP = re.compile(r"^\s*<!--\s*docs-test:\s*skip\b(?P<reason>.*?)-->\s*$")
_SNIPPET = re.compile(r'^-{2,}8<-{1,}\s+"(?P<path>[^"]+)"\s*$')
_REFUSED_TAGS = {"py", "python3", "pycon", "ipython", "py3"}
_SHELL_TAGS = {"sh", "shell", "bash", "console"}
_TOP_LEVEL_AWAIT = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT


class ConventionError(AssertionError):
    """A block of the docs does not follow the convention of this module."""


@dataclass
class Block:
    """One fenced block of a page."""

    page: str
    line: int  # 1-based line of the first line of code (after the fence)
    lang: str
    attrs: str
    code: str
    end: int = 0  # 0-based index of the closing fence line
    skip_reason: str | None = None
    output: str | None = None  # the expected output, from a following Output block
    snippets: list[str] = field(default_factory=list)

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def parse_blocks(text: str, page: str) -> list[Block]:
    """The fenced blocks of a Markdown page, with skip marks and Output blocks attached."""
    lines = text.splitlines()
    blocks: list[Block] = []
    i = 0
    pending_skip: str | None = None
    while i < len(lines):
        line = lines[i]
        skip = _SKIP.match(line)
        if skip is not None:
            reason = skip.group("reason").strip()
            if not reason:
                raise ConventionError(f"{page}:{i + 1}: a docs-test skip mark needs a reason")
            pending_skip = reason
            i += 1
            continue
        m = _FENCE.match(line)
        if m is None:
            if line.strip():
                pending_skip = None  # a skip mark applies to the very next block only
            i += 1
            continue
        indent, fence = len(m.group("indent")), m.group("fence")
        body: list[str] = []
        j = i + 1
        while j < len(lines):
            close = lines[j]
            stripped = close.strip()
            if stripped and set(stripped) == {fence[0]} and len(stripped) >= len(fence):
                break
            body.append(close[indent:] if close[:indent].strip() == "" else close)
            j += 1
        else:
            raise ConventionError(f"{page}:{i + 1}: this code block is never closed")
        block = Block(
            page=page,
            line=i + 2,
            lang=m.group("lang").lower(),
            attrs=m.group("attrs").strip(),
            code="\n".join(body) + "\n",
            end=j,
            skip_reason=pending_skip,
        )
        pending_skip = None
        if block.lang == "text" and 'title="Output"' in block.attrs:
            previous = blocks[-1] if blocks else None
            if previous is None or previous.lang != "python" or previous.output is not None:
                raise ConventionError(f"{block.where}: an Output block must follow a python block")
            if any(s.strip() for s in lines[previous.end + 1 : i]):
                raise ConventionError(f"{block.where}: text between a block and its Output")
            previous.output = block.code
        blocks.append(block)
        i = j + 1
    return blocks


def check_block(block: Block, page_text: str) -> None:
    """Raise ``ConventionError`` when a python block breaks the convention."""
    if block.lang in _REFUSED_TAGS:
        raise ConventionError(
            f"{block.where}: tag runnable code ```python (not ```{block.lang}), or mark it "
            "<!-- docs-test: skip REASON -->"
        )
    if block.lang != "python":
        return
    if block.skip_reason is not None:
        if block.output is not None:
            raise ConventionError(f"{block.where}: a skipped block cannot have an Output")
        return
    lines = [s for s in block.code.splitlines() if s.strip()]
    if not lines:
        raise ConventionError(f"{block.where}: empty python block")
    snippets = [_SNIPPET.match(s) for s in lines]
    if any(snippets):
        if not all(snippets):
            raise ConventionError(f"{block.where}: a snippet block holds snippet lines only")
        for s in snippets:
            assert s is not None
            where, _, section = s.group("path").partition(":")
            path = (ROOT / where).resolve()
            if path.parent != EXAMPLES or path.suffix != ".py" or not path.is_file():
                raise ConventionError(
                    f"{block.where}: {s.group('path')!r} is not a script in examples/"
                )
            text = path.read_text()
            if section and not all(
                f"# --8<-- [{edge}:{section}]" in text for edge in ("start", "end")
            ):
                raise ConventionError(
                    f"{block.where}: examples/{path.name} has no section {section!r}"
                )
            block.snippets.append(path.name)
        if block.output is not None:
            raise ConventionError(
                f"{block.where}: an included example is checked by tests/examples, "
                "not by an Output block"
            )
        return
    try:
        tree = ast.parse(block.code, block.where)  # top-level await parses
    except SyntaxError as exc:
        raise ConventionError(f"{block.where}: not valid Python: {exc}") from None
    try:
        paste(block)
    except PasteError as exc:
        raise ConventionError(str(exc)) from None
    try:
        compile(file_source([block]), block.where, "exec")
    except SyntaxError as exc:
        raise ConventionError(
            f"{block.where}: in an async def main(), as a file: {exc.msg}"
        ) from None
    for node in ast.walk(tree):
        if isinstance(node, ast.Global):
            raise ConventionError(
                f"{block.where}: no global statement: in a file the samples run in an "
                "async def main(), where the name would not be the page's"
            )
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "run"
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "asyncio"
        ):
            raise ConventionError(
                f"{block.where}: no asyncio.run() in a docs block: write top-level await, "
                "or put the script in examples/ and include it with --8<--"
            )
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            uses = len(re.findall(rf"\b{re.escape(node.name)}\b", page_text))
            if uses < 2:
                raise ConventionError(
                    f"{block.where}: {node.name!r} is defined but never used on the page"
                )


def check_shell(block: Block) -> None:
    """The example scripts and benchmark modules a shell block names must exist."""
    if block.lang not in _SHELL_TAGS:
        return
    for name in re.findall(r"\bexamples/([\w-]+\.py)\b", block.code):
        if not (EXAMPLES / name).is_file():
            raise ConventionError(f"{block.where}: no example examples/{name}")
    for name in re.findall(r"-m benchmarks\.(\w+)", block.code):
        if not (ROOT / "benchmarks" / f"{name}.py").is_file():
            raise ConventionError(f"{block.where}: no benchmark module benchmarks.{name}")


def _pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md"))


def _page_blocks(path: Path) -> tuple[str, list[Block]]:
    text = path.read_text()
    page = str(path.relative_to(ROOT))
    blocks = parse_blocks(text, page)
    for block in blocks:
        check_block(block, text)
        check_shell(block)
    return text, blocks


async def run_block(block: Block, namespace: dict[str, object]) -> str:
    """Run one block in ``namespace``; returns what it printed."""
    # Padding keeps the line numbers of a traceback those of the Markdown file.
    source = "\n" * (block.line - 1) + block.code
    code = compile(source, block.page, "exec", flags=_TOP_LEVEL_AWAIT)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        result = eval(code, namespace)
        if asyncio.iscoroutine(result):
            await result
    return out.getvalue()


# ------------------------------------------------------------------------------ the pages


def test_the_docs_have_code_and_it_is_all_checked() -> None:
    """The extraction finds the blocks; skip marks stay rare; every example is shown."""
    blocks = [b for path in _pages() for b in _page_blocks(path)[1]]
    python = [b for b in blocks if b.lang == "python"]
    assert len(python) >= 40, f"only {len(python)} python blocks found: extraction broken?"
    skipped = [b.where for b in python if b.skip_reason]
    assert not skipped, f"every code sample of the docs must run; skipped: {skipped}"
    outputs = [b for b in python if b.output is not None]
    assert len(outputs) >= 5
    shown = {name for b in python for name in b.snippets}
    missing = set(EXAMPLE_CHECKS) - shown
    assert not missing, f"examples not shown in the docs: {sorted(missing)}"


# ------------------------------------------------------------------------------ the checker


def _check_text(text: str) -> list[Block]:
    blocks = parse_blocks(textwrap.dedent(text), "sample.md")
    for block in blocks:
        check_block(block, textwrap.dedent(text))
        check_shell(block)
    return blocks


@pytest.mark.parametrize(
    ("sample", "complaint"),
    [
        ("```py\nx = 1\n```\n", "tag runnable code"),
        ("```python\nimport asyncio\nasyncio.run(main())\n```\n", "no asyncio.run"),
        ("```python\nasync def helper() -> None:\n    pass\n```\n", "never used"),
        ("```python\nx = (\n```\n", "not valid Python"),
        ('```python\n--8<-- "examples/nope.py"\n```\n', "not a script in examples/"),
        ('```python\n--8<-- "README.md"\n```\n', "not a script in examples/"),
        ('```python\n--8<-- "examples/kv_watch.py:nope"\n```\n', "has no section 'nope'"),
        ("<!-- docs-test: skip -->\n```python\nx = 1\n```\n", "needs a reason"),
        ("```python\nx = 1\n", "never closed"),
        ('```text title="Output"\n1\n```\n', "must follow a python block"),
        (
            '```python\n--8<-- "examples/kv_watch.py"\n```\n\n```text title="Output"\nx\n```\n',
            "checked by tests/examples",
        ),
        (
            "<!-- docs-test: skip shape -->\n```python\nx = 1\n```\n"
            '```text title="Output"\n1\n```\n',
            "cannot have an Output",
        ),
        ('```python\nx = 1\n```\nprose\n```text title="Output"\n1\n```\n', "text between"),
        ("```sh\npython examples/nope.py\n```\n", "no example"),
        ("```sh\npython -m benchmarks.bench_nope\n```\n", "no benchmark module"),
        # pasted into python -m asyncio: the line after a block is part of its statement
        ("```python\nfor i in range(2):\n    print(i)\nprint(2)\n```\n", "python -m asyncio"),
        # ... and a blank line inside a block ends it
        (
            "```python\nfor i in range(2):\n    x = i\n\n    print(x)\n```\n",
            "IndentationError",
        ),
        ("```python\nfrom os import *\n```\n", "async def main"),
        (
            "```python\nn = 0\n\n\ndef bump() -> None:\n    global n\n    n += 1\n\n\n"
            "bump()\n```\n",
            "no global statement",
        ),
    ],
)
def test_the_convention_is_enforced(sample: str, complaint: str) -> None:
    with pytest.raises(ConventionError, match=complaint):
        _check_text(sample)


def test_the_convention_accepts_sessions_outputs_and_skips() -> None:
    blocks = _check_text(
        """
        ```python
        value = await asyncio.sleep(0, "x")

        async def helper() -> str:
            return value
        ```

        ```python
        print(await helper())
        ```

        ```text title="Output"
        x
        ```

        <!-- docs-test: skip an API shape, not code to run -->
        ```python
        def connect(servers: str = ..., *, name: str | None = None) -> Client: ...
        ```

        === "tab"

            ```python
            print(2)
            ```
        """
    )
    assert [b.lang for b in blocks] == ["python", "python", "text", "python", "python"]
    assert blocks[1].output == "x\n"
    assert blocks[3].skip_reason == "an API shape, not code to run"
    assert blocks[4].code == "print(2)\n"


@pytest.mark.asyncio
async def test_blocks_share_a_namespace_and_output_is_captured() -> None:
    blocks = _check_text(
        """
        ```python
        import asyncio
        n = await asyncio.sleep(0, 41)
        ```

        ```python
        print(n + 1)
        ```
        """
    )
    namespace: dict[str, object] = {}
    assert await run_block(blocks[0], namespace) == ""
    assert await run_block(blocks[1], namespace) == "42\n"


@pytest.mark.asyncio
async def test_a_pasted_block_runs_statement_by_statement_as_the_repl_runs_it() -> None:
    (block,) = _check_text(
        """
        ```python
        tasks = [await asyncio.sleep(0, asyncio.current_task())]
        for i in range(2):
            tasks.append(await asyncio.sleep(0, asyncio.current_task()))

        print(len(set(tasks)), i)
        await asyncio.sleep(0, "echoed by the REPL, not printed")
        ```
        """
    )
    namespace: dict[str, object] = {}
    # asyncio is imported at the prompt; each statement that awaits is a task of its own
    assert await run_pasted(block, namespace) == "2 1\n"
    assert asyncio.current_task() not in namespace["tasks"]  # type: ignore[operator]


@pytest.mark.asyncio
async def test_a_page_runs_as_a_file_in_an_async_main() -> None:
    blocks = _check_text(
        """
        ```python
        import asyncio
        n = await asyncio.sleep(0, 41)
        ```

        ```python
        print(n + 1)
        ```

        ```python
        print(1 / (n - 41))
        ```
        """
    )
    printed: list[str] = []
    namespace: dict[str, object] = {}
    with pytest.raises(AssertionError, match=r"sample.md:12, run as a file .*ZeroDivisionError"):
        await run_page_as_file(blocks, namespace, lambda b, out: printed.append(out))
    assert printed == []  # nothing is checked when the file fails
    await run_page_as_file(blocks[:2], namespace, lambda b, out: printed.append(out))
    assert printed == ["", "42\n"]
    assert namespace["n"] == 41  # what the page made, for the caller to close


#: pages that may still name the package index's install line (none since the PySpark page
#: installs from a checkout or the wheel too)
_INDEX_INSTALL_PAGES: set[str] = set()


def test_install_lines_work_where_the_reader_stands() -> None:
    """The distribution is not on the package index: the docs install from a checkout
    (``pip install -e '.[extra]'``) or from the wheel ``make wheel`` builds, named with
    the current version, as the errors for a missing extra say (``install_hint``)."""
    wheel = install_hint("otel").split("'")[-2].removesuffix("[otel]")
    assert wheel == f"dist/jetstream_asyncio-{__version__}-py3-none-any.whl"
    named = 0
    for path in [ROOT / "README.md", *_pages()]:
        page, text = str(path.relative_to(ROOT)), path.read_text()
        for found in re.findall(r"dist/jetstream_asyncio-\S+?\.whl", text):
            if "<version>" not in found:
                assert found == wheel, f"{page}: {found} is not the wheel make wheel builds"
            named += 1
        if page not in _INDEX_INSTALL_PAGES:
            assert "pip install 'jetstream-asyncio" not in text, f"{page}: not on the index"
            assert "pip install jetstream-asyncio" not in text, f"{page}: not on the index"
    assert named >= 3
