"""The evolution part of a run's report (for `coral report` and `coral run`).

`report_grids(summary["search"])` gives the Pareto front (trial, generation, genes,
adapter, objectives, fitness) and the per-generation statistics (genomes, new trials,
genomes through the gate, best and median fitness, hypervolume) as tables the CLI draws
for a terminal or as Markdown for a pipe, then the cost ledger's lines; `report_text` is
the same as text.
"""

from __future__ import annotations

from typing import Any, Mapping

from coral_core.results.summary_tables import short_overrides, short_value
from coral_core.results.grids import Column, Grid, markdown

from .genome import ADAPTER_KEY, HEAVY


def _genes(member: Mapping[str, Any]) -> str:
    """The knobs a trial sets, named as the trials table names them, then the adapter's
    genes (in the adapter, not in the overrides)."""
    overrides = {k: v for k, v in (member.get("overrides") or {}).items() if k != ADAPTER_KEY}
    genes = member["genome"]["genes"]
    heavy = [f"{k}={short_value(genes[k])}" for k in HEAVY if k in genes]
    if not overrides:  # a run stored before members kept their overrides
        return " ".join(f"{k}={short_value(v)}" for k, v in genes.items())
    return ", ".join([short_overrides(overrides), *heavy])


def report_grids(search: Mapping[str, Any]) -> list[Grid | str]:
    objectives = list(search["objectives"])
    count = len(search["pareto_front"])
    title = (f"Pareto front: {count} genome{'s' * (count != 1)}"
             + ("" if search.get("front_passed_gate", True)
                else " (no genome passed its gate; front over all)"))
    front = Grid(title, (Column("trial", "right", key=True), Column("gen", "right"),
                         *(Column(o, "right") for o in objectives), Column("fitness", "right"),
                         Column("genes"), Column("adapter")),
                 tuple((str(m["trial"]), str(m["generation"]),
                        *(f"{m['objectives'][o]:.3f}" for o in objectives),
                        f"{m['fitness']:.3f}", _genes(m),
                        m.get("adapter_key", "")[:12] if m.get("adapter") else "-")
                       for m in search["pareto_front"]))
    generations = Grid("generations", (
        Column("generation", "right", key=True), Column("genomes", "right"),
        Column("new trials", "right"), Column("passed gate", "right"),
        Column("best fitness", "right"), Column("median fitness", "right"),
        Column("hypervolume", "right")),
        tuple((str(row["generation"]), str(row["genomes"]), str(row["trials"]),
               str(row["passed_gate"]), f"{row['best_fitness']:.3f}",
               f"{row['median_fitness']:.3f}", f"{row['hypervolume']:.6f}")
              for row in search["per_generation"]))
    lines: list[Grid | str] = [front, generations]
    total, on_front = search["ledger"]["search"], search["ledger"]["front"]
    for label, cost in (("search", total), ("front", on_front)):
        lines.append(f"cost of the {label}: {cost['adapters']} adapters "
                     f"({cost['train_seconds']:.1f} s training), {cost['tokens']} tokens, "
                     f"{cost['generation_seconds']:.1f} s generating, "
                     f"{cost['evaluation_seconds']:.1f} s evaluating")
    if search.get("stopped"):
        lines.append(f"stopped early: {search['stopped']}")
    return lines


def report_text(search: Mapping[str, Any]) -> str:
    return "\n".join(markdown(part) if isinstance(part, Grid) else part
                     for part in report_grids(search)) + "\n"
