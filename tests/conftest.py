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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist (``make test`` runs ``-n 2 --dist loadgroup``): the tests of a
    module stay together on one worker, in order (module-scoped servers, the docs' pages
    run in sequence), and the Spark tests of each kind of session go to one worker of
    their own, so that a worker starts one Spark session at most."""
    if not hasattr(config, "workerinput") and not getattr(config.option, "numprocesses", None):
        return
    for item in items:
        group = item.nodeid.split("::", 1)[0]
        callspec = getattr(item, "callspec", None)
        kind = callspec.params.get("spark") if callspec is not None else None
        if kind is not None:
            group = f"spark-{kind}"
        item.add_marker(pytest.mark.xdist_group(group))
