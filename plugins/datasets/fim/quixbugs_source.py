"""FIM tasks checked by execution: infilling inside the 40 QuixBugs correct programs.

`[dataset.options] source = "quixbugs"`: one task per problem of the split (the QuixBugs
splits hold: a test or extra run that names a training problem is refused), its middle a
line, 2-8 lines or a character span inside a function body, chosen with the seed. The
prefix and suffix are the whole rest of the program, so a completion is put back into it
and run against the problem's tests in the sandbox (evaluator `fim_tests`): pass@k beside
ES/EM. The programs' trailing strings (QuixBugs keeps alternative solutions there) are
removed first: they would hand the model the answer.
"""

from __future__ import annotations

import ast
import itertools
import random
from typing import Sequence

from coral_core import parsing
from coral_core.types import Prompt, Success, Task

from .build import _make, _python_sites

STOPS = ("\n\ndef ", "\nclass ", "\n\n\n", "\nif __name__")


def without_trailing_strings(program: str) -> str:
    """The program less module-level string statements after its last definition."""
    tree = parsing.parse(program)
    body = tree.body
    while body and isinstance(body[-1], ast.Expr) and isinstance(body[-1].value, ast.Constant) \
            and isinstance(body[-1].value.value, str):
        body = body[:-1]
    if not body:
        return program
    lines = program.splitlines(keepends=True)
    return "".join(lines[:body[-1].end_lineno]).rstrip("\n") + "\n"


def _in_functions(program: str) -> list[tuple[int, int]]:
    tree = parsing.parse(program)
    return [(node.body[0].lineno, node.end_lineno or node.lineno) for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]


def infill_task(problem: Task, kind: str, seed: int) -> Task | None:
    program = without_trailing_strings(problem.reference)
    bodies = _in_functions(program)
    sites = sorted(site for site in set(_python_sites(program, kind))
                   if any(a <= site[0] and site[1] <= b for a, b in bodies))
    rng = random.Random(f"{seed}:{kind}:{problem.id}")
    lines = program.splitlines(keepends=True)
    if not sites:
        return None
    # eight seeded draws, then every site in order (a site whose middle the extraction
    # would cut is refused by _make): a problem with any usable site gets a task
    tries = itertools.chain(((rng.choice(sites), rng) for _ in range(8)), (
        (site, random.Random(f"{seed}:{kind}:{problem.id}:{site}")) for site in sites))
    for (first, last), draws in tries:  # lazily: each draw follows the last site's
        made = _make(lines, first, last, kind, draws, "python", whole=True)
        if made is None:
            continue
        prefix, middle, suffix = made
        return Task(
            id=problem.id, dataset="fim", split=problem.split,
            prompt=Prompt(prefix=prefix, suffix=suffix), reference=middle,
            execution=problem.execution, success=Success("infill_pass", 1.0), stop=STOPS,
            candidate_kind="completion", seen_in_training=problem.seen_in_training,
            metadata={"language": "python", "problem": problem.id, "kind": kind,
                      "line": first},
        )
    return None


def quixbugs_infill_tasks(quixbugs, split: str, problems: Sequence[str], kind: str,
                          seed: int) -> list[Task]:
    made = (infill_task(problem, kind, seed) for problem in quixbugs.tasks(split, problems))
    return [task for task in made if task is not None]
