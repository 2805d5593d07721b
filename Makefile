# OrbitMQ's two commands: `make standalone` runs a nameserver and a broker in one process
# on the default ports with data under ./.orbitmq-data; `make test` runs every test tier.
# Both create the virtual environment in .venv on first use.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# pytest-xdist workers for `make test`: most tests wait on real processes, not on the CPU,
# so three workers finish sooner than one even on two cores.
TEST_WORKERS ?= 3

.PHONY: standalone test lint unit integration install clean proto

# setup.py and the C sources: the optional C helpers are compiled by the install (see setup.py).
$(BIN)/.installed: pyproject.toml setup.py src/orbitmq/protocol/_batch_scan.c src/orbitmq/store/_record_pack.c \
		src/orbitmq/filter/_property_scan.c src/orbitmq/spark/_record_columns.c
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,spark,dashboard,compare]'
	touch $@

install: $(BIN)/.installed

standalone: $(BIN)/.installed
	$(BIN)/orbitmq standalone $(ARGS)

lint: $(BIN)/.installed
	$(BIN)/ruff check src tests
	$(BIN)/ruff format --check src tests
	$(BIN)/lint-imports
	$(BIN)/mypy

unit: $(BIN)/.installed
	$(BIN)/pytest tests/unit

integration: $(BIN)/.installed
	$(BIN)/pytest tests/integration tests/fault

# Every tier: static checks, unit, integration (real processes, real C++ client), fault.
test: $(BIN)/.installed
	$(MAKE) --no-print-directory lint
	$(BIN)/pytest tests -n $(TEST_WORKERS) --dist loadgroup

# Regenerate the checked-in gRPC stubs (src/orbitmq/proxy/_pb) from the protos under proto/.
proto: $(BIN)/.installed
	$(BIN)/python -m pip install --quiet -e '.[codegen]'
	$(BIN)/python proto/generate.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
