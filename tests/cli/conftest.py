"""Run the command line as a subprocess (``python -m jetstream ...``) against a server.

``cli`` runs one command against the module's embedded server and returns the
``CompletedProcess`` (checking the exit status unless told the expected one);
``cli.start`` starts a long-running command (``sub``, ``reply``, ``kv watch``) and waits
for the line it prints on stderr once it is listening.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from jetstream.embedded import NatsServer

#: environment variables of the CLI that must not leak in from the developer's shell
_CLI_ENV = (
    "NATS_URL",
    "NATS_CREDS",
    "NATS_USER",
    "NATS_PASSWORD",
    "NATS_TOKEN",
    "NATS_NKEY",
    "NATS_CA",
    "NATS_CERT",
    "NATS_KEY",
    "JETSTREAM_CLI_PLAIN",
    "JETSTREAM_DEFAULT_PORT",
)
RUN_TIMEOUT = 60
_NO_RICH = (
    "import sys; sys.modules['rich'] = None; from jetstream.cli import main; sys.exit(main())"
)


def base_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _CLI_ENV}
    env["PYTHONUNBUFFERED"] = "1"
    if extra:
        env.update(extra)
    return env


# The commands get Ctrl-C as from a terminal. A suite started as a background job
# (``make test &``) has SIGINT ignored, the commands would inherit that, and Python
# keeps an inherited ignore: the Ctrl-C tests would wait for nothing. A handled
# signal is reset to the default at exec, so handling it here gives the commands the
# default. (Not a ``preexec_fn``: Python code between fork and exec can crash the
# child once a library with fork handlers, such as grpc under Spark Connect, is loaded.)
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


class Running:
    """A started command."""

    def __init__(
        self, args: tuple[str, ...], proc: subprocess.Popen[str], input: str | None
    ) -> None:
        self.args = args
        self.proc = proc
        self.input = input

    def wait(self, status: int = 0) -> subprocess.CompletedProcess[str]:
        """Wait for the exit, check the status (and, for errors, the one-line report)."""
        out, err = self.proc.communicate(self.input, timeout=RUN_TIMEOUT)
        args, code = self.args, self.proc.returncode
        assert code == status, (
            f"{args}: exit status {code}, expected {status}\nstdout: {out}\nstderr: {err}"
        )
        if status == 1:  # an expected error: one line, no traceback
            assert "Traceback" not in err, err
            lines = err.strip().splitlines()
            assert lines and lines[-1].startswith("error: "), err
        return subprocess.CompletedProcess(self.proc.args, code, out, err)

    def ready(self, text: str) -> None:
        """Read stderr until a line holds ``text`` (a long-running command is listening)."""
        assert self.proc.stderr is not None
        seen = []
        while True:
            line = self.proc.stderr.readline()
            if not line:
                self.proc.wait(RUN_TIMEOUT)
                raise AssertionError(f"{self.args} exited ({self.proc.returncode}): {seen}")
            seen.append(line)
            if text in line:
                return


class Cli:
    """Runs ``python -m jetstream`` with ``--server`` set to one server."""

    def __init__(self, url: str | None, cwd: Path) -> None:
        self.url = url
        self.cwd = cwd
        self._procs: list[subprocess.Popen[str]] = []

    def argv(self, args: tuple[str, ...], server: bool, no_rich: bool = False) -> list[str]:
        pre = ["--server", self.url] if server and self.url else []
        if no_rich:  # as if rich were not installed: importing it fails
            return [sys.executable, "-c", _NO_RICH, *pre, *args]
        return [sys.executable, "-m", "jetstream", *pre, *args]

    def spawn(
        self,
        *args: str,
        env: Mapping[str, str] | None = None,
        input: str | None = None,
        server: bool = True,
        no_rich: bool = False,
    ) -> Running:
        """Start a command (to run several at once); finish it with ``.wait()``."""
        proc = subprocess.Popen(
            self.argv(args, server, no_rich),
            cwd=self.cwd,
            env=base_env(env),
            stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._procs.append(proc)
        return Running(args, proc, input)

    def __call__(
        self,
        *args: str,
        status: int = 0,
        env: Mapping[str, str] | None = None,
        input: str | None = None,
        server: bool = True,
    ) -> subprocess.CompletedProcess[str]:
        return self.spawn(*args, env=env, input=input, server=server).wait(status)

    def run_bytes(self, *args: str) -> subprocess.CompletedProcess[bytes]:
        """Like calling, but stdout as bytes (for binary bodies)."""
        proc = subprocess.run(
            self.argv(args, True),
            cwd=self.cwd,
            env=base_env(),
            capture_output=True,
            timeout=RUN_TIMEOUT,
        )
        assert proc.returncode == 0, proc.stderr
        return proc

    def start(
        self, *args: str, ready: str, env: Mapping[str, str] | None = None
    ) -> subprocess.Popen[str]:
        """Start a long-running command; return once ``ready`` shows on its stderr."""
        running = self.spawn(*args, env=env)
        running.ready(ready)
        return running.proc

    def close(self) -> None:
        for proc in self._procs:
            if proc.poll() is None:
                proc.kill()
            proc.communicate()


@pytest.fixture
def cli(module_nats_server: NatsServer, tmp_path: Path) -> Iterator[Cli]:
    """The command line against the module's server, run in a fresh directory."""
    runner = Cli(module_nats_server.url, tmp_path)
    try:
        yield runner
    finally:
        runner.close()


def finish(proc: subprocess.Popen[str], timeout: float = 20) -> tuple[str, str]:
    """Wait for a started command; its remaining stdout and stderr."""
    out, err = proc.communicate(timeout=timeout)
    return out, err
