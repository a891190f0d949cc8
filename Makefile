# The two commands of the README: `make demo` and `make test` (no root needed: Python 3.11+,
# make, and Java for Spark). Each creates .venv when it is missing and installs the project
# into it. `make test-native` runs the tests that need Go and Debian's nats.go sources.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-dev
DEMO_STAMP := $(VENV)/.installed-demo

.PHONY: demo spark-demo spark-faults test test-native test-thorough lint types unit bench bench-python bench-native chart soak faults faults-report clean

# The benchmarks run the peers that need Python 3.13 (natsio, nats-core) beside ours and
# nats-py in one venv, .venv-bench, built with the first Python >= 3.13 found (python3.14,
# python3.13, then pyenv's versions); without one, .venv (3.11) runs them without those peers.
BENCH_PYTHON ?= $(shell for p in python3.14 python3.13; do $$p -c '' >/dev/null 2>&1 && { command -v $$p; exit 0; }; done; \
	r=$$(pyenv root 2>/dev/null) && ls -d $$r/versions/3.1[3-9]*/bin/python3 2>/dev/null | tail -1)
BVENV := .venv-bench
BSTAMP := $(BVENV)/.installed-bench
BPY := $(if $(BENCH_PYTHON),$(BVENV)/bin/python,$(BIN)/python)

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(DEMO_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[server]"
	touch $@

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $@ $(DEMO_STAMP)

# Go and Debian's nats.go sources, for the benchmarks' native anchor and the tests marked
# `native`: Debian's packages, installed by apt-get when missing (as root, as in CI).
# `make test` never needs them.
GO_STAMP := $(VENV)/.installed-go
$(GO_STAMP): | $(BIN)/python
	@if command -v go >/dev/null && [ -d /usr/share/gocode/src/github.com/nats-io/nats.go ]; then :; \
	else apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
		--no-install-recommends golang-go golang-github-nats-io-go-nats-dev; fi
	touch $@

demo: $(DEMO_STAMP)
	$(BIN)/python -m jetstream demo

# JetStream -> Spark -> JetStream on an embedded server and local Spark (needs Java 17+);
# `make spark-demo CONNECT=1`: the same through Spark Connect (a server on local[2]).
spark-demo: $(STAMP)
	$(BIN)/python examples/spark_pipeline.py $(if $(CONNECT),--connect)

lint: $(STAMP)
	$(BIN)/ruff check jetstream tests benchmarks examples
	$(BIN)/ruff format --check jetstream tests benchmarks examples

types: $(STAMP)
	$(BIN)/mypy --strict jetstream
	$(BIN)/mypy --strict examples

# Two workers (pytest-xdist; on two cores, four were no faster: the Spark and fault tests
# are bound by the CPU): the tests of a module stay together, each kind of Spark session on
# a worker of its own (tests/conftest.py); TEST_WORKERS=0 runs them all in one process.
TEST_WORKERS ?= 2

test: lint types
	$(BIN)/python -m pytest -q -m "not native" $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadgroup)

# The tests marked `native` (the benchmarks' native anchor, the services' interop with
# nats.go, the server profiles Go builds or reads), after Go and nats.go are installed.
test-native: $(STAMP) $(GO_STAMP)
	$(BIN)/python -m pytest -q -m native

# The property tests with every example they ask for (`make test` runs a tenth of them:
# the Hypothesis profile `ci`; this one is `thorough`).
test-thorough: $(STAMP)
	HYPOTHESIS_PROFILE=thorough $(BIN)/python -m pytest -q tests/unit tests/spark/test_frames.py

unit: $(STAMP)
	$(BIN)/python -m pytest -q tests/unit

$(BSTAMP): pyproject.toml
	$(BENCH_PYTHON) -m venv $(BVENV)
	$(BVENV)/bin/python -m pip install --quiet --upgrade pip
	$(BVENV)/bin/python -m pip install --quiet -e ".[bench]"
	touch $@

# Every benchmark, then the Spark one (in .venv, which has pyspark), then the native anchor.
bench: bench-python bench-native
	$(BIN)/python -m benchmarks.bench_spark

bench-python: $(STAMP) $(if $(BENCH_PYTHON),$(BSTAMP))
	@if [ -n "$(BENCH_PYTHON)" ]; then echo "peers: nats-py, natsio, nats-core ($(BPY))"; \
	else echo "no Python >= 3.13 here: natsio and nats-core are not measured, only nats-py"; fi
	$(BPY) -m benchmarks.bench_parser
	$(BPY) -m benchmarks.bench_core
	$(BPY) -m benchmarks.bench_js
	$(BPY) -m benchmarks.bench_kv
	$(BPY) -m benchmarks.bench_objectstore

# The same workloads with the Go client (benchmarks/native, built offline against Debian's
# nats.go); without Go it says the native column is skipped and succeeds.
bench-native: $(STAMP) $(GO_STAMP)
	$(BIN)/python -m benchmarks.bench_native

# The performance page's chart and table, from one run of every client benchmark and the
# native anchor (about twenty minutes): docs/assets/speedup.{svg,txt,jsonl,caption}.
chart: $(STAMP) $(if $(BENCH_PYTHON),$(BSTAMP))
	$(BPY) -m benchmarks.chart --run --svg docs/assets/speedup.svg

# Not part of `make test`: ten minutes of cuts and blackholes, then leak checks.
soak: $(STAMP)
	$(BIN)/python -m tests.faults.soak --seconds 600

# The Spark fault matrix whole: every path of the Spark adapter against every fault, and the
# Spark Connect cells (about half an hour; `make test` runs one cell per path).
spark-faults: $(STAMP)
	SPARK_FAULTS=all $(BIN)/python -m pytest -q -s tests/spark/test_faults.py

# The fault tests alone (part of `make test` too), the recovery matrix among them.
faults: $(STAMP)
	$(BIN)/python -m pytest -q tests/faults

# The fault-suite timing figures against their bars (reported, never asserted), then the
# recovery matrix: each cell's recovery time against the 2 s target.
# `make faults-report REPORT=--bounds-only`: only the figures of the bounds the tests assert
# generously (a healed blackhole, a hostile op, a backoff step), in a minute or so.
faults-report: $(STAMP)
	$(BIN)/python -m tests.faults.report $(REPORT)

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
