"""House rules checked as tests (docs/design.md, "Rules of the house"): every public name
is exported on purpose, and optional integrations cost nothing when unused. (The layers,
the sans-IO protocol and the size of modules are checked by tests/unit/test_layers.py.)"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import subprocess
import sys

import pytest

import jetstream
import jetstream.core
from jetstream.advisories import DeadLetters
from jetstream.js import JetStreamContext
from jetstream.kv.manager import KeyValueManager
from jetstream.objectstore.manager import ObjectStoreManager


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
    # the public API of docs/design.md
    for name in ("connect", "Client", "Msg", "NatsError", "TimeoutError", "errors"):
        assert name in jetstream.__all__
    assert issubclass(jetstream.TimeoutError, TimeoutError)
    assert issubclass(jetstream.BadSubjectError, ValueError)


def test_every_error_is_exported_with_its_family() -> None:
    """A user can name every error the package raises from ``jetstream``: each public
    class of ``jetstream.errors``, family bases included (``KeyValueError``,
    ``ObjectStoreError``, ``JetStreamApiError``...), is the same object at the top."""
    classes = {
        name: obj
        for name, obj in vars(jetstream.errors).items()
        if isinstance(obj, type)
        and issubclass(obj, BaseException)
        and not name.startswith("_")
        and obj.__module__ == "jetstream.errors"
    }
    assert set(classes) == set(jetstream.errors.__all__)
    for name, cls in classes.items():
        assert name in jetstream.__all__, name
        assert getattr(jetstream, name) is cls, name
        for base in cls.__mro__[1:]:
            if base.__module__ == "jetstream.errors" and not base.__name__.startswith("_"):
                assert base.__name__ in jetstream.__all__, (name, base.__name__)
    for family in ("KeyValueError", "ObjectStoreError", "ReconnectBufferFullError"):
        assert family in jetstream.__all__, family
    assert issubclass(jetstream.ObjectStoreExistsError, jetstream.ObjectStoreError)
    assert issubclass(jetstream.BucketExistsError, jetstream.KeyValueError)


#: what public calls hand out, by the name the reference pages use
RETURNED = {
    "Consumer.messages": ("MessageStream", "PushStream"),
    "Consumer.consume": ("ConsumeContext",),
    "OrderedConsumer.messages": ("OrderedStream",),
    "JetStream.dead_letters": ("AdvisoryStream", "DeadLetterAdvisory"),
    "Client.events": ("EventStream", "ConnectionEvent"),
    "MsgMetadata.sequence": ("SequencePair",),
}


def test_returned_types_are_exported() -> None:
    """What a public call returns is importable from ``jetstream`` under the name the
    reference pages give it, and it is the very class the call returns."""
    from jetstream._pull import MessageStream
    from jetstream._push import PushStream
    from jetstream._reader import ConsumeContext

    for names in RETURNED.values():
        for name in names:
            assert name in jetstream.__all__, name
    assert jetstream.MessageStream is MessageStream
    assert jetstream.PushStream is PushStream
    assert jetstream.ConsumeContext is ConsumeContext
    assert jetstream.OrderedStream is jetstream.ordered.OrderedStream
    assert jetstream.EventStream is jetstream.core.EventStream


def test_reference_pages_name_public_objects_only() -> None:
    """The API reference documents objects by their public path: no ``:::`` directive
    names a private module or member."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "docs" / "reference"
    private = []
    for page in sorted(root.glob("*.md")):
        for line in page.read_text().splitlines():
            if line.startswith("::: "):
                target = line[4:].strip()
                if any(part.startswith("_") for part in target.split(".")):
                    private.append(f"{page.name}: {target}")
    assert not private, private


def test_connect_hands_out_the_composed_client() -> None:
    """``jetstream.connect`` takes the options of the core's and makes the ``Client`` that
    has ``jetstream()``; the core client has none (the core knows nothing of JetStream)."""
    assert inspect.signature(jetstream.connect) == inspect.signature(jetstream.core.connect)
    assert jetstream.connect.__doc__ == jetstream.core.connect.__doc__
    assert jetstream.connect("nats://127.0.0.1:1")._client_type is jetstream.Client
    assert jetstream.core.connect("nats://127.0.0.1:1")._client_type is jetstream.core.Client
    assert issubclass(jetstream.Client, jetstream.core.Client)
    assert not hasattr(jetstream.core.Client, "jetstream")
    # What nc.jetstream() returns: the context with the bucket management of the views.
    for base in (JetStreamContext, DeadLetters, KeyValueManager, ObjectStoreManager):
        assert issubclass(jetstream.JetStream, base), base
    for name in ("key_value", "create_key_value", "object_store", "create_object_store"):
        assert not hasattr(JetStreamContext, name), name
        assert callable(getattr(jetstream.JetStream, name)), name
    assert callable(jetstream.JetStream.dead_letters)


def _loaded_after(code: str) -> set[str]:
    """The modules a fresh interpreter holds after running ``code``."""
    done = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport sys; print(' '.join(sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
    )
    return set(done.stdout.split())


def test_import_jetstream_loads_its_names_on_first_use() -> None:
    """``import jetstream`` is the package and its version alone (each name comes with
    its module on first use, benchmarks/import_time.py measures it); connecting needs no
    optional integration: no service, tracing, Spark or CLI module, nor their packages."""
    ours = {m for m in _loaded_after("import jetstream") if m.startswith("jetstream")}
    assert ours == {"jetstream", "jetstream._version"}
    loaded = _loaded_after("import jetstream\njetstream.connect\njetstream.StreamConfig")
    optional = ("jetstream.service", "jetstream.spark", "jetstream.cli", "jetstream.testing")
    optional += ("jetstream._tracing", "jetstream.core._otel", "jetstream.embedded")
    assert not {
        m for m in loaded if m in optional or m.startswith(tuple(f"{o}." for o in optional))
    }
    for package in ("opentelemetry", "pyspark", "rich", "uvloop", "nkeys", "nats"):
        assert package not in loaded, package
    assert set(jetstream.__all__) <= set(dir(jetstream))
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        jetstream.nope  # noqa: B018
