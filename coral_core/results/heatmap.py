"""heatmap.png: a search over two knobs drawn as a grid of its ranking figure.

Written beside summary.json when the finished trials vary exactly two override keys and
cover every combination of their values (a 2-D `grid` search, such as the `fim` preset's
temperature x max_new_tokens); each cell shows the trial's `rank_by` value, the best is
outlined. Without matplotlib the file is skipped and the log says why.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Mapping

from coral_core.files.atomic import write_bytes_with
from coral_core.results.paired import ranking_figure
from coral_core.results.summary_tables import short_value

log = logging.getLogger(__name__)

HEATMAP_FILE = "heatmap.png"


def _label(value: Any) -> str:
    return short_value(value)


def grid_of(summary: Mapping[str, Any]) -> tuple[str, str, list, list, dict] | None:
    """(row key, column key, row values, column values, {(row, col): value}) of a full
    two-key grid of finished trials, or None."""
    best = summary.get("best") or {}
    rank_by = best.get("rank_by")
    rows = [t for t in summary.get("trials", ()) if t.get("status") == "finished"]
    keys = sorted({k for t in rows for k in t.get("overrides", {})},
                  key=lambda k: min(list(t["overrides"]).index(k) for t in rows
                                    if k in t["overrides"]))
    if rank_by is None or len(keys) != 2 or not all(len(t["overrides"]) == 2 for t in rows):
        return None
    first, second = keys
    values: dict[tuple[str, str], float] = {}
    row_values: list = []
    column_values: list = []
    for trial in rows:
        row, column = trial["overrides"][first], trial["overrides"][second]
        figure = ranking_figure(trial, rank_by)
        if figure is None:
            return None
        if row not in row_values:
            row_values.append(row)
        if column not in column_values:
            column_values.append(column)
        values[(_label(row), _label(column))] = figure
    if len(values) != len(row_values) * len(column_values) or len(values) < 2:
        return None
    return first, second, row_values, column_values, values


def write_heatmap(run_dir: Path, summary: Mapping[str, Any]) -> str | None:
    """Write heatmap.png for a full two-key grid; return its file name (None if none)."""
    grid = grid_of(summary)
    if grid is None:
        return None
    try:
        from coral_core.results.plotting import METADATA, pyplot

        plt = pyplot()
    except ImportError:
        log.warning("%s not written: matplotlib is not installed", HEATMAP_FILE)
        return None
    first, second, row_values, column_values, values = grid
    best = summary["best"]
    cells = [[values[(_label(r), _label(c))] for c in column_values] for r in row_values]
    figure, axes = plt.subplots(figsize=(1.2 * len(column_values) + 2.5,
                                         0.6 * len(row_values) + 2.0), dpi=100)
    image = axes.imshow(cells, cmap="viridis", aspect="auto")
    figure.colorbar(image, ax=axes, label=best["rank_by"])
    axes.set_xticks(range(len(column_values)), [_label(c) for c in column_values])
    axes.set_yticks(range(len(row_values)), [_label(r) for r in row_values])
    axes.set_xlabel(second)
    axes.set_ylabel(first)
    low, high = min(min(r) for r in cells), max(max(r) for r in cells)
    for i, row in enumerate(cells):
        for j, value in enumerate(row):
            light = high > low and value < low + (high - low) / 2
            axes.text(j, i, f"{value:.3f}", ha="center", va="center", fontsize=8,
                      color="white" if light else "black")
    chosen = best.get("overrides", {})
    if first in chosen and second in chosen:
        i = [_label(r) for r in row_values].index(_label(chosen[first]))
        j = [_label(c) for c in column_values].index(_label(chosen[second]))
        axes.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False,
                                     edgecolor="red", linewidth=2.5))
    axes.set_title(f"{best['rank_by']} by {first} x {second} (best outlined)", fontsize=9)
    figure.tight_layout()
    write_bytes_with(Path(run_dir) / HEATMAP_FILE,
                     lambda handle: figure.savefig(handle, format="png", metadata=METADATA))
    plt.close(figure)
    return HEATMAP_FILE
