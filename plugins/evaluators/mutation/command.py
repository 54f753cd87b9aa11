"""`coral mutation run`: how good is a test suite? cosmic-ray's mutants and verdicts, run by
warm forking workers (see docs/mutation.md); added to `coral` through
coral_register_commands."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Optional

import typer

from coral_core.terminal import CONTEXT, CoralCommand, CoralGroup, print_json, reserve_stdout

app = typer.Typer(cls=CoralGroup, no_args_is_help=True, context_settings=CONTEXT,
                  help="Mutation testing with cosmic-ray's mutants and verdicts, fast.")


def _line(summary: dict) -> str:
    counts = summary.get("counts", {})
    return (f"mutation score {summary['mutation_score']:.2f}% "
            f"(killed {counts.get('killed', 0)}, of them timeout {counts.get('timeout', 0)}; "
            f"survived {counts.get('survived', 0)}; incompetent {counts.get('incompetent', 0)}) "
            f"of {summary['mutation_num']} mutants; cosmic-ray's score "
            f"{summary['cosmic_ray_score']:.2f}%; interval ±{summary['mutation_uncertainty']:.2f}"
            f" (cr-rate) / ±{summary['mutation_uncertainty_fpc']:.2f} (with the finite-population"
            " correction)")


@app.command("run", cls=CoralCommand)
def run(
    module: Path = typer.Option(..., "--module", metavar="PATH",
                                help="The module to mutate (inside the current folder)."),
    tests: List[Path] = typer.Option(..., "--tests", metavar="PATH",
                                     help="Test file or folder (repeatable)."),
    session: Optional[Path] = typer.Option(
        None, "--session", metavar="FILE.sqlite",
        help="The session: a cosmic-ray WorkDB (default MODULE.mutation.sqlite here)."),
    workers: Optional[int] = typer.Option(None, "--workers", metavar="N",
                                          help="Parallel workers (default: CPU count)."),
    timeout_mode: str = typer.Option(
        "relative", "--timeout-mode", metavar="relative|seed", show_default=True,
        help="Per-mutant timeout: from each test's baseline time, or the seed's "
             "max(10 s, 1.5 x suite time)."),
    resume: bool = typer.Option(False, "--resume",
                                help="Continue the session; finished mutants are not redone."),
    sample: Optional[float] = typer.Option(
        None, "--sample", metavar="FRACTION", help="Run a seeded random fraction of mutants."),
    seed: int = typer.Option(0, "--seed", metavar="S", help="Seed for --sample."),
    as_json: bool = typer.Option(False, "--json", help="Print only the JSON summary."),
    executor: str = typer.Option(
        "local", "--executor", metavar="local|ray", show_default=True,
        help="Where the workers run: processes here, or Ray actors (docs/ray.md)."),
    ray_address: str = typer.Option(
        "", "--ray-address", metavar="ADDR",
        help="With --executor ray: the cluster to join (default: start a local Ray)."),
) -> None:
    """Mutation-test MODULE with TESTS; every verdict is committed as it completes."""
    from .campaign import run_mutation

    if as_json:
        reserve_stdout()  # the tests under mutation may print: never onto the document
    if workers is not None and workers < 1:
        from coral_core.errors import UserError
        raise UserError(f"--workers must be at least 1, not {workers}")
    done = {"n": 0}

    def progress(plan, result) -> None:
        done["n"] += 1
        if not as_json and sys.stderr.isatty():
            sys.stderr.write(f"\r{done['n']} mutants done")
            sys.stderr.flush()

    summary = run_mutation(module, list(tests), session, workers, timeout_mode, resume,
                           sample, seed, progress=progress, executor=executor,
                           ray_address=ray_address)
    if as_json:
        print_json(summary)
        return
    if sys.stderr.isatty():
        sys.stderr.write("\n")
    if summary.get("skipped"):
        sys.stdout.write(f"mutation testing skipped ({summary['skipped']})\n")
        return
    sys.stdout.write(_line(summary) + "\n")
    if summary.get("exact"):
        reasons = summary.get("exact_reasons") or ["the tests see the module's file"]
        sys.stdout.write(f"{summary['exact']} mutants ran the exact way (written into a copy of "
                         f"the project, as cosmic-ray does): {reasons[0]}"
                         + (f" (and {len(reasons) - 1} more)" if len(reasons) > 1 else "")
                         + "\n")
    quiet = summary.get("tests_killing_nothing") or []
    if quiet:
        sys.stdout.write(f"tests that kill no mutant: {', '.join(quiet)}\n")
    sys.stdout.write(f"session: {summary['session']} (cr-report / cr-html read it)\n")
