# The two commands of the README: `make demo` and `make test`.
# Each creates .venv when it is missing and installs the project into it.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-dev
DEMO_STAMP := $(VENV)/.installed-demo

.PHONY: demo spark-demo test lint types unit bench soak faults faults-report clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(DEMO_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[server]"
	touch $@

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $@ $(DEMO_STAMP)

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

test: lint types
	$(BIN)/python -m pytest -q

unit: $(STAMP)
	$(BIN)/python -m pytest -q tests/unit

bench: $(STAMP)
	$(BIN)/python -m benchmarks.bench_parser
	$(BIN)/python -m benchmarks.bench_core
	$(BIN)/python -m benchmarks.bench_js
	$(BIN)/python -m benchmarks.bench_kv
	$(BIN)/python -m benchmarks.bench_objectstore
	$(BIN)/python -m benchmarks.bench_spark

# Not part of `make test`: ten minutes of cuts and blackholes, then leak checks.
soak: $(STAMP)
	$(BIN)/python -m tests.faults.soak --seconds 600

# The fault tests alone (part of `make test` too), the recovery matrix among them.
faults: $(STAMP)
	$(BIN)/python -m pytest -q tests/faults

# The fault-suite timing figures against their bars (reported, never asserted), then the
# recovery matrix: each cell's recovery time against the 2 s target.
faults-report: $(STAMP)
	$(BIN)/python -m tests.faults.report

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
