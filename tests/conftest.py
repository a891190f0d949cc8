"""Shared fixtures: embedded nats-servers, TLS material, and the leaked-task check.

Fixtures:
    nats_server          a fresh JetStream server per test (started; closed afterwards)
    module_nats_server   one JetStream server shared by the tests of a module
    nats_url             the URL of ``nats_server``
    tls_certs            CA, server and client certificates (session-wide, see tests/certs.py)

Every async test whose event loop is function-scoped fails at teardown if tasks other than
the current one are still pending once its fixtures are torn down (after a short grace);
synchronous tests that run a loop of their own do it with ``tests.leaks.run``, which checks
the same before closing it.
When a test fails, the last lines of the logs of the servers it used are added to the report.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Generator, Iterator
from typing import Any

import pytest
import pytest_asyncio

from jetstream.embedded import NatsCluster, NatsServer
from tests.certs import CertPaths, make_certs
from tests.leaks import leak_message, settle_and_describe
from tests.profiles import PROFILE


@pytest.fixture
def nats_server() -> Iterator[NatsServer]:
    """A JetStream-enabled nats-server of its own for one test."""
    with NatsServer() as server:
        yield server


@pytest.fixture(scope="module")
def module_nats_server() -> Iterator[NatsServer]:
    """One JetStream-enabled nats-server shared by a module (streams persist between tests)."""
    with NatsServer() as server:
        yield server


@pytest.fixture
def nats_url(nats_server: NatsServer) -> str:
    """The client URL of the test's own server."""
    return nats_server.url


@pytest.fixture(scope="session")
def tls_certs(tmp_path_factory: pytest.TempPathFactory) -> CertPaths:
    """A CA, a server certificate for localhost/127.0.0.1 and a client certificate."""
    return make_certs(tmp_path_factory.mktemp("certs"))


# --------------------------------------------------------------------------- leaked tasks


@pytest_asyncio.fixture(loop_scope="function")
async def _no_leaked_tasks() -> AsyncIterator[None]:
    yield
    leaked = await settle_and_describe()
    if leaked:
        pytest.fail(leak_message(leaked, "the test"), pytrace=False)


@pytest.fixture(autouse=True)
def _check_leaked_tasks(request: pytest.FixtureRequest) -> None:
    """Attach ``_no_leaked_tasks`` to async tests that run in a loop of their own.

    Tests on a module- or session-scoped loop share it with long-lived fixtures whose tasks
    rightly outlive a single test, so they are not checked.
    """
    marker = request.node.get_closest_marker("asyncio")
    if marker is None:
        return
    scope = (
        marker.kwargs.get("loop_scope")
        or marker.kwargs.get("scope")
        or request.config.getini("asyncio_default_test_loop_scope")
        or "function"
    )
    if scope == "function":
        request.getfixturevalue("_no_leaked_tasks")


# --------------------------------------------------------------------------- failure output


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Append the log tails of the servers a failed test used to its report."""
    report = yield
    if report.failed:
        seen: set[int] = set()
        funcargs: dict[str, Any] = getattr(item, "funcargs", {})
        for name, value in funcargs.items():
            servers = (
                value.servers
                if isinstance(value, NatsCluster)
                else [value]
                if isinstance(value, NatsServer)
                else []
            )
            for server in servers:
                if id(server) in seen:
                    continue
                seen.add(id(server))
                tail = server.log_tail(30)
                if tail:
                    label = server.server_name or server.url
                    report.sections.append((f"nats-server log of {name} ({label})", tail))
    return report


# --------------------------------------------------------------------------- event loops


def pytest_asyncio_loop_factories(config: pytest.Config, item: pytest.Item) -> dict[str, Any]:
    """Run the tests of modules that set ``BOTH_LOOPS = True`` on asyncio and on uvloop;
    every other test on the default asyncio loop."""
    module = getattr(item, "module", None)
    if module is not None and getattr(module, "BOTH_LOOPS", False):
        import uvloop

        return {"asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}
    return {"asyncio": asyncio.new_event_loop}


def pytest_report_header(config: pytest.Config) -> str:
    return f"hypothesis profile: {PROFILE} (HYPOTHESIS_PROFILE; make test-thorough: thorough)"


# --------------------------------------------------------------------------- parallel runs
#
# ``make test`` runs three pytest-xdist workers with the scheduler below: a group of tests
# goes whole to one worker and runs there in order. A group is a module (its
# module-scoped servers start once, the docs' pages run in sequence), except the Spark
# tests that run under both kinds of session: those of each kind form one group, so that
# a worker starts one kind of Spark session. The longest groups are handed out first, so
# that the workers finish together.

#: the groups that take longest (slowest first); the others follow in collection order
LONGEST = (
    "spark-connect",
    "spark-classic",
    "tests/spark/test_faults.py",
    "tests/faults/test_recovery_matrix.py",
    "tests/spark/test_cluster.py",
    "tests/nemesis/test_nemesis.py",
    "tests/spark/test_source_faults.py",
    "tests/faults/test_cluster_consume.py",
    "tests/faults/test_cluster_js.py",
    "tests/docs/test_docs.py",
)


def group_of(nodeid: str) -> str:
    """The group of the test ``nodeid`` (see above)."""
    module = nodeid.split("::", 1)[0]
    if module.startswith("tests/spark/"):
        for kind in ("classic", "connect"):
            if nodeid.endswith(f"[{kind}]"):
                return f"spark-{kind}"
    return module


@pytest.hookimpl(tryfirst=True)  # before xdist's own choice by --dist
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Groups of tests, each whole on one worker, the longest first (see above)."""
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

    config.option.loadscopereorder = False  # the workers' collection order is kept
    return GroupScheduling(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In a worker of a parallel run: the longest groups first (a stable sort, the same
    in every worker, which the scheduler requires)."""
    if not hasattr(config, "workerinput"):
        return
    rank = {group: i for i, group in enumerate(LONGEST)}
    items.sort(key=lambda item: rank.get(group_of(item.nodeid), len(rank)))
