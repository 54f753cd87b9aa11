"""Scoring model-written test files: `suite` runs one in the sandbox against
one program version with the harness in `inside/` (two processes: the tests and the
program), `mutants` enumerates cosmic-ray's
mutants, `evaluator` turns the runs into the four objectives. Importing this package is
cheap: pytest, coverage and cosmic-ray load only when a test file is scored."""

from coral_core.hookspecs import hookimpl
from coral_core.lazy import Lazy


@hookimpl
def coral_register_evaluators(register):
    register("testgen", Lazy(f"{__name__}.evaluator:TestgenEvaluator"))
