"""Each layer above the core uses the public API of the layers below it: the JetStream
layer (the modules at the top of the package and ``api/``) uses the core client through
its named contract (``core/_contract.py``), and the packages built on JetStream (kv/,
objectstore/, spark/, cli/) use JetStream's public API. No private member or module of
another package, no subclass of another package's class (docs/design.md, "Rules of the
house" and "The core contract").

Read from the sources with ``ast``: an attribute ``x._name`` (not a dunder) on anything
but ``self`` or ``cls`` must name something the package defines itself, and is never
taken from the core client itself (an ``x`` named ``nc``, ``_nc`` or ``client``, the
names the layers give it); an import may not name a private module or member outside the
package; a class may subclass only the exception tree (``jetstream.errors``) and the
documented extension points of the layers below (``EXTENSION_POINTS``).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "jetstream"
#: the JetStream layer: the modules at the top of the package, and api/
LAYER = "jetstream"
CHECKED = (LAYER, "kv", "objectstore", "spark", "cli")
#: classes of another package meant to be subclassed (each documents it): a run of
#: messages (``protocol.ops``), the core client (made by ``with_client_type``) and its
#: message class (made per client by ``Client.msg_class``), and the bucket management
#: of the views, which ``client.py`` mixes into ``JetStream``
EXTENSION_POINTS = {
    ("jetstream.protocol.ops", "MsgRun"),
    ("jetstream.core.client", "Client"),
    ("jetstream.core.message", "Msg"),
    ("jetstream.kv.manager", "KeyValueManager"),
    ("jetstream.objectstore.manager", "ObjectStoreManager"),
}
#: the names the layers give the core client: none of its private members is reached
CLIENT_NAMES = {"nc", "_nc", "client"}
#: underscore names that are public API elsewhere (namedtuple's)
PUBLIC_UNDERSCORED = {"_replace", "_asdict", "_fields", "_make"}


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _module_of(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = (module if is_package else module.rpartition(".")[0]).split(".")
    if node.level > 1:
        base = base[: -(node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def _defined(files: list[Path]) -> set[str]:
    """Every name a package defines: functions, classes, and attributes assigned."""
    names: set[str] = set()
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and _private(node.value)
                and node.value.isidentifier()
            ):
                names.add(node.value)  # __slots__ entries, getattr names
    return names


def _files(package: str) -> list[Path]:
    if package == LAYER:
        return sorted(PACKAGE.glob("*.py")) + sorted((PACKAGE / "api").rglob("*.py"))
    return sorted((PACKAGE / package).rglob("*.py"))


def _is_mine(package: str, target: str) -> bool:
    """Whether an import of ``target`` stays within ``package``."""
    if package == LAYER:
        parts = target.split(".")
        return parts[0] == "jetstream" and (
            len(parts) == 1 or parts[1] == "api" or (PACKAGE / f"{parts[1]}.py").is_file()
        )
    mine = f"jetstream.{package}"
    return target == mine or target.startswith(mine + ".")


def _receiver(node: ast.expr) -> str | None:
    """The last name of an attribute's receiver: ``nc`` of ``self._nc.x``."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def reaches(package: str) -> list[str]:
    """What the modules of ``jetstream.<package>`` take from other packages' privates."""
    files = _files(package)
    own = _defined(files)
    found: list[str] = []
    for path in files:
        module = _module_of(path)
        tree = ast.parse(path.read_text())
        imported: dict[str, tuple[str, str]] = {}  # local name -> (module, name there)
        for node in ast.walk(tree):
            where = f"{path.relative_to(PACKAGE.parent)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.ImportFrom):
                target = _resolve(node, module, path.name == "__init__.py")
                outside = target.partition(".")[0] == "jetstream" and not _is_mine(package, target)
                for alias in node.names:
                    imported[alias.asname or alias.name] = (target, alias.name)
                    if outside and (
                        any(_private(p) for p in target.split(".")) or _private(alias.name)
                    ):
                        found.append(f"{where}: imports {alias.name} from {target}")
            elif isinstance(node, ast.Attribute) and _private(node.attr):
                base = node.value
                if isinstance(base, ast.Name) and base.id in ("self", "cls"):
                    continue
                on_client = _receiver(base) in CLIENT_NAMES
                if (node.attr in own and not on_client) or node.attr in PUBLIC_UNDERSCORED:
                    continue
                found.append(f"{where}: reaches {ast.unparse(node)}")
        for node in ast.walk(tree):
            if not isinstance(node, ast.ClassDef):
                continue
            for b in node.bases:
                name = b.id if isinstance(b, ast.Name) else None
                source, original = imported.get(name or "", ("", ""))
                if not source or source.partition(".")[0] != "jetstream":
                    continue
                if _is_mine(package, source):
                    continue
                if source == "jetstream.errors" or (source, original) in EXTENSION_POINTS:
                    continue
                found.append(
                    f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: class {node.name} "
                    f"subclasses {name} of {source}"
                )
    return found


@pytest.mark.parametrize("package", CHECKED)
def test_package_uses_only_public_api_below(package: str) -> None:
    assert reaches(package) == []


def test_the_check_finds_a_reach(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A private attribute, a private module and a subclass are each found."""
    pkg = tmp_path / "jetstream" / "views"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "mod.py").write_text(
        "from .._pull import PullOptions\n"
        "from ..consumer import Consumer\n"
        "class Mine(Consumer):\n"
        "    def go(self, js):\n"
        "        self._own = 1\n"
        "        js._publisher.x()\n"
        "        return self._own\n"
    )
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", tmp_path / "jetstream")
    found = reaches("views")
    assert [f.split(": ", 1)[1] for f in found] == [
        "imports PullOptions from jetstream._pull",
        "reaches js._publisher",
        "class Mine subclasses Consumer of jetstream.consumer",
    ]


def test_the_check_finds_a_reach_into_the_core(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In the JetStream layer, a private core module, and a private member of the core
    client even under a name the layer also uses for its own, are each found; the
    layer's own private members, its own modules and the extension points pass."""
    pkg = tmp_path / "jetstream"
    (pkg / "api").mkdir(parents=True)
    (pkg / "api" / "__init__.py").write_text("")
    (pkg / "_pull.py").write_text("class PullOptions:\n    pass\n")
    (pkg / "mod.py").write_text(
        "from ._pull import PullOptions\n"
        "from .core._numbered import publish_seq\n"
        "from .core.message import Msg\n"
        "class JsMsg(Msg):\n"
        "    pass\n"
        "class Reader:\n"
        "    def __init__(self, nc, other):\n"
        "        self._nc = nc\n"
        "        self._loop = nc.loop\n"
        "        other._loop.time()\n"
        "        self._nc._loop.time()\n"
        "        nc._wbuf.clear()\n"
    )
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", pkg)
    found = reaches(LAYER)
    assert [f.split(": ", 1)[1] for f in found] == [
        "imports publish_seq from jetstream.core._numbered",
        "reaches self._nc._loop",
        "reaches nc._wbuf",
    ]
