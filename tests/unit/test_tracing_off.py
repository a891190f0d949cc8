"""Tracing is an optional integration: importing jetstream (or jetstream.tracing, or the
Spark integration) imports no OpenTelemetry, and turning it on without the package says
which extra to install, with a typed error that is also an ImportError."""

from __future__ import annotations

import subprocess
import sys


def test_importing_jetstream_imports_no_opentelemetry() -> None:
    code = (
        "import sys, jetstream, jetstream.tracing, jetstream.spark\n"
        "assert not [m for m in sys.modules if m.startswith('opentelemetry')], 'imported'\n"
        "import builtins\n"
        "real = builtins.__import__\n"
        "def deny(name, *a, **k):\n"
        "    if name.startswith('opentelemetry'): raise ImportError('no ' + name)\n"
        "    return real(name, *a, **k)\n"
        "builtins.__import__ = deny\n"
        "try:\n"
        "    jetstream.connect('nats://127.0.0.1:1', tracing=True)\n"
        "except jetstream.TracingUnavailableError as e:\n"
        "    assert isinstance(e, ImportError) and 'pip install opentelemetry-api' in str(e), e\n"
        "    assert \"pip install -e '.[otel]'\" in str(e), e\n"
        "    print('ok')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == "ok", out.stderr
