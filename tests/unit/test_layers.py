"""The package's layers, read from its imports: what keeps the design in the code
(docs/design.md, "The layers" and "Rules of the house").

Every module of ``jetstream/`` is parsed with ``ast`` and each of its imports counts,
wherever it is written: at module level, inside a function, or under
``if TYPE_CHECKING:`` (a type that names an upper layer ties the layers together as
surely as a call does). Relative imports are resolved; ``from package import name``
counts as an import of the submodule when ``name`` is one (Python then runs nothing
more of the package, which a submodule's parent has always run first), else of the
package.

The layers, bottom to top (a module may import its own layer and those below):

    base          _version (imports nothing), errors (imports nothing of the package)
    protocol      protocol/: sans-IO wire format; no asyncio, socket, ssl or selectors
    core          core/: the NATS connection and client; knows nothing of JetStream
    services      service/: ADR-32 services, built on the core client alone
    jetstream     api/ and the modules at the top of the package: the JetStream context,
                  streams, consumers, pull, push, ordered, publishing, advisories
    views         kv/, objectstore/: built on the JetStream context
    facade        the package itself and client.py: what connect() returns, composed
                  of the layers below
    integrations  spark/
    testing       testing/ (and the embedded alias): local nats-server processes
    cli           cli/, __main__, demo

Besides: no import cycle anywhere in the package, and no module over 600 lines.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

import jetstream

PACKAGE = Path(jetstream.__file__).parent
MAX_LINES = 600
NO_IO = frozenset({"asyncio", "socket", "ssl", "selectors"})

#: Layers bottom to top: (name, module prefixes). A module belongs to the layer of the
#: longest prefix that matches it; a module directly under jetstream/ that no prefix
#: names belongs to the JetStream layer (a new folder must be given a layer here).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("base", ("jetstream._version", "jetstream.errors")),
    ("protocol", ("jetstream.protocol",)),
    ("core", ("jetstream.core",)),
    ("services", ("jetstream.service",)),
    ("jetstream", ("jetstream.api",)),
    ("views", ("jetstream.kv", "jetstream.objectstore")),
    ("facade", ("jetstream", "jetstream.client")),
    ("integrations", ("jetstream.spark",)),
    ("testing", ("jetstream.testing", "jetstream.embedded")),
    ("cli", ("jetstream.cli", "jetstream.__main__", "jetstream.demo")),
)
RANK = {name: i for i, (name, _) in enumerate(LAYERS)}


# --------------------------------------------------------------------------- reading


def module_name(path: Path, root: Path = PACKAGE) -> str:
    parts = [root.name, *path.relative_to(root).with_suffix("").parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules(root: Path = PACKAGE) -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its ``__init__``)."""
    return {module_name(p, root): p for p in sorted(root.rglob("*.py"))}


def imported_names(tree: ast.AST, name: str, is_package: bool) -> list[tuple[str, str | None]]:
    """``(module, imported name or None)`` of every import in ``tree``, anywhere in it,
    relative ones resolved against module ``name``."""
    package = name if is_package else name.rpartition(".")[0]
    out: list[tuple[str, str | None]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((alias.name, None) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                if node.level > 1:
                    base = base[: -(node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            out.extend((target, alias.name) for alias in node.names)
    return out


def import_graph(mods: Mapping[str, Path]) -> dict[str, set[str]]:
    """Module -> the modules of the package it imports."""
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        tree = ast.parse(path.read_text(), str(path))
        deps: set[str] = set()
        for target, imported in imported_names(tree, name, path.name == "__init__.py"):
            sub = f"{target}.{imported}"
            if imported is not None and sub in mods:
                deps.add(sub)
            elif target in mods:
                deps.add(target)
            elif target.partition(".")[0] == "jetstream":
                # an import of something the package does not have: name it anyway
                deps.add(target)
        deps.discard(name)
        graph[name] = deps
    return graph


def external_imports(path: Path) -> set[str]:
    """Top-level names of every module that ``path`` imports (relative imports left out)."""
    tree = ast.parse(path.read_text(), str(path))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module.split(".")[0])
    return out


# --------------------------------------------------------------------------- checking


def tangles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected components with a cycle: modules that import each other,
    directly or around a loop (each sorted; in order of their first module)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    counter = 0

    def connect(v: str) -> None:  # Tarjan's algorithm, recursive (the graph is small)
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in graph.get(v, ()):
                components.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return sorted(components)


def find_cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """One cycle (as a path a -> ... -> a) per tangle, through its first module."""
    return [_cycle_in(graph, set(c)) for c in tangles(graph)]


def _cycle_in(graph: Mapping[str, Iterable[str]], component: set[str]) -> list[str]:
    """A shortest cycle through the first module of ``component`` (breadth first)."""
    start = min(component)
    parents: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph.get(v, ())):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(parents[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if w in component and w not in parents:
                    parents[w] = v
                    nxt.append(w)
        frontier = nxt
    raise AssertionError(f"no cycle through {start}")  # pragma: no cover


def layer_of(module: str) -> str:
    """The layer of ``module``: the one of the longest prefix naming it (the package
    itself only by its own name), else the JetStream layer for a module at the top."""
    best = ""
    layer = ""
    for name, prefixes in LAYERS:
        for prefix in prefixes:
            inside = module == prefix or (module.startswith(prefix + ".") and "." in prefix)
            if inside and len(prefix) > len(best):
                best, layer = prefix, name
    if layer:
        return layer
    if module.count(".") == 1:
        return "jetstream"
    raise AssertionError(f"{module} is in no layer: add its folder to LAYERS")


def upward_imports(graph: Mapping[str, Iterable[str]]) -> list[str]:
    bad = []
    for module, deps in sorted(graph.items()):
        mine = layer_of(module)
        for dep in sorted(deps):
            theirs = layer_of(dep)
            if RANK[theirs] > RANK[mine]:
                bad.append(f"{module} ({mine}) imports {dep} ({theirs})")
    return bad


# --------------------------------------------------------------------------- the rules

MODULES = modules()
GRAPH = import_graph(MODULES)


def test_no_import_cycle() -> None:
    found = [
        f"{len(members)} modules: {', '.join(members)}\n  e.g. {' -> '.join(cycle)}"
        for members, cycle in zip(tangles(GRAPH), find_cycles(GRAPH), strict=True)
    ]
    assert not found, "modules that import each other:\n" + "\n".join(found)


def test_imports_point_down() -> None:
    bad = upward_imports(GRAPH)
    assert not bad, "imports that point up the layers:\n" + "\n".join(bad)


def test_every_module_has_a_layer() -> None:
    assert {layer_of(m) for m in MODULES} == set(RANK)


def test_version_module_imports_nothing() -> None:
    tree = ast.parse((PACKAGE / "_version.py").read_text())
    found = [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)]
    assert [ast.unparse(n) for n in found] == []
    assert jetstream.__version__ == jetstream._version.__version__


def test_errors_import_nothing_of_the_package() -> None:
    assert GRAPH["jetstream.errors"] == set()


@pytest.mark.parametrize("path", sorted((PACKAGE / "protocol").rglob("*.py")), ids=lambda p: p.name)
def test_protocol_does_no_io(path: Path) -> None:
    assert not external_imports(path) & NO_IO, path


@pytest.mark.parametrize("path", sorted(MODULES.values()), ids=lambda p: module_name(p))
def test_module_is_small(path: Path) -> None:
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_LINES, f"{module_name(path)} has {lines} lines; split it"


# --------------------------------------------------------------------------- the checker


def test_checker_reads_every_kind_of_import(tmp_path: Path) -> None:
    pkg = tmp_path / "jetstream"
    (pkg / "core").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from .core import client\n")
    (pkg / "core" / "__init__.py").write_text("")
    (pkg / "core" / "client.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from ..js import JetStream\n"
        "def jetstream():\n"
        "    from .. import js\n"
        "    import jetstream.stream\n"
    )
    (pkg / "js.py").write_text("from .core.client import jetstream\nfrom . import errors\n")
    (pkg / "stream.py").write_text("")
    (pkg / "errors.py").write_text("")
    graph = import_graph(modules(pkg))
    assert graph["jetstream.core.client"] == {"jetstream.js", "jetstream.stream"}
    assert graph["jetstream.js"] == {"jetstream.core.client", "jetstream.errors"}
    assert graph["jetstream"] == {"jetstream.core.client"}
    assert find_cycles(graph) == [
        ["jetstream.core.client", "jetstream.js", "jetstream.core.client"]
    ]
    assert upward_imports(graph) == [
        "jetstream.core.client (core) imports jetstream.js (jetstream)",
        "jetstream.core.client (core) imports jetstream.stream (jetstream)",
    ]


def test_checker_finds_cycles_and_their_path() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert tangles(graph) == [["a", "b", "c"], ["e"]]
    assert find_cycles(graph) == [["a", "b", "c", "a"], ["e", "e"]]
    assert find_cycles({"a": {"b"}, "b": set()}) == []


def test_checker_places_modules_in_layers() -> None:
    assert layer_of("jetstream.stream") == "jetstream"
    assert layer_of("jetstream.api.stream") == "jetstream"
    assert layer_of("jetstream.core.client") == "core"
    assert layer_of("jetstream.client") == "facade"
    assert layer_of("jetstream") == "facade"
    assert layer_of("jetstream.kv.bucket") == "views"
    assert layer_of("jetstream.service.api") == "services"
    with pytest.raises(AssertionError, match="no layer"):
        layer_of("jetstream.newfolder.thing")
