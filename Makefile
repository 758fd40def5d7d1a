# memwrite: `make demo` and `make test` are all a new user needs (Python, pip, Node.js, npm).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export POWERTOOLS_TRACE_DISABLED := true
export NO_MKDOCS_2_WARNING := 1

.PHONY: install demo test test-unit test-integration test-eval eval bench loadtest lint format docs config-docs docs-serve openapi clean

install: $(STAMP)

# Re-installs only when pyproject.toml changes; safe to run any number of times.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev,server,local,client,mcp,langgraph,strands,openai-agents,infra]"
	touch $(STAMP)

demo: install
	$(BIN)/memwrite demo

# The suite on every core (pytest-xdist); the 25 slowest tests are listed at the end.
# worksteal: a worker that runs out of tests takes some of another's queue, so a few slow
# tests near the end do not leave a core idle.
TEST_WORKERS ?= auto
test: install lint docs
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist worksteal --durations=25 tests

test-unit: install
	$(BIN)/python -m pytest -q tests/unit

test-integration: install
	$(BIN)/python -m pytest -q tests/integration

test-eval: install
	$(BIN)/python -m pytest -q tests/eval -s

# The evaluation report of README "Evaluation": table on stdout, charts in bench/eval/.
EVAL_DATA ?= ../shared/data
eval: install
	$(BIN)/memwrite eval --format locomo $(EVAL_DATA)/locomo-dev --format cri $(EVAL_DATA)/cri-persona-1

# One section and a short load: make bench BENCH_ARGS="--only embedded --serve-seconds 10"
BENCH_ARGS ?=
bench: install
	$(BIN)/python -m tests.benchmarks.run $(BENCH_ARGS)

# The standard load runs (docs/loadtest.md), with and without the model budget, live and batch.
loadtest: install
	$(BIN)/python -m memwrite_local.loadtest.standard --out bench/loadtest.json --data $(EVAL_DATA)

# The OpenAPI document (functions/openapi.json), regenerated from the handlers, and the
# TypeScript client's types generated from it (clients/typescript/src/schema.d.ts); commit
# both. A test fails while either differs from what its generator gives.
openapi: install
	$(BIN)/python -m functions.openapi
	cd clients/typescript && (test -d node_modules || npm ci --no-audit --no-fund) && npm run generate

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# The documentation site into site/ (git-ignored); --strict: a broken link or a page missing
# from the nav fails the build (and so `make test`).
docs: install
	$(BIN)/mkdocs build --strict --quiet

# docs/reference/configuration.md from the config models (a unit test fails when it is stale).
config-docs: install
	$(BIN)/python -m memwrite_local.config_docs --write

docs-serve: install
	$(BIN)/mkdocs serve

format: install
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache site
