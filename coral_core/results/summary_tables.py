"""A run summary's tables, as `Grid`s: per problem (c/n, pass@k, objectives, fitness),
the overall row with its bootstrap interval, and the trials of a search.

Numbers are rounded half up (0.0125 is 1.3%), the same way everywhere: the README, the
tables and the Markdown output agree.
"""

from __future__ import annotations

import json
import math
from decimal import ROUND_HALF_UP, Decimal
from typing import Any, Mapping

from coral_core.results.intervals import shown_ks
from coral_core.results.grids import Column, Grid


def _round(value: float, places: int, scale: int = 1) -> str:
    """`value` x `scale` to `places` decimals, half up, on the decimal the value prints
    as (0.0345 is 3.45%, so 3.5%, although 100 * 0.0345 is 3.4499... in binary)."""
    value = float(value)
    if not math.isfinite(value) or abs(value) >= 1e15:  # not a score: no rounding to show
        return f"{value * scale:g}"
    quantum = Decimal(1).scaleb(-places)
    exact = Decimal(repr(value)) * scale
    return str(exact.quantize(quantum, rounding=ROUND_HALF_UP))


def percent(value: float) -> str:
    """0.0125 -> '1.3%' (half up, one decimal)."""
    return _round(value, 1, 100) + "%"


def number(value: float) -> str:
    return _round(value, 3)


def _span(interval: Any, as_percent: bool) -> str:
    if not interval:
        return ""
    low, high = interval
    if as_percent:
        return f"{_round(low, 1, 100)}-{_round(high, 1, 100)}%"
    return f"{number(low)}-{number(high)}"


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


MAX_PROBLEM_ROWS = 50  # more (a FIM set's hundreds of tasks) and the table shows the overall


def summary_grid(summary: Mapping[str, Any], every_problem: bool = False) -> Grid:
    """Per-problem rows (at most MAX_PROBLEM_ROWS unless `every_problem`: beyond that, the
    aggregate is what a reader wants first, as lm-eval prints), then the overall row and
    its 95% interval row."""
    problems = summary["problems"]
    hidden = 0 if every_problem or len(problems) <= MAX_PROBLEM_ROWS else len(problems)
    names = list(summary.get("objectives", {}))
    succeeds = "pass_at_k" in summary
    ks = shown_ks(list(summary.get("pass_at_k", {})))
    seen = any(p.get("seen_in_training") for p in problems)
    errors = any(p.get("errors") for p in problems)
    title = (f"{summary['dataset']} ({summary['split']}) - {summary['model']}, "
             f"{_samples(summary)} per problem, seed {summary['seed']}")
    if len(summary.get("trials", ())) > 1 and summary.get("best"):
        title += (f", best {'finished ' * bool(summary.get('partial'))}trial "
                  f"{summary['best']['trial']}")
    columns = [Column("problem", key=True)]
    if seen:
        columns.append(Column("seen", key=True))
    columns.append(Column("c/n" if succeeds else "n", "right"))
    columns += [Column(f"pass@{k}", "right") for k in ks]
    columns += [Column(name, "right") for name in names]
    columns.append(Column("fitness", "right"))
    if errors:
        columns.append(Column("errors", "right"))
    rows = []
    for p in problems if not hidden else ():
        row = [p["problem"]] + (["yes" if p.get("seen_in_training") else ""] if seen else [])
        row.append(f"{p['c']}/{p['n']}" if "c" in p else str(p["n"]))
        row += [percent(p.get("pass_at_k", {}).get(k, 0.0)) for k in ks]
        row += [number(p["objectives"].get(n, 0.0)) for n in names]
        row.append(number(p.get("fitness", 0.0)))
        if errors:
            row.append(str(p.get("errors", 0)))
        rows.append(tuple(row))
    overall = (f"overall: {summary['fixed']}/{len(problems)} solved" if "fixed" in summary
               else "overall")
    row = [overall] + ([""] if seen else []) + [""]
    row += [percent(summary["pass_at_k"][k]) for k in ks]
    row += [number(summary["objectives"][n]) for n in names]
    row.append(number(summary.get("fitness", 0.0)))
    if errors:
        row.append(str(summary.get("errors", 0)))
    rows.append(tuple(row))
    intervals = summary.get("intervals") or {}
    if intervals:  # right under the overall row: it is that row's interval
        row = ["95% CI"] + ([""] if seen else []) + [""]
        row += [_span(intervals.get("pass_at_k", {}).get(k), True) for k in ks]
        row += [_span(intervals.get("objectives", {}).get(n), False) for n in names]
        row.append(_span(intervals.get("fitness"), False))
        if errors:
            row.append("")
        rows.append(tuple(row))
    unseen = summary.get("unseen")
    if isinstance(unseen, Mapping):  # the figure that says what the model learned
        label = (f"unseen: {unseen['fixed']}/{unseen['problems']} solved" if "fixed" in unseen
                 else f"unseen ({unseen['problems']})")
        row = [label] + ([""] if seen else []) + [""]
        row += [percent(unseen.get("pass_at_k", {}).get(k, 0.0)) for k in ks]
        row += [number(unseen.get("objectives", {}).get(n, 0.0)) for n in names]
        row.append(number(unseen.get("fitness", 0.0)))
        if errors:
            row.append("")
        rows.append(tuple(row))
    caption = _caption(summary, seen, errors)
    if hidden:
        where = f"'coral report {summary['run_dir']} --per-problem'" if summary.get("run_dir") \
            else "--json"
        caption = (f"{hidden} problems: the rows of each with {where} or 'coral export'; "
                   + caption)
    return Grid(title, tuple(columns), tuple(rows), caption,
                rules=(len(problems),) if not hidden else ())


def _caption(summary: Mapping[str, Any], seen: bool, errors: bool) -> str:
    notes = []
    intervals = summary.get("intervals") or {}
    if intervals:
        notes.append(f"95% CI: bootstrap over problems ({intervals.get('resamples', 1000)} "
                     f"resamples, seed {intervals.get('seed', summary['seed'])})")
    if "pass_at_k" in summary:
        notes.append("c/n: samples that solve the problem / samples")
    if seen:
        notes.append("seen: the problem was seen in training")
    if errors:
        notes.append(f"errors: samples whose scoring raised, scored 0 "
                     f"({summary.get('errors', 0)} in all; see 'coral export')")
    if summary.get("hook_errors"):
        notes.append(f"{plural(summary['hook_errors'], 'lifecycle hook call')} raised")
    return "; ".join(notes)


def trials_grid(summary: Mapping[str, Any]) -> Grid:
    """One row per trial: its overrides, status, pass@1, fitness; the best is marked *."""
    best = (summary.get("best") or {}).get("trial")
    rank_by = (summary.get("best") or {}).get("rank_by", "fitness")
    columns = (Column("trial", "right", key=True), Column("overrides"), Column("status"),
               Column("pass@1", "right"), Column("fitness", "right"))
    rows = []
    so_far = False
    for row in summary.get("trials", ()):
        overrides = short_overrides(row["overrides"])
        pass1 = row.get("pass_at_k", {}).get("1")
        figures = [percent(pass1) if pass1 is not None else "-",
                   number(row["fitness"]) if "fitness" in row else "-"]
        if row["status"] != "finished" and figures != ["-", "-"]:
            figures = [f"({f})" if f != "-" else f for f in figures]
            so_far = True
        rows.append((f"{row['trial']}{' *' if row['trial'] == best else ''}",
                     overrides or "(base)", row["status"], *figures))
    notes = ["* marks the best trial" if best is not None else "",
             "(...): a trial not finished, its figures so far" if so_far else ""]
    return Grid(f"trials (best by {rank_by})", columns, tuple(rows),
                "; ".join(filter(None, notes)))


def short_value(value: Any) -> str:
    """A value as a person reads it in a table: 0.86, not 0.8599796663725433."""
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list):
        return "[" + ",".join(short_value(v) for v in value) + "]"
    return value if isinstance(value, str) else json.dumps(value)


def short_overrides(overrides: Mapping[str, Any]) -> str:
    """'temperature=0.2, max_new_tokens=64': each key by its last part where that names it
    alone among the row's keys (the full dotted key, and the exact values, are in the
    summary's JSON)."""
    lasts = [key.rsplit(".", 1)[-1] for key in overrides]
    return ", ".join(f"{last if lasts.count(last) == 1 else key}={short_value(value)}"
                     for (key, value), last in zip(overrides.items(), lasts))


def _samples(summary: Mapping[str, Any]) -> str:
    """'4 samples', or '1-3 samples' where problems had different numbers (scored files)."""
    low = summary.get("samples_min")
    if isinstance(low, int) and low != summary["samples"]:
        return f"{low}-{summary['samples']} samples"
    return plural(summary["samples"], "sample")


def partial_note(summary: Mapping[str, Any]) -> str:
    """The line under an unfinished run's report."""
    counts = summary["counts"]
    state = (f"its process (pid {summary['pid']}) is still running" if summary["process_alive"]
             else f"'coral run --resume {summary['run_dir']}' continues it")
    pending = summary.get("pending_problems") or []
    waiting = (f"; not scored yet: {plural(len(pending), 'problem')} "
               f"({', '.join(pending[:5])}{', ...' if len(pending) > 5 else ''})"
               if pending else "")
    ranked = "" if counts["trials"] <= 1 or counts["trials_finished"] else (
        "; no trial has finished, so none is ranked")
    return (f"partial: run {summary['status']}, {counts['samples_scored']}/"
            f"{counts['samples_wanted']} samples scored (of the trials begun), "
            f"{counts['trials_finished']}/{counts['trials']} trials finished{waiting}"
            f"{ranked}; {state}")
