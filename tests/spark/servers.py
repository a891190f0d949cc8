"""Spark processes of the tests, on loopback only: a Spark Connect server, and a standalone
cluster (a master and a worker) started through pyspark's own launch scripts.

Each listens on ports picked free at start (never Spark's fixed defaults: other test runs
may share the machine), writes its log into its own directory, and is stopped by the pid
it was started with.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

__all__ = ["SparkConnectServer", "StandaloneCluster", "free_port", "spark_env", "spark_home"]

LOOPBACK = "127.0.0.1"
CONNECT_SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
# a JVM starting on a loaded two-core machine
START_TIMEOUT = 180.0


def spark_home() -> Path:
    from pyspark.find_spark_home import _find_spark_home

    return Path(_find_spark_home())


def free_port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


def spark_env(**extra: str) -> dict[str, str]:
    """The environment of a Spark process of the tests: loopback, this interpreter for
    the Python workers, and no Spark Connect settings inherited from this process."""
    env = dict(os.environ)
    for var in ("SPARK_REMOTE", "SPARK_LOCAL_REMOTE", "SPARK_CONNECT_MODE_ENABLED", "MASTER"):
        env.pop(var, None)
    env.update(
        SPARK_LOCAL_IP=LOOPBACK,
        SPARK_LOCAL_HOSTNAME="localhost",
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
        **extra,
    )
    return env


def _listening(port: int) -> bool:
    try:
        with socket.create_connection((LOOPBACK, port), timeout=0.5):
            return True
    except OSError:
        return False


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(30)


class _Process:
    """One Spark JVM, its log, and its port."""

    def __init__(self, name: str, cmd: Sequence[str], port: int, log: Path, env: dict[str, str]):
        self.name = name
        self.port = port
        self.log = log
        self._out = log.open("ab")
        self.proc = subprocess.Popen(
            list(cmd),
            stdin=subprocess.DEVNULL,
            stdout=self._out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # its children (Python workers) stop with it
        )
        # stopped at the latest when the interpreter exits (an interrupted test run)
        self._finalizer = weakref.finalize(self, _kill_group, self.proc)

    def wait_ready(self, timeout: float = START_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while not _listening(self.port):
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"{self.name} exited with {self.proc.returncode}:\n{self.tail()}"
                )
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{self.name} not listening after {timeout:g} s:\n{self.tail()}")
            time.sleep(0.2)

    def tail(self, lines: int = 40) -> str:
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        if self.proc.poll() is None:
            # the whole process group: the JVM and the Python workers it forked
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                _kill_group(self.proc)
        self._finalizer.detach()
        self._out.close()


class SparkConnectServer:
    """A Spark Connect server on ``127.0.0.1:<free port>`` (``url``), its driver running
    ``master`` (``local[2]``, or a standalone cluster's URL)."""

    def __init__(
        self, workdir: Path, *, master: str = "local[2]", conf: Mapping[str, str] | None = None
    ) -> None:
        self.workdir = workdir
        self.master = master
        self.conf = dict(conf or {})
        self._proc: _Process | None = None

    @property
    def url(self) -> str:
        assert self._proc is not None, "not started"
        return f"sc://{LOOPBACK}:{self._proc.port}"

    def start(self) -> Self:
        self.workdir.mkdir(parents=True, exist_ok=True)
        last: Exception | None = None
        for _ in range(3):  # a port taken between picking and binding: pick again
            port = free_port()
            conf = {
                "spark.connect.grpc.binding.address": LOOPBACK,
                "spark.connect.grpc.binding.port": str(port),
                "spark.ui.enabled": "false",
                "spark.driver.host": LOOPBACK,
                "spark.driver.bindAddress": LOOPBACK,
                **self.conf,
            }
            cmd = [
                str(spark_home() / "bin" / "spark-submit"),
                "--class",
                CONNECT_SERVER_CLASS,
                "--name",
                "jetstream-tests-connect",
                "--master",
                self.master,
            ]
            for key, value in conf.items():
                cmd += ["--conf", f"{key}={value}"]
            self._proc = _Process(
                "Spark Connect server", cmd, port, self.workdir / "connect.log", spark_env()
            )
            try:
                self._proc.wait_ready()
                return self
            except RuntimeError as exc:
                last = exc
                self._proc.stop()
        raise RuntimeError(f"the Spark Connect server did not start: {last}")

    def stop(self) -> None:
        if self._proc is not None:
            self._proc.stop()

    def log_tail(self, lines: int = 40) -> str:
        return self._proc.tail(lines) if self._proc is not None else ""

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class StandaloneCluster:
    """A Spark standalone cluster on loopback: a master and one worker (``cores`` cores,
    ``memory`` of executor memory), each its own JVM started by ``spark-class``."""

    def __init__(self, workdir: Path, *, cores: int = 2, memory: str = "2g") -> None:
        self.workdir = workdir
        self.cores = cores
        self.memory = memory
        self._master: _Process | None = None
        self._worker: _Process | None = None

    @property
    def url(self) -> str:
        assert self._master is not None, "not started"
        return f"spark://{LOOPBACK}:{self._master.port}"

    def start(self) -> Self:
        try:
            return self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> Self:
        self.workdir.mkdir(parents=True, exist_ok=True)
        spark_class = str(spark_home() / "bin" / "spark-class")
        env = spark_env(SPARK_WORKER_DIR=str(self.workdir / "work"))
        port = free_port()
        self._master = _Process(
            "Spark master",
            [
                spark_class,
                "org.apache.spark.deploy.master.Master",
                "--host",
                LOOPBACK,
                "--port",
                str(port),
                "--webui-port",
                str(free_port()),
            ],
            port,
            self.workdir / "master.log",
            env,
        )
        self._master.wait_ready()
        wport = free_port()
        self._worker = _Process(
            "Spark worker",
            [
                spark_class,
                "org.apache.spark.deploy.worker.Worker",
                "--host",
                LOOPBACK,
                "--port",
                str(wport),
                "--webui-port",
                str(free_port()),
                "--cores",
                str(self.cores),
                "--memory",
                self.memory,
                "--work-dir",
                str(self.workdir / "work"),
                self.url,
            ],
            wport,
            self.workdir / "worker.log",
            env,
        )
        self._worker.wait_ready()
        self._wait_registered()
        return self

    def _wait_registered(self, timeout: float = START_TIMEOUT) -> None:
        """Until the master has the worker (jobs submitted before would wait for it)."""
        assert self._master is not None and self._worker is not None
        deadline = time.monotonic() + timeout
        while "Successfully registered with master" not in self._worker.tail(200):
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"the worker did not register with the master:\n{self._master.tail()}\n"
                    f"{self._worker.tail()}"
                )
            time.sleep(0.2)

    def logs(self) -> str:
        procs = (self._master, self._worker)
        return "\n".join(f"--- {p.name}\n{p.tail()}" for p in procs if p is not None)

    def stop(self) -> None:
        for proc in (self._worker, self._master):
            if proc is not None:
                proc.stop()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
