# Coral: `make run` runs the main job, `make test` runs the test suite.
# Both create .venv if it is missing and install Coral into it (torch pinned first).

PYTHON ?= python3
VENV ?= .venv
TORCH ?= torch==2.13.0
BIN := $(VENV)/bin
STAMP := $(VENV)/.coral-installed

.PHONY: install run test test-fast test-loaded test-loaded-all bench lint clean

# The last step gives Coral's own modules bytecode, as a regular install has (an editable
# install writes it on first import, unless PYTHONDONTWRITEBYTECODE is set: then every
# start compiles them).
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH)"
	PYTHONWARNINGS=ignore $(BIN)/python -m pip install --quiet -e ".[hf,openai,test,evolution,mutation,ray]"
	$(BIN)/python -m compileall -q coral_core cli plugins
	touch $(STAMP)

install: $(STAMP)

# QuixBugs comes from CORAL_DATA_DIR (or --data-dir); without it, the pinned upstream archive
# is fetched once into the user cache.
run: install
	@if [ -z "$$CORAL_DATA_DIR" ]; then $(BIN)/coral datasets fetch quixbugs; fi
	$(BIN)/coral run --plugin quixbugs

# Each test file whole on one pytest worker (its module-scoped fixtures are built once), the
# longest files first (tests/schedule.py: xdist's own reordering would undo that). The
# plain pass runs one worker more than there are cores (at most 4): many tests wait on the
# processes they start. Beside the hogs, one per core (a third was slower on 2 cores).
CORES ?= $(shell n=$$(nproc); [ $$n -ge 4 ] && echo 4 || echo $$n)
WORKERS ?= $(shell n=$$(nproc); [ $$n -ge 4 ] && echo 4 || echo $$((n + 1)))
PARALLEL := -n $(WORKERS) --dist loadfile --no-loadscope-reorder
LOADED_PARALLEL := -n $(CORES) --dist loadfile --no-loadscope-reorder

# Every test once: the load-sensitive ones (marked `loaded`: the sandbox, every objective,
# CPU budgets) beside two CPU-bound processes per core, where a verdict that depends on the
# machine's load shows; the rest plain.
test: install
	$(BIN)/python -m pytest $(PARALLEL) -m "not loaded"
	$(MAKE) --no-print-directory test-loaded

# Tests that start no process (tests/tiers.py marks the others slow): a minute or two.
test-fast: install
	$(BIN)/python -m pytest -m "not slow"

test-loaded: install
	$(BIN)/python benchmarks/loaded.py -- $(BIN)/python -m pytest $(LOADED_PARALLEL) -m loaded

# The whole suite beside the hogs (about three times as long as `make test`).
test-loaded-all: install
	$(BIN)/python benchmarks/loaded.py -- $(BIN)/python -m pytest $(LOADED_PARALLEL)

bench: install
	$(BIN)/python benchmarks/sandbox.py
	$(BIN)/python benchmarks/determinism.py
	$(BIN)/python benchmarks/models.py

lint: install
	$(BIN)/python -m flake8 --max-line-length 100 coral_core cli plugins tests benchmarks

clean:
	rm -rf $(VENV) *.egg-info runs .pytest_cache
