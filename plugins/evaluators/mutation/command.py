"""`coral mutation run`: how good is a test suite? cosmic-ray's mutants and verdicts, run by
warm forking workers (see docs/mutation.md); added to `coral` through
coral_register_commands."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import List, Optional

import typer

from coral_core.terminal import CONTEXT, CoralCommand, CoralGroup, print_json, reserve_stdout

app = typer.Typer(cls=CoralGroup, no_args_is_help=True, context_settings=CONTEXT,
                  help="Mutation testing with cosmic-ray's mutants and verdicts, fast.")


LEFT_OUT = "left out by --operator, --exclude-operator, --lines or pragmas"


def _line(summary: dict) -> str:
    counts = summary.get("counts", {})
    total, left_out = summary["mutation_num"], counts.get("skipped", 0)
    if summary["mutation_score"] < 0:  # -1 in the JSON: said in words here
        why = ("the module offers none" if not total else f"{left_out} {LEFT_OUT}"
               if left_out else "none ran to a kill or a survival")
        return f"no mutation score: of {total} mutants no mutant was killed or survived ({why})"
    # of how many the score is: a sample or a filter runs fewer than the module offers
    fewer = ([f"{summary['sampled']} sampled"] if summary.get("sampled") is not None else [])
    fewer += [f"{left_out} {LEFT_OUT}"] if left_out else []
    return (f"mutation score {summary['mutation_score']:.2f}% "
            f"(killed {counts.get('killed', 0)}, of them timeout {counts.get('timeout', 0)}; "
            f"survived {counts.get('survived', 0)}; incompetent {counts.get('incompetent', 0)}) "
            f"of {total} mutants{' (' + '; '.join(fewer) + ')' if fewer else ''}; "
            "cosmic-ray's score "
            f"{summary['cosmic_ray_score']:.2f}%; interval ±{summary['mutation_uncertainty']:.2f}"
            f" (cr-rate) / ±{summary['mutation_uncertainty_fpc']:.2f} (with the finite-population"
            " correction)")


@app.command("run", cls=CoralCommand)
def run(
    module: List[str] = typer.Option(
        [], "--module", metavar="PATH",
        help="A module to mutate, or a folder of them (repeatable; inside the current folder)."),
    tests: List[str] = typer.Option([], "--tests", metavar="PATH",
                                    help="Test file or folder (repeatable)."),
    session: Optional[Path] = typer.Option(
        None, "--session", metavar="FILE.sqlite",
        help="The session: a cosmic-ray WorkDB (default MODULE.mutation.sqlite here)."),
    workers: Optional[int] = typer.Option(None, "--workers", metavar="N",
                                          help="Parallel workers (default: CPU count)."),
    timeout_mode: Optional[str] = typer.Option(
        None, "--timeout-mode", metavar="relative|seed",
        help="Per-mutant timeout: from each test's baseline time (default), or the seed's "
             "max(10 s, 1.5 x suite time)."),
    resume: bool = typer.Option(False, "--resume",
                                help="Continue the session; finished mutants are not redone."),
    sample: Optional[float] = typer.Option(
        None, "--sample", metavar="FRACTION", help="Run a seeded random fraction of mutants."),
    seed: Optional[int] = typer.Option(None, "--seed", metavar="S",
                                       help="Seed for --sample (default 0)."),
    as_json: bool = typer.Option(False, "--json", help="Print only the JSON summary."),
    executor: str = typer.Option(
        "local", "--executor", metavar="local|ray", show_default=True,
        help="Where the workers run: processes here, or Ray actors (docs/ray.md)."),
    ray_address: str = typer.Option(
        "", "--ray-address", metavar="ADDR",
        help="With --executor ray: the cluster to join (default: start a local Ray)."),
    fresh: bool = typer.Option(False, "--fresh",
                               help="Start an existing session over (its verdicts are lost)."),
    operator: List[str] = typer.Option(
        [], "--operator", metavar="REGEX",
        help="Run only operators matching (from the start of the name; repeatable)."),
    exclude_operator: List[str] = typer.Option(
        [], "--exclude-operator", metavar="REGEX",
        help="Leave out operators matching (repeatable), e.g. core/NumberReplacer."),
    lines: Optional[str] = typer.Option(
        None, "--lines", metavar="RANGES",
        help="Only mutants starting on these lines, e.g. 10-40,55."),
    survivors: Optional[int] = typer.Option(
        None, "--survivors", metavar="N",
        help="List at most N surviving mutants with their diff (default 20; 0: none, -1: all)."),
) -> None:
    """Mutation-test MODULE with TESTS; every verdict is committed as it completes.
    Options may live in pyproject.toml's [tool.coral.mutation]; a flag wins over it."""
    from coral_core.errors import UserError
    from coral_core.mutation.filters import MutantFilter, parse_lines
    from coral_core.mutation.project_config import as_list, check_flag, read_options

    from .campaign import default_session, run_mutation
    from .display import MutationBar, resume_command, survivor_lines

    if as_json:
        reserve_stdout()  # the tests under mutation may print: never onto the document
    kept = read_options(Path.cwd())

    def pick(given, key: str, default=None):
        return check_flag(key, given) if given not in (None, []) else kept.get(key, default)

    given = {"--module": as_list(pick(module, "module")), "--tests": as_list(pick(tests, "tests"))}
    for flag, paths in given.items():
        if any(not str(path).strip() for path in paths):  # an unset shell variable
            raise UserError(f"{flag} takes a path, not an empty string (the whole project "
                            "is '.')")
    modules = [Path(m) for m in given["--module"]]
    test_paths = [Path(t) for t in given["--tests"]]
    if not modules or not test_paths:
        missing = "--module" if not modules else "--tests"
        raise UserError(f"{missing} is needed (or its key in pyproject.toml's "
                        "[tool.coral.mutation])")
    workers = pick(workers, "workers")
    session_path = pick(session, "session")
    session_path = Path(session_path) if session_path is not None else None
    keep = MutantFilter(tuple(as_list(pick(operator, "operators"))),
                        tuple(as_list(pick(exclude_operator, "exclude-operators"))),
                        parse_lines(pick(lines, "lines", "")))
    survivors = pick(survivors, "survivors", 20)
    bar = MutationBar(enabled=not as_json and sys.stderr.isatty())
    try:
        with bar:
            summary = run_mutation(modules, test_paths, session_path, workers,
                                   pick(timeout_mode, "timeout-mode", "relative"), resume,
                                   pick(sample, "sample"), pick(seed, "seed", 0), progress=bar,
                                   executor=executor, ray_address=ray_address, fresh=fresh,
                                   keep=keep)
    except KeyboardInterrupt:
        chosen = session_path or default_session(Path.cwd(), modules[0])
        if not chosen.exists():
            raise
        sys.stdout.flush()  # every finished verdict is in the session: say how to go on
        sys.stderr.write(f"coral: interrupted; resume with: {resume_command(sys.argv)}\n")
        sys.stderr.flush()
        os._exit(130)  # the workers are gone; no thread may hold the exit
    if as_json:
        print_json(summary)
        return
    if summary.get("skipped"):
        sys.stdout.write(f"mutation testing skipped ({summary['skipped']})\n")
        return
    sys.stdout.write(_line(summary) + "\n")
    if summary.get("changed"):
        sys.stdout.write(f"since the session's last run {', '.join(summary['changed'])}: "
                         f"{summary.get('reused', 0)} verdicts reused (the mutant and what its "
                         "tests ran unchanged), the other mutants run again\n")
    if summary.get("exact"):
        reasons = summary.get("exact_reasons") or ["the tests see the module's file"]
        sys.stdout.write(f"{summary['exact']} mutants ran the exact way (written into a copy of "
                         f"the project, as cosmic-ray does): {reasons[0]}"
                         + (f" (and {len(reasons) - 1} more)" if len(reasons) > 1 else "")
                         + "\n")
    for line in survivor_lines(summary, survivors):
        sys.stdout.write(line + "\n")
    sys.stdout.write(f"session: {summary['session']} (cr-report / cr-html read it)\n")
