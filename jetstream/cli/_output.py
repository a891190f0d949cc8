"""What the command line prints: tables, "key: value" views, JSON, warnings, progress.

rich (the ``cli`` extra) is optional and imported lazily: with it, tables are drawn
with rich and transfers get live progress bars; without it (or with ``--plain`` /
``JETSTREAM_CLI_PLAIN=1``) the same information is printed as aligned plain text and
simple progress lines. Progress always goes to stderr, so stdout stays pipeable.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import msgspec

from ._util import fmt_bytes, fmt_duration, fmt_num

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress as RichProgress

__all__ = ["Output", "ProgressBars", "rich_available"]

_PLAIN_ENV = "JETSTREAM_CLI_PLAIN"


def rich_available() -> bool:
    """True when rich can be imported."""
    import importlib.util

    try:
        return importlib.util.find_spec("rich") is not None
    except ValueError:  # rich in sys.modules as None: deliberately blocked
        return False


def _encode(obj: Any) -> bytes:
    from ..api import encode  # (the API's Structs: not for the core commands)

    return encode(obj)


class Output:
    """The printer of one command run.

    Args:
        json: print machine-readable JSON instead of text.
        plain: never use rich, even when it is installed.
    """

    def __init__(self, *, json: bool = False, plain: bool = False) -> None:
        self.json = json
        env_plain = os.environ.get(_PLAIN_ENV, "").strip().lower() not in ("", "0", "false", "no")
        self.rich = not (plain or env_plain) and rich_available()
        self._console: Console | None = None

    # -- low level -----------------------------------------------------------------------

    def console(self) -> Console:
        """The rich console of stdout (wide when stdout is not a terminal)."""
        if self._console is None:
            from rich.console import Console

            width = None
            if not sys.stdout.isatty():  # a pipe: no terminal width to fit, so be wide
                columns = os.environ.get("COLUMNS", "")
                width = int(columns) if columns.isdigit() and int(columns) > 0 else 200
            self._console = Console(width=width, highlight=False, soft_wrap=False)
        return self._console

    def line(self, text: str = "") -> None:
        """One line of text on stdout."""
        print(text, file=sys.stdout, flush=True)

    def info(self, text: str) -> None:
        """A status line on stderr (what is going on; never data)."""
        print(text, file=sys.stderr, flush=True)

    def warn(self, text: str) -> None:
        print(f"warning: {text}", file=sys.stderr, flush=True)

    def raw(self, data: bytes) -> None:
        """Bytes on stdout as they are (message bodies, object content)."""
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()

    # -- JSON ----------------------------------------------------------------------------

    def json_doc(self, obj: Any) -> None:
        """One indented JSON document (Structs are written as the API writes them:
        durations in nanoseconds, times in RFC 3339, bytes in base64)."""
        self.line(msgspec.json.format(_encode(obj), indent=2).decode())

    def json_line(self, obj: Any) -> None:
        """One compact JSON document on one line (for streams of messages)."""
        self.line(_encode(obj).decode())

    # -- tables and views -----------------------------------------------------------------

    def table(
        self,
        title: str | None,
        columns: Sequence[str],
        rows: Sequence[Sequence[Any]],
        *,
        right: Sequence[int] = (),
    ) -> None:
        """A table; ``right`` lists the columns (by index) to align right (numbers)."""
        cells = [["" if v is None else str(v) for v in row] for row in rows]
        if self.rich:
            from rich import box
            from rich.table import Table

            table = Table(box=box.ROUNDED, header_style="bold")
            for i, name in enumerate(columns):
                table.add_column(name, justify="right" if i in right else "left")
            for row in cells:
                table.add_row(*row)
            console = self.console()
            if title:
                console.print(title, style="bold", markup=False)
            console.print(table)
            return
        if title:
            self.line(title)
            self.line()
        widths = [len(c) for c in columns]
        for row in cells:
            for i, v in enumerate(row):
                widths[i] = max(widths[i], len(v))

        def fmt(row: Sequence[str]) -> str:
            parts = [
                v.rjust(w) if i in right else v.ljust(w)
                for i, (v, w) in enumerate(zip(row, widths, strict=True))
            ]
            return "  ".join(parts).rstrip()

        self.line(fmt(columns))
        self.line(fmt(["-" * w for w in widths]))
        for row in cells:
            self.line(fmt(row))

    def view(self, title: str, sections: Sequence[tuple[str, Sequence[tuple[str, Any]]]]) -> None:
        """An info view: a title, then sections of aligned ``key: value`` lines."""
        self.line(title)
        for name, pairs in sections:
            shown = [(k, v) for k, v in pairs if v is not None and v != ""]
            if not shown:
                continue
            self.line()
            self.line(f"{name}:")
            width = max(len(k) for k, _ in shown)
            for k, v in shown:
                self.line(f"  {k.rjust(width)}: {v}")

    # -- progress -----------------------------------------------------------------------

    @contextmanager
    def progress(self) -> Iterator[ProgressBars]:
        """Progress bars on stderr: ``with out.progress() as p: t = p.add(...)``."""
        bars = ProgressBars(self.rich, enabled=not self.json)
        try:
            bars.start()
            yield bars
        finally:
            bars.stop()


class _Task:
    __slots__ = ("done", "end", "label", "last_print", "rich_id", "start", "total", "unit")

    def __init__(self, label: str, total: int | None, unit: str) -> None:
        self.label = label
        self.total = total
        self.unit = unit
        self.done = 0
        self.start = time.monotonic()
        self.end: float | None = None  # when ``done`` reached ``total``
        self.last_print = 0.0
        self.rich_id: Any = None


class ProgressBars:
    """One or more progress lines with the rate and the time left.

    ``unit`` is ``"bytes"`` (shown as KiB/MiB and MiB/s) or a count noun such as
    ``"msgs"``. With rich they are live bars; else plain lines (rewritten in place on
    a terminal, at most one a second otherwise, and a final one for each task).
    """

    def __init__(self, use_rich: bool, *, enabled: bool = True) -> None:
        self._rich = use_rich
        self._enabled = enabled
        self._tty = sys.stderr.isatty()
        self._tasks: list[_Task] = []
        self._progress: RichProgress | None = None

    def start(self) -> None:
        if not self._enabled or not self._rich:
            return
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            Progress,
            TaskProgressColumn,
            TextColumn,
            TimeRemainingColumn,
        )

        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TaskProgressColumn(),
            TextColumn("{task.fields[amount]}"),
            TextColumn("{task.fields[rate]}"),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=Console(stderr=True, highlight=False),
        )
        self._progress.start()

    def stop(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
        elif self._enabled:
            for task in self._tasks:
                self._plain(task, final=True)

    def add(self, label: str, total: int | None, unit: str = "bytes") -> _Task:
        task = _Task(label, total, unit)
        self._tasks.append(task)
        if self._progress is not None:
            task.rich_id = self._progress.add_task(
                label, total=total, amount=self._amount(task), rate=""
            )
        return task

    def update(self, task: _Task, done: int) -> None:
        """Set how much of ``task`` is done (an absolute amount, not an increment)."""
        task.done = done
        if task.end is None and task.total is not None and done >= task.total:
            task.end = time.monotonic()
        if self._progress is not None:
            self._progress.update(
                task.rich_id, completed=done, amount=self._amount(task), rate=self._rate(task)
            )
        elif self._enabled:
            now = time.monotonic()
            # On a terminal one line shows every task: throttle that line, not each task.
            holder = self._tasks[0] if self._tty else task
            if now - holder.last_print >= (0.2 if self._tty else 1.0):
                holder.last_print = now
                self._plain(task, final=False)

    def _amount(self, task: _Task) -> str:
        show = fmt_bytes if task.unit == "bytes" else fmt_num
        if task.total is None:
            return show(task.done)
        suffix = "" if task.unit == "bytes" else f" {task.unit}"
        return f"{show(task.done)}/{show(task.total)}{suffix}"

    @staticmethod
    def _elapsed(task: _Task) -> float:
        return (task.end if task.end is not None else time.monotonic()) - task.start

    def _rate(self, task: _Task) -> str:
        elapsed = self._elapsed(task)
        if elapsed <= 0:
            return ""
        rate = task.done / elapsed
        return f"{fmt_bytes(rate)}/s" if task.unit == "bytes" else f"{fmt_num(rate)} {task.unit}/s"

    def _status(self, task: _Task, *, final: bool) -> str:
        elapsed = self._elapsed(task)
        text = f"{task.label}: {self._amount(task)}"
        if task.total:
            text += f" ({100 * task.done / task.total:.0f}%)"
        text += f", {self._rate(task)}"
        if final:
            text += f", {fmt_duration(elapsed) if elapsed >= 1 else f'{elapsed:.2f}s'}"
        elif task.total and task.done:
            left = elapsed * (task.total - task.done) / task.done
            text += f", ETA {fmt_duration(left) if left >= 1 else '0s'}"
        return text

    def _plain(self, task: _Task, *, final: bool) -> None:
        if not self._tty:  # a log: one line per report
            print(self._status(task, final=final), file=sys.stderr, flush=True)
            return
        # A terminal: one line for all tasks, rewritten in place; the final one stays.
        if final and task is not self._tasks[-1]:
            return
        text = " | ".join(self._status(t, final=final) for t in self._tasks)
        print(f"\r\x1b[K{text}", end="\n" if final else "", file=sys.stderr, flush=True)
