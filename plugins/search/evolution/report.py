"""The evolution part of a run's report, as text (for `coral report` and `coral run`).

`report_text(summary["search"])` gives the Pareto front (trial, generation, genes,
adapter, objectives, fitness), the per-generation statistics (genomes, new trials,
genomes through the gate, best and median fitness, hypervolume) and the cost ledger.
"""

from __future__ import annotations

from typing import Any, Mapping


def _genes(genes: Mapping[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in genes.items())


def report_text(search: Mapping[str, Any]) -> str:
    objectives = list(search["objectives"])
    lines = [f"Pareto front: {len(search['pareto_front'])} genomes"
             + ("" if search.get("front_passed_gate", True)
                else " (no genome passed its gate; front over all)")]
    header = ["trial", "gen", *objectives, "fitness", "genes", "adapter"]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "---|" * len(header))
    for member in search["pareto_front"]:
        adapter = member.get("adapter_key", "")[:12] if member.get("adapter") else "-"
        cells = [str(member["trial"]), str(member["generation"]),
                 *(f"{member['objectives'][o]:.3f}" for o in objectives),
                 f"{member['fitness']:.3f}", _genes(member["genome"]["genes"]), adapter]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("| generation | genomes | new trials | passed gate | best fitness | "
                 "median fitness | hypervolume |")
    lines.append("|---|---|---|---|---|---|---|")
    for row in search["per_generation"]:
        lines.append(f"| {row['generation']} | {row['genomes']} | {row['trials']} | "
                     f"{row['passed_gate']} | {row['best_fitness']:.3f} | "
                     f"{row['median_fitness']:.3f} | {row['hypervolume']:.6f} |")
    total, front = search["ledger"]["search"], search["ledger"]["front"]
    for label, cost in (("search", total), ("front", front)):
        lines.append(f"cost of the {label}: {cost['adapters']} adapters "
                     f"({cost['train_seconds']:.1f} s training), {cost['tokens']} tokens, "
                     f"{cost['generation_seconds']:.1f} s generating, "
                     f"{cost['evaluation_seconds']:.1f} s evaluating")
    if search.get("stopped"):
        lines.append(f"stopped early: {search['stopped']}")
    return "\n".join(lines) + "\n"
