"""The two ways the docs offer to run their samples, as the tests run them.

getting-started.md ("How to run the samples") offers two:

- **pasted** into ``python -m asyncio``: the asyncio REPL reads the paste line by line
  and runs each top-level statement once it is complete, compiled in ``'single'`` mode
  (``code.InteractiveConsole``), as a task of its loop when it awaits. A line that
  follows an indented block without a blank line in between is a ``SyntaxError`` there
  (the console compiles the block and that line as one statement), and so is a blank line
  inside a block (it ends the block; the next indented line is an ``IndentationError``).
  ``paste`` replays a block through the console's own ``push()``, so the tests meet
  exactly what the REPL of the running Python would do; ``run_pasted`` then runs each
  statement as the REPL does.
- **as a file**: a page's samples one after another in an ``async def main()`` run by
  ``asyncio.run(main())``. ``run_page_as_file`` makes that function of a page's blocks,
  each block's output told apart by a marker line, and runs it.

Both print through ``print()`` alike; the REPL also echoes the value of a bare expression
statement (``await js.publish(...)`` shows its ``PubAck``), which ``run_pasted`` collects
apart, since the page's Output blocks show what a file prints.
"""

from __future__ import annotations

import ast
import asyncio
import code
import contextlib
import io
import sys
import textwrap
import types
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

_TOP_LEVEL_AWAIT = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
#: what the file way prints between two blocks, to tell their outputs apart
_MARK = "\x00--docs-block-end--\x00"


class Sample(Protocol):
    """What ``tests.docs.test_docs.Block`` offers these runners."""

    @property
    def page(self) -> str: ...
    @property
    def line(self) -> int: ...
    @property
    def code(self) -> str: ...


class PasteError(SyntaxError):
    """A block that the asyncio REPL refuses when it is pasted."""


@dataclass(frozen=True)
class Statement:
    """One top-level statement as the REPL runs it."""

    line: int  # 0-based line of the block where it starts
    source: str


class _Console(code.InteractiveConsole):
    """``asyncio.__main__.AsyncIOInteractiveConsole``'s compiler, recording instead of running."""

    def __init__(self) -> None:
        super().__init__({})
        self.compile.compiler.flags |= _TOP_LEVEL_AWAIT
        self.statements: list[Statement] = []
        self.error: SyntaxError | None = None
        self.at = 0  # the block line being pushed
        self.start = 0  # the block line where the buffered statement began

    def runcode(self, code: types.CodeType) -> None:
        # A blank or comment line alone is compiled as ``pass``: nothing to run.
        if any(s.strip() and not s.lstrip().startswith("#") for s in self.buffer):
            self.statements.append(Statement(self.start, "\n".join(self.buffer)))

    def showsyntaxerror(self, filename: str | None = None, **kw: Any) -> None:
        exc = sys.exc_info()[1]
        assert isinstance(exc, SyntaxError | OverflowError | ValueError)
        self.error = exc if isinstance(exc, SyntaxError) else SyntaxError(str(exc))

    def push_line(self, line: str) -> None:
        if not self.buffer:
            self.start = self.at
        self.push(line)
        self.at += 1


def paste(block: Sample) -> list[Statement]:
    """The statements the asyncio REPL runs when ``block`` is pasted into it (and Enter
    pressed once more at its end, as an indented last statement needs).

    Raises:
        PasteError: the REPL would refuse a line; says which, and why.
    """
    console = _Console()
    for line in [*block.code.splitlines(), ""]:
        console.push_line(line)
        if console.error is not None:
            where = block.line + console.at - 1
            lines = block.code.splitlines()
            text = lines[console.at - 1] if console.at - 1 < len(lines) else ""
            hint = (
                "a blank line must end an indented block before the next statement, "
                "and none may stand inside one"
                if console.at - 1 > console.start
                else "the line itself"
            )
            raise PasteError(
                f"{block.page}:{where}: pasted into python -m asyncio, {text.strip()!r} is a "
                f"{type(console.error).__name__} ({console.error.msg}): {hint}"
            )
    return console.statements


@contextlib.contextmanager
def _captured() -> Iterator[tuple[io.StringIO, list[object]]]:
    """stdout captured, and the REPL's echo of expression values collected apart."""
    out, echoed = io.StringIO(), []
    hook = sys.displayhook

    def display(value: object) -> None:
        if value is not None:
            echoed.append(value)

    sys.displayhook = display
    try:
        with contextlib.redirect_stdout(out):
            yield out, echoed
    finally:
        sys.displayhook = hook


async def run_pasted(block: Sample, namespace: dict[str, Any]) -> str:
    """Run ``block`` as the asyncio REPL runs it pasted: statement by statement, each
    compiled in ``'single'`` mode and, when it awaits, run as a task of the loop. The
    first statement that raises ends the block (the REPL would print it and go on).
    Returns what it printed (not the REPL's echo of values)."""
    namespace.setdefault("__builtins__", __builtins__)
    namespace.setdefault("asyncio", asyncio)  # the REPL has it imported
    statements = paste(block)
    with _captured() as (out, _echoed):
        for statement in statements:
            # Padding keeps the line numbers of a traceback those of the Markdown file.
            source = "\n" * (block.line - 1 + statement.line) + statement.source + "\n"
            compiled = compile(source, block.page, "single", flags=_TOP_LEVEL_AWAIT)
            result = types.FunctionType(compiled, namespace)()
            if asyncio.iscoroutine(result):
                await asyncio.get_running_loop().create_task(result)
    return out.getvalue()


def file_source(blocks: Sequence[Sample]) -> str:
    """A page's blocks as the file getting-started.md tells how to write: one after
    another in an ``async def main()`` (its ``asyncio.run(main())`` left to the caller),
    a marker printed after each block, and ``main``'s locals kept in ``namespace``, so
    the caller closes what the page left open."""
    lines = ["async def main(namespace):"]
    for block in blocks:
        body = textwrap.indent(block.code, "    ", lambda s: True).rstrip("\n")
        lines += [body, f"    namespace.update(locals()); print({_MARK!r})"]
    return "\n".join(lines) + "\n"


async def run_page_as_file(
    blocks: Sequence[Sample], namespace: dict[str, Any], check: Callable[[Sample, str], None]
) -> None:
    """Run a page's ``blocks`` as one file (see ``file_source``); ``check(block, printed)``
    each block's output. A block that raises fails with the block named."""
    source = file_source(blocks)
    module: dict[str, Any] = {"__name__": "__main__"}
    exec(compile(source, f"{blocks[0].page} (as a file)", "exec"), module)
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            await module["main"](namespace)
    except Exception as exc:
        done = out.getvalue().count(_MARK)
        block = blocks[done]
        raise AssertionError(
            f"{block.where if hasattr(block, 'where') else block.page}, run as a file "
            f"(the page's samples in an async def main()): {type(exc).__name__}: {exc}"
        ) from exc
    outputs = out.getvalue().split(_MARK + "\n")
    for block, printed in zip(blocks, outputs, strict=False):
        check(block, printed)
