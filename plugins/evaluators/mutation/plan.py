"""What each mutant needs: its mutated source (cosmic-ray's `mutate_code`), how it is applied
(`swap` or `reload`, see worker.py), which tests can see it, and its timeout."""

from __future__ import annotations

import ast
import difflib
import traceback
import warnings
from dataclasses import dataclass, field

MIN_TIMEOUT = 2.0       # seconds: the floor of a relative timeout
RELATIVE_FACTOR = 10.0  # a mutant may run this many times the baseline of its tests
RELOAD_SECONDS = 1.0    # allowance for a fresh pytest session (reload mode)
# A relative timeout is CPU time, which load does not stretch; the wall-clock limit beside
# it only ends a mutant that waits without computing: WALL_SLACK times the CPU limit (a
# mutant within it finishes on a machine ten times slower) plus the relative timeout in
# wall-clock time (what its tests spend asleep), at least WALL_FLOOR.
WALL_SLACK = 10.0
WALL_FLOOR = 30.0


@dataclass
class Plan:
    job_id: str
    operator: str
    occurrence: int
    line: int
    source: str | None = None          # None: no mutation was possible (cosmic-ray's no-test)
    error: str | None = None           # cosmic-ray's mutation machinery raised: incompetent
    compiles: bool = True              # a mutant that does not compile is killed by collection
    mode: str = "reload"               # swap | reload | uncovered
    functions: list[str] = field(default_factory=list)
    tests: list[str] | None = None     # None: every test
    timeout: float = 0.0               # wall-clock seconds
    cpu_limit: float = 0.0             # CPU seconds (relative mode; 0: none)
    diff: str = ""


def function_bodies(source: str) -> list[tuple[int, int, str]]:
    """(first body line, last line, qualname of the outermost function) per function body."""
    found: list[tuple[int, int, str]] = []

    def walk(node, prefix: str, outer: str | None):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{prefix}{child.name}"
                top = outer or name
                found.append((child.body[0].lineno, child.end_lineno, top))
                walk(child, f"{name}.<locals>.", top)
            elif isinstance(child, ast.ClassDef):
                walk(child, f"{prefix}{child.name}.", outer)
            else:
                walk(child, prefix, outer)

    walk(ast.parse(source), "", None)
    return found


def _diff(original: str, mutated: str, path: str) -> str:
    lines = ["--- mutation diff ---"] + list(difflib.unified_diff(
        original.split("\n"), mutated.split("\n"), fromfile="a/" + path, tofile="b/" + path,
        lineterm=""))
    return "\n".join(lines)


def make_plans(items: list, source: str, collect_lines: set[int],
               baseline: dict[str, dict], mode: str, suite_seconds: float) -> list[Plan]:
    import cosmic_ray.plugins
    from cosmic_ray.mutating import mutate_code

    bodies = function_bodies(source)
    plans = []
    for item in items:
        spec = item.mutations[0]
        plan = Plan(item.job_id, spec.operator_name, spec.occurrence, spec.start_pos[0])
        plans.append(plan)
        try:
            operator = cosmic_ray.plugins.get_operator(spec.operator_name)(
                **(spec.operator_args or {}))
            plan.source = mutate_code(source, operator, spec.occurrence)
        except Exception:  # noqa: B902 - cosmic-ray reports these as incompetent
            plan.error = traceback.format_exc()
            continue
        if plan.source is None:
            continue
        plan.diff = _diff(source, plan.source, str(spec.module_path))
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                compile(plan.source, str(spec.module_path), "exec")
        except (SyntaxError, ValueError):
            plan.compiles = False
            continue
        rows = set(range(spec.start_pos[0], spec.end_pos[0] + 1))
        inside = [b for b in bodies if all(b[0] <= row <= b[1] for row in rows)]
        if not inside or rows & collect_lines:
            plan.mode, plan.tests = "reload", None
            selected = list(baseline)
        else:
            plan.functions = [inside[0][2]]
            selected = [test for test, info in baseline.items() if rows & info["lines"]]
            plan.mode, plan.tests = ("swap", selected) if selected else ("uncovered", [])
        if mode == "seed":
            plan.timeout = max(10.0, 1.5 * suite_seconds)
        else:
            extra = RELOAD_SECONDS if plan.mode == "reload" else 0.0
            cpu = sum(baseline[test]["cpu"] for test in selected)
            wall = sum(baseline[test]["seconds"] for test in selected)
            plan.cpu_limit = max(MIN_TIMEOUT, RELATIVE_FACTOR * cpu + extra)
            plan.timeout = max(WALL_FLOOR, WALL_SLACK * plan.cpu_limit
                               + RELATIVE_FACTOR * wall + extra)
    return plans
