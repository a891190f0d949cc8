"""House rules checked as tests: every public name is exported on purpose. (The layers,
the sans-IO protocol and the size of modules are checked by tests/unit/test_layers.py.)"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

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
    # the DESIGN.md contract
    for name in ("connect", "Client", "Msg", "NatsError", "TimeoutError", "errors"):
        assert name in jetstream.__all__
    assert issubclass(jetstream.TimeoutError, TimeoutError)
    assert issubclass(jetstream.BadSubjectError, ValueError)


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
