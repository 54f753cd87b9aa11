"""`coral fim build`: FIM tasks from any directory of source files (added to `coral` through
coral_register_commands)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from coral_core.errors import UserError
from coral_core.terminal import CONTEXT, CoralCommand, CoralGroup, note

app = typer.Typer(cls=CoralGroup, no_args_is_help=True, context_settings=CONTEXT,
                  help="Fill-in-the-middle tasks: build them from your own code.")


@app.command("build", cls=CoralCommand)
def build(
    src: Path = typer.Argument(..., metavar="SRC_DIR", help="Folder of source files."),
    out: Path = typer.Option(..., "--out", metavar="TASKS.jsonl", help="Where to write."),
    kind: str = typer.Option("line", "--kind", help="line | multiline | span"),
    n: int = typer.Option(100, "--n", min=1, help="How many tasks (at most)."),
    seed: int = typer.Option(0, "--seed", help="Seed: the same seed gives the same tasks."),
    language: Optional[str] = typer.Option(None, "--language",
                                           help="python | java (default: python)"),
) -> None:
    """Write deterministic FIM tasks (prefix, suffix, groundtruth) built from SRC_DIR."""
    from coral_core.files.fileio import same_file
    from coral_core.files.outputs import check_output
    from coral_core.run.rundir import refuse_run_file

    from . import build as builder

    if not -2 ** 63 <= seed < 2 ** 63:  # as every other seed (a fuzzing pass)
        raise UserError(f"--seed must be in [-2**63, 2**63 - 1] (64 bits), not {seed}")
    refuse_run_file(out, "--out")
    check_output(out, "--out")
    chosen = language or "python"
    if out.exists() and chosen in builder.EXTENSIONS and any(
            same_file(out, path) for path in builder.source_files(src, chosen)):
        raise UserError(f"--out {out} is one of the source files read from {src}; write "
                        "the tasks elsewhere")
    tasks = builder.build_tasks(src, kind, n, seed, chosen)
    builder.write_jsonl(tasks, out, users=True)
    note(f"wrote {len(tasks)} {kind} tasks to {out}")
    if len(tasks) < n:
        note(f"fewer than the {n} asked for: {src} gave {len(tasks)} {kind} tasks from its "
             f"{language or 'python'} files (at most 3 a file, each site once; see "
             "docs/fim.md)", style="yellow")
