"""What each mutant needs: its mutated source (cosmic-ray's `mutate_code`, made from one parse:
apply.py), how it is applied
(`swap`, `reload` or `exact`, as the mutation plugin's worker applies them), which tests
can see it, and its timeouts.

Tests that the audit hook saw reading the module's file or starting a process it could not
follow (`disk_tests`; a Python process it follows is fine, see the mutation plugin's
follow.py) cannot be run in memory: their coverage is unknown and what they read is the
unmutated file. Every mutant runs them the exact way (the mutant written to a copy of the
project), after its in-memory tests, when those let it survive. When the disk was seen at
collection or in a fixture (`all_exact`), every mutant runs the exact way.
"""

from __future__ import annotations

import ast
import difflib
import re
import traceback
import warnings
from dataclasses import dataclass

from coral_core import parsing
from coral_core.mutation.annotations import changed_annotations
from coral_core.mutation.apply import Mutator
from coral_core.mutation.filters import MutantFilter

MIN_TIMEOUT = 2.0       # seconds: the floor of a relative timeout
RELATIVE_FACTOR = 10.0  # a mutant may run this many times the baseline of its tests
RELOAD_SECONDS = 1.0    # allowance for a fresh pytest session (reload mode)
# A relative timeout is CPU time, which load does not stretch; the wall-clock limit beside
# it only ends a mutant that waits without computing: WALL_SLACK times the CPU limit (a
# mutant within it finishes on a machine ten times slower) plus the relative timeout in
# wall-clock time (what its tests spend asleep), at least WALL_FLOOR.
WALL_SLACK = 10.0
WALL_FLOOR = 30.0
# The exact path starts a fresh pytest: its start-up (the worker's, measured) counts this
# many times beside the tests' baseline, plus RELOAD_SECONDS.
EXACT_STARTUP = 3.0


@dataclass
class Plan:
    job_id: str
    operator: str
    occurrence: int
    line: int
    skip: str | None = None            # left out by a filter (filters.py): skipped
    source: str | None = None          # None: no mutation was possible (cosmic-ray's no-test)
    error: str | None = None           # cosmic-ray's mutation machinery raised: incompetent
    compiles: bool = True              # a mutant that does not compile is killed by collection
    mode: str = "reload"               # swap | annotate | reload | exact | uncovered | equivalent
    tests: list[str] | None = None     # None: every test
    timeout: float = 0.0               # wall-clock seconds
    cpu_limit: float = 0.0             # CPU seconds (relative mode; 0: none)
    diff: str = ""
    # The exact path: {"tests": [...] or None (all), "timeout": s, "cpu_limit": s}
    exact: dict | None = None          # run after the in-memory tests let the mutant live
    recheck: dict | None = None        # run instead when its in-memory run saw the disk
    # The functions whose annotations alone it changes, each unread in the baseline or read
    # by the worker's own tests only (a `readers` run may find those tests: `annotate`)
    annotations: list | None = None


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

    walk(parsing.parse(source), "", None)
    return found


def statement_lines(source: str) -> dict[int, tuple[int, int]]:
    """{line: (first, last)} of the innermost statement whose head holds the line (a simple
    statement's every line; a compound one's up to its body). A line tracer may report a
    statement on one of its lines only (CPython puts no line event on `if not (` when the
    `not` is folded into the jump), so a mutant counts as reached when any line of its
    statement's head ran."""
    spans: dict[int, tuple[int, int]] = {}
    for node in ast.walk(parsing.parse(source)):
        if not isinstance(node, ast.stmt):
            continue
        body = getattr(node, "body", None)
        last = body[0].lineno - 1 if isinstance(body, list) and body else node.end_lineno
        last = max(node.lineno, last or node.lineno)
        for line in range(node.lineno, last + 1):
            known = spans.get(line)
            if known is None or known[1] - known[0] > last - node.lineno:
                spans[line] = (node.lineno, last)
    return spans


_HUNK = re.compile(r"^@@ -(\d+)(,\d+)? \+(\d+)(,\d+)? @@")


class Changes:
    """One mutant's text against the module's, checked only where it differs: a mutant
    changes a few lines, and compiling and diffing the whole module for each one took most
    of a large module's start (15,000 lines: 60 ms and 20 ms a mutant; a red-team pass)."""

    def __init__(self, source: str):
        self.lines = source.split("\n")
        tree = parsing.parse(source)
        self.spans = [(min([n.lineno] + [d.lineno for d in getattr(n, "decorator_list", ())]),
                       n.end_lineno or n.lineno) for n in tree.body]
        self.futures = [n for n in tree.body
                        if isinstance(n, ast.ImportFrom) and n.module == "__future__"]
        self.head = "\n".join(ast.get_source_segment(source, n) or "" for n in self.futures)
        self._last: tuple[str, list[str], int, int] | None = None

    def _split(self, text: str) -> tuple[list[str], int, int]:
        """The mutant's lines and how many it shares with the module's at the start and at
        the end (kept for the mutant last asked about: its diff and its compile both ask)."""
        if self._last is None or self._last[0] is not text:
            lines = text.split("\n")
            self._last = (text, lines, *self._around(lines))
        return self._last[1], self._last[2], self._last[3]

    def _around(self, mutated: list[str]) -> tuple[int, int]:
        """(lines the two share at the start, at the end)."""
        most = min(len(mutated), len(self.lines))
        start = 0
        while start < most and mutated[start] == self.lines[start]:
            start += 1
        end = 0
        while end < most - start and mutated[-1 - end] == self.lines[-1 - end]:
            end += 1
        return start, end

    def diff(self, mutated: str, path: str) -> str:
        """difflib's unified diff of the whole module, from the lines around the change
        (tests/test_mutation_apply.py holds it to the whole module's on real modules)."""
        theirs, start, end = self._split(mutated)
        cut = max(0, start - 3)
        ours = self.lines[cut:len(self.lines) - max(0, end - 3)]
        window = theirs[cut:len(theirs) - max(0, end - 3)]
        lines = ["--- mutation diff ---"]
        for line in difflib.unified_diff(ours, window, fromfile="a/" + path,
                                         tofile="b/" + path, lineterm=""):
            hunk = _HUNK.match(line)
            if hunk:
                line = (f"@@ -{int(hunk[1]) + cut}{hunk[2] or ''} "
                        f"+{int(hunk[3]) + cut}{hunk[4] or ''} @@" + line[hunk.end():])
            lines.append(line)
        return "\n".join(lines)

    def compiles(self, mutated: str, path: str, operator: str) -> bool:
        """Whether the mutant compiles: the top-level statements it changed, after the
        module's __future__ imports, where that settles it; else the whole module. A
        statement that does not compile alone is checked whole (its context may be why);
        an operator that renames variables is checked whole (a module-level `global`
        elsewhere can refuse a name)."""
        theirs, start, end = self._split(mutated)
        first, last = start + 1, len(self.lines) - end  # the changed lines, 1-based
        touched = [span for span in self.spans if span[0] <= max(first, last)
                   and span[1] >= min(first, last)]
        if touched and "Variable" not in operator and not any(
                n.lineno <= touched[-1][1] and n.end_lineno >= touched[0][0]
                for n in self.futures):
            low = min(touched[0][0], first)
            high = max(touched[-1][1], last) + len(theirs) - len(self.lines)
            if _compiles(self.head + "\n" * low + "\n".join(theirs[low - 1:high]), path):
                return True
        return _compiles(mutated, path)


def _compiles(text: str, path: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(text, path, "exec")
        return True
    except (SyntaxError, ValueError):
        return False


def make_plans(items: list, source: str, collect_lines: set[int],
               baseline: dict[str, dict], mode: str, suite_seconds: float,
               disk_tests: frozenset[str] | set[str] = frozenset(), all_exact: bool = False,
               startup: tuple[float, float] = (0.0, 0.0),
               keep: MutantFilter | None = None,
               unread: frozenset | set = frozenset(),
               watchable: frozenset | set = frozenset()) -> list[Plan]:
    """One Plan per work item. `disk_tests`, `all_exact`: what the audit hook saw (see the
    module's docstring); `startup`: a worker's start-up (CPU seconds, seconds); `keep`: which
    mutants to run (the others are skipped); `unread`: the functions (name, first line)
    whose annotations the baseline never read (annotations.py); `watchable`: those only
    the worker's own tests read (their readers can be found: `annotate`)."""
    mutator = Mutator(source)
    changes = Changes(source)
    bodies = function_bodies(source)
    spans = statement_lines(source)
    order = list(baseline)
    # No line of the module ran, at collection or in any test: no mutant of it is reached
    # (cosmic-ray's tests pass on each, one that does not compile included).
    untouched = not collect_lines and not any(row["lines"] for row in baseline.values())
    memory = [test for test in order if test not in disk_tests]
    disk = [test for test in order if test in disk_tests]
    plans = []
    for item in items:
        spec = item.mutations[0]
        plan = Plan(item.job_id, spec.operator_name, spec.occurrence, spec.start_pos[0])
        plans.append(plan)
        if keep is not None:
            plan.skip = keep.reason(spec.operator_name, spec.start_pos[0], spec.end_pos[0])
            if plan.skip:
                continue
        try:
            plan.source = mutator.mutated(spec.operator_name, spec.operator_args,
                                          spec.occurrence)
        except Exception:  # noqa: B902 - cosmic-ray reports these as incompetent
            plan.error = traceback.format_exc()
            continue
        if plan.source is None:
            continue
        plan.diff = changes.diff(plan.source, str(spec.module_path))
        if untouched and not disk_tests and not all_exact:
            plan.mode, plan.tests = "uncovered", []
            continue
        if not changes.compiles(plan.source, str(spec.module_path), spec.operator_name):
            plan.compiles = False
            continue
        if all_exact:
            plan.mode, plan.tests = "exact", []
            plan.exact = _stage(None, order, baseline, mode, suite_seconds, startup)
            plan.cpu_limit, plan.timeout = plan.exact["cpu_limit"], plan.exact["timeout"]
            continue
        rows = set(range(spec.start_pos[0], spec.end_pos[0] + 1))
        reach = rows.union(*(range(spans[r][0], spans[r][1] + 1) for r in rows if r in spans))
        inside = [b for b in bodies if all(b[0] <= row <= b[1] for row in rows)]
        if not inside or reach & collect_lines:
            changed = changed_annotations(source, plan.source) \
                if (unread or watchable) and not disk_tests else None
            if changed and changed <= unread:
                plan.mode, plan.tests = "equivalent", []  # survived, proven without a run
                continue
            plan.mode, plan.tests = "reload", (memory if disk else None)
            if changed and changed <= set(unread) | set(watchable):
                plan.annotations = sorted(changed)
            selected = memory
        else:
            selected = [test for test in memory if reach & baseline[test]["lines"]]
            plan.mode, plan.tests = ("swap", selected) if selected else ("uncovered", [])
        _limit(plan, selected, baseline, mode, suite_seconds)
        chosen = set(selected)
        both = None if plan.mode == "reload" else \
            [test for test in order if test in disk_tests or test in chosen]
        plan.recheck = _stage(both, order, baseline, mode, suite_seconds, startup)
        if disk:
            plan.exact = _stage(disk, order, baseline, mode, suite_seconds, startup)
            if not selected:  # nothing to run in memory
                plan.mode, plan.tests = "exact", []
                plan.cpu_limit, plan.timeout = plan.exact["cpu_limit"], plan.exact["timeout"]
    return plans


def _limit(plan: Plan, selected: list[str], baseline: dict[str, dict], mode: str,
           suite_seconds: float) -> None:
    """The mutant's timeouts, from the baseline of the tests it runs in memory."""
    if mode == "seed":
        plan.timeout = max(10.0, 1.5 * suite_seconds)
        return
    extra = RELOAD_SECONDS if plan.mode == "reload" else 0.0
    cpu = sum(baseline[test]["cpu"] for test in selected)
    wall = sum(baseline[test]["seconds"] for test in selected)
    plan.cpu_limit = max(MIN_TIMEOUT, RELATIVE_FACTOR * cpu + extra)
    plan.timeout = max(WALL_FLOOR, WALL_SLACK * plan.cpu_limit + RELATIVE_FACTOR * wall + extra)


def annotate(plans: list[Plan], readers: dict[tuple[str, int], list[str]],
             unread: frozenset | set, baseline: dict[str, dict], mode: str,
             suite_seconds: float, startup: tuple[float, float] = (0.0, 0.0)) -> None:
    """Mutants that change only annotations the worker's tests read run those tests alone
    (`annotate`), where a `readers` run found, for each changed function not in `unread`,
    the tests that read it (`readers`: {(name, first line): tests}; a function it could
    not watch, or that no test read there, leaves the mutant a `reload`)."""
    order = list(baseline)
    for plan in plans:
        if plan.mode != "reload" or not plan.annotations:
            continue
        found = [readers.get(tuple(key)) for key in plan.annotations
                 if tuple(key) not in unread]
        if not found or not all(found):
            continue
        chosen = {test for tests in found for test in tests}
        selected = [test for test in order if test in chosen]
        plan.mode, plan.tests = "annotate", selected
        _limit(plan, selected, baseline, mode, suite_seconds)
        plan.recheck = _stage(selected, order, baseline, mode, suite_seconds, startup)


def _stage(tests: list[str] | None, order: list[str], baseline: dict[str, dict], mode: str,
           suite_seconds: float, startup: tuple[float, float]) -> dict:
    """An exact run of `tests` (None: the whole suite) and its limits: the tests' baseline
    as in memory, plus a fresh pytest's start-up."""
    if mode == "seed":
        return {"tests": tests, "timeout": max(10.0, 1.5 * suite_seconds), "cpu_limit": 0.0}
    chosen = order if tests is None else tests
    cpu = sum(baseline[test]["cpu"] for test in chosen)
    wall = sum(baseline[test]["seconds"] for test in chosen)
    extra_cpu = RELOAD_SECONDS + EXACT_STARTUP * startup[0]
    extra_wall = RELOAD_SECONDS + EXACT_STARTUP * startup[1]
    cpu_limit = max(MIN_TIMEOUT, RELATIVE_FACTOR * cpu + extra_cpu)
    timeout = max(WALL_FLOOR, WALL_SLACK * cpu_limit + RELATIVE_FACTOR * wall + extra_wall)
    return {"tests": tests, "timeout": timeout, "cpu_limit": cpu_limit}
