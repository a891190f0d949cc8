"""House rules checked as tests: the sans-IO layer stays sans-IO, modules stay small,
every public name is exported on purpose."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import pytest

import jetstream

PACKAGE = Path(jetstream.__file__).parent
MAX_LINES = 800


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", sorted((PACKAGE / "protocol").glob("*.py")), ids=str)
def test_protocol_imports_no_io(path: Path) -> None:
    tree = ast.parse(path.read_text())
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            imported.add(node.module.split(".")[0])
    assert not imported & {"asyncio", "socket", "ssl", "selectors"}, path


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_module_is_small(path: Path) -> None:
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_LINES, f"{path.name} has {lines} lines; split it"


def test_every_module_declares_all() -> None:
    missing = []
    for info in pkgutil.walk_packages(jetstream.__path__, "jetstream."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        if not hasattr(module, "__all__"):
            missing.append(info.name)
            continue
        for name in module.__all__:
            assert hasattr(module, name), f"{info.name}.__all__ names missing {name!r}"
    assert not missing, f"modules without __all__: {missing}"


def test_top_level_exports() -> None:
    for name in jetstream.__all__:
        assert hasattr(jetstream, name), name
    # the DESIGN.md contract
    for name in ("connect", "Client", "Msg", "NatsError", "TimeoutError", "errors"):
        assert name in jetstream.__all__
    assert issubclass(jetstream.TimeoutError, TimeoutError)
    assert issubclass(jetstream.BadSubjectError, ValueError)
