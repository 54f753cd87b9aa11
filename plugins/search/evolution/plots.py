"""pareto.png and generations.png (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from coral_core.files.atomic import write_bytes_with
from coral_core.results.plotting import METADATA, pyplot as _pyplot


def pareto_plot(path: Path, genomes: Sequence[Mapping[str, Any]], front: set[int],
                x: str, y: str) -> None:
    """Every evaluated genome on objectives `x` and `y`: front members highlighted and
    labelled with their trial, dominated (and gated-out) genomes grey."""
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(6.4, 4.8), dpi=100)
    rest = [g for g in genomes if g["trial"] not in front]
    best = [g for g in genomes if g["trial"] in front]
    axes.scatter([g["objectives"][x] for g in rest], [g["objectives"][y] for g in rest],
                 c="#b0b0b0", s=22, label="dominated or below the gate")
    axes.scatter([g["objectives"][x] for g in best], [g["objectives"][y] for g in best],
                 c="#d62728", s=40, label="Pareto front (all objectives)", zorder=3)
    at: dict[tuple[float, float], list[str]] = {}  # members on one point share one label
    for g in best:
        point = (round(g["objectives"][x], 9), round(g["objectives"][y], 9))
        at.setdefault(point, []).append(f"#{g['trial']}")
    for point, names in at.items():
        axes.annotate(",".join(dict.fromkeys(names)), point, textcoords="offset points",
                      xytext=(4, 4), fontsize=7)
    axes.set_xlabel(x)
    axes.set_ylabel(y)
    axes.set_title(f"Evolution: {len(genomes)} genomes, {len(best)} on the front")
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8, loc="lower left")
    figure.tight_layout()
    write_bytes_with(path, lambda handle: figure.savefig(handle, format="png",
                                                         metadata=METADATA))
    plt.close(figure)


def generations_plot(path: Path, generations: Sequence[Mapping[str, Any]],
                     objectives: Sequence[str]) -> None:
    """Per generation: each objective's best and median (over the generation's genomes),
    and the hypervolume of everything evaluated so far."""
    plt = _pyplot()
    figure, (top, bottom) = plt.subplots(2, 1, figsize=(7, 6), dpi=100, sharex=True)
    numbers = [g["generation"] for g in generations]
    for name in objectives:
        line, = top.plot(numbers, [g["best"][name] for g in generations], marker="o",
                         label=f"{name} (best)")
        top.plot(numbers, [g["median"][name] for g in generations], linestyle="--",
                 color=line.get_color())
    top.set_ylabel("objective (solid: best, dashed: median)")
    top.legend(fontsize=7, ncol=3)
    top.grid(alpha=0.3)
    bottom.plot(numbers, [g["hypervolume"] for g in generations], marker="o", color="black")
    bottom.set_ylabel("hypervolume so far")
    bottom.set_xlabel("generation")
    bottom.grid(alpha=0.3)
    bottom.set_xticks(numbers)
    figure.tight_layout()
    write_bytes_with(path, lambda handle: figure.savefig(handle, format="png",
                                                         metadata=METADATA))
    plt.close(figure)
