"""`--resume` on a session whose module, tests or watched files changed since its run: the
mutants are enumerated afresh, and each one whose key and dependencies
(coral_core.mutation.fingerprint) equal an earlier mutant's takes that mutant's verdict
instead of running again. Only verdicts reached in memory on the covering tests (`swap`)
are reused: code run at import, and tests that read files or start processes, run again."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from coral_core.mutation.fingerprint import (
    dependencies, enclosing, environment, file_digest, files_digest, mutant_key,
    outermost_functions, outside_functions, ran_functions, referenced,
)
from coral_core.mutation.plan import Plan
from coral_core.mutation.session import Session, Verdict


@dataclass(frozen=True)
class Earlier:
    """A verdict of the session before the change, and what it rested on."""

    deps: str
    verdict: Verdict


def what_changed(meta: dict, meta_now: dict, project: Path) -> list[str]:
    """Why the session's verdicts may no longer hold (empty: a plain resume)."""
    why = []
    if meta.get("module_sha256") != meta_now["module_sha256"]:
        why.append("the module changed")
    if "tests_sha256" in meta and meta["tests_sha256"] != meta_now["tests_sha256"]:
        why.append("the tests changed")  # (a session made before tests were digested:
        # its resume continues it, as it always did)
    watched = meta.get("watched") or {}
    moved = sorted(name for name, was in watched.items() if file_digest(project / name) != was)
    if moved:
        why.append(f"{moved[0]} changed" + (f" (and {len(moved) - 1} more)" if len(moved) > 1
                                            else ""))
    return why


def earlier_verdicts(session: Session) -> dict[str, Earlier]:
    """{key: Earlier} of the reusable verdicts: the session's own (a key two mutants share
    is left out), over those kept from before the last edit (`coral_earlier`)."""
    kept = {key: Earlier(deps, verdict) for key, (deps, verdict)
            in session.saved_earlier().items()}
    results, rows = session.results(), session.mutant_rows()
    kills: dict[str, list[tuple[str, str]]] = {}
    for job_id, test, how in session.kills():
        kills.setdefault(job_id, []).append((test, how))
    found: dict[str, Earlier] = {}
    shared = set()
    for job_id, (key, deps) in session.fingerprints().items():
        row = rows.get(job_id)
        if deps is None or job_id not in results or row is None or row[1] != "swap":
            continue
        if key in found:
            shared.add(key)
        found[key] = Earlier(deps, Verdict(job_id, results[job_id], row[0], row[1], row[2],
                                           bool(row[3]), tuple(kills.get(job_id, ()))))
    for key in shared:
        found.pop(key)
    return {**kept, **found}


def fingerprints(plans: list[Plan], source: str, module: str, baseline: dict[str, dict],
                 test_files: dict[str, list[str] | None], watched_now: dict[str, str | None],
                 project: Path) -> dict[str, tuple[str, str | None]]:
    """{job_id: (key, deps)} of the mutants run in memory on their covering tests."""
    functions = outermost_functions(source)
    outside = outside_functions(source, functions)
    names = referenced(source, functions)
    digests = {test: (files_digest(project, files) if files is not None else None)
               for test, files in test_files.items()}
    env = environment(project, watched_now)
    ran = {test: ran_functions(row["lines"], functions) for test, row in baseline.items()}
    prints = {}
    for plan in plans:
        if plan.mode != "swap" or plan.exact is not None or plan.source is None:
            continue
        key = mutant_key(module, plan.operator, source, plan.source, functions)
        if key is not None:
            home = enclosing(functions, plan.line)
            named = names.get(home.name, set()) if home is not None else set()
            prints[plan.job_id] = (key, dependencies(plan.tests or [], ran, digests, outside,
                                                     env, named))
    return prints


def watched(project: Path, imported: list[str], test_files: dict[str, list[str] | None],
            module: str) -> dict[str, str | None]:
    """{file: digest} of the imported project files besides tests and the module: a
    change there makes the next `--resume` re-check every verdict."""
    own = {name for files in test_files.values() for name in files or ()} | {module}
    return {name: file_digest(project / name) for name in imported if name not in own}


def reuse(session: Session, plans: list[Plan], prints: dict[str, tuple[str, str | None]],
          earlier: dict[str, Earlier], progress) -> set[str]:
    """Record the earlier verdict of every plan whose key and dependencies are unchanged
    (with its diff as the code is now); the job ids so settled."""
    import attrs

    settled, verdicts = set(), []
    for plan in plans:
        key, deps = prints.get(plan.job_id, (None, None))
        old = earlier.get(key) if deps is not None else None
        if old is None or old.deps != deps:
            continue
        verdicts.append(replace(old.verdict, job_id=plan.job_id,
                                result=attrs.evolve(old.verdict.result, diff=plan.diff)))
        settled.add(plan.job_id)
        if progress:
            progress.advance(plan, verdicts[-1].result)
    session.record_many(verdicts)
    if settled:
        before = session.meta().get("reused") or []
        session.set_meta({"reused": sorted(set(before) | settled)})
    return settled
