"""Evolution search: what it costs and what it finds.

1. Tiny local Llama (CPU): K genomes over H distinct heavy-gene sets train H adapters (not
   K) on one base model read once, counted by wrapping the trainer and the model loader;
   wall time per generation.
2. Baseline model: wall time per generation.
3. Evolution vs random search on the baseline, same seeds and the same number of trials
   (population x generations): hypervolume of each run's front over the five objectives.

    CORAL_DATA_DIR=../shared/datasets .venv/bin/python benchmarks/evolution.py [--quick]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

EVOLUTION = """[dataset]
problems = {problems}
[run]
samples = {samples}
seed = {seed}
[search]
strategy = "evolution"
[search.options]
population = {population}
generations = {generations}
{extra}
"""
RANDOM = """[dataset]
problems = {problems}
[run]
samples = {samples}
seed = {seed}
[search]
strategy = "random"
budget = {budget}
[search.space]
"model.temperature" = {{low = 0.0, high = 1.2}}
"model.top_p" = {{low = 0.5, high = 1.0}}
"model.top_k" = {{low = 0, high = 50, int = true}}
"""
TEST = ["kheapsort", "lcs_length", "next_palindrome", "next_permutation", "possible_change",
        "sieve", "to_base", "wrap"]


def in_process(args: list[str]) -> tuple[dict, list[float]]:
    """`coral run ... --json` in this process; the summary and the time of each tell."""
    from coral_cli.app import main
    from coral_plugins.search.evolution.strategy import EvolutionSearch

    marks = [time.perf_counter()]
    tell = EvolutionSearch.tell

    def timed(self, results):
        tell(self, results)
        marks.append(time.perf_counter())

    EvolutionSearch.tell = timed
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            try:
                main(["run", *args, "--json"])
            except SystemExit as stop:
                if stop.code:
                    raise
    finally:
        EvolutionSearch.tell = tell
    return json.loads(out.getvalue()), [b - a for a, b in zip(marks, marks[1:])]


def tiny_model(tmp: Path, population: int, generations: int) -> None:
    from tiny_model import build_tiny_model
    from coral_plugins.models.hf import adapters, model

    tiny = build_tiny_model(tmp / "tiny")
    os.environ["CORAL_CACHE_DIR"] = str(tmp / "cache")
    counts = {"trained": 0, "base_loads": 0}
    train, load = adapters._train, model.load_model

    def counted_train(*a, **k):
        counts["trained"] += 1
        return train(*a, **k)

    def counted_load(*a, **k):
        counts["base_loads"] += 1
        return load(*a, **k)

    adapters._train, model.load_model = counted_train, counted_load
    extra = """[search.options.genes]
max_new_tokens = [16]
kind = ["lora", "dora"]
rank = [4, 8]
alpha = [8]
dropout = [0.0]
target_modules = [["q_proj", "v_proj"]]
[search.options.training]
steps = 2
batch_size = 2"""
    config = tmp / "tiny.toml"
    config.write_text(EVOLUTION.format(problems=json.dumps(TEST[:4]), samples=1, seed=0,
                                       population=population, generations=generations,
                                       extra=extra))
    try:
        summary, walls = in_process(["--plugin", "evolution", "--model", f"hf:{tiny}",
                                     "--config", str(config), "--out", str(tmp / "tiny-run")])
    finally:
        adapters._train, model.load_model = train, load
    search = summary["search"]
    genomes = search["genomes"]
    heavy = {json.dumps({k: g["genes"][k] for k in ("kind", "rank")}) for g in genomes}
    print(f"tiny random Llama (2 layers, hidden 64), CPU: population {population}, "
          f"{generations} generations, 4 problems x 1 sample, 16 new tokens")
    print(f"  genomes K = {len(genomes)}, distinct heavy-gene sets H = {len(heavy)}, "
          f"trials = {len(summary['trials'])}")
    print(f"  adapters trained = {counts['trained']} (H = {len(heavy)}), "
          f"base-model loads for generation = {counts['base_loads']}")
    print(f"  training seconds (ledger) = {search['ledger']['search']['train_seconds']}, "
          f"generated tokens = {search['ledger']['search']['completion_tokens']}")
    print("  wall time per generation: " + ", ".join(f"{w:.1f} s" for w in walls))


def baseline(tmp: Path, population: int, generations: int, samples: int) -> None:
    config = tmp / "baseline.toml"
    config.write_text(EVOLUTION.format(problems=json.dumps(TEST), samples=samples, seed=0,
                                       population=population, generations=generations,
                                       extra=""))
    summary, walls = in_process(["--plugin", "evolution", "--config", str(config), "--out",
                                 str(tmp / "baseline-run")])
    print(f"baseline model: population {population}, {generations} generations, 8 problems "
          f"x {samples} samples, {len(summary['trials'])} trials")
    print("  wall time per generation: " + ", ".join(f"{w:.1f} s" for w in walls))


def compare(tmp: Path, population: int, generations: int, samples: int, seeds: list[int],
            ) -> None:
    from coral_plugins.search.evolution.selection import hypervolume

    coral = str(Path(sys.executable).with_name("coral"))
    objectives = ("bugfix", "style", "security", "syntax", "runtime")
    print(f"evolution vs random on the baseline: 8 test problems x {samples} samples, "
          f"{population * generations} trials each (evolution: population {population} x "
          f"{generations} generations, repeats not re-run)")
    print(f"  {'seed':>4}  {'evolution HV':>12}  {'trials':>6}  {'random HV':>10}  "
          f"{'trials':>6}  {'evo best fitness':>16}  {'random best fitness':>19}")
    rows = []
    for seed in seeds:
        found = {}
        for name, template in (("evolution", EVOLUTION), ("random", RANDOM)):
            config = tmp / f"{name}-{seed}.toml"
            config.write_text(template.format(
                problems=json.dumps(TEST), samples=samples, seed=seed, population=population,
                generations=generations, budget=population * generations, extra=""))
            plugin = "evolution" if name == "evolution" else "quixbugs"
            result = subprocess.run([coral, "run", "--plugin", plugin, "--config", str(config),
                                     "--out", str(tmp / f"{name}-{seed}"), "--json"],
                                    capture_output=True, text=True, check=True)
            summary = json.loads(result.stdout)
            points = [[t["objectives"][o] for o in objectives] for t in summary["trials"]]
            found[name] = (hypervolume(points), len(points),
                           max(t["fitness"] for t in summary["trials"]))
        rows.append(found)
        e, r = found["evolution"], found["random"]
        print(f"  {seed:>4}  {e[0]:>12.6f}  {e[1]:>6}  {r[0]:>10.6f}  {r[1]:>6}  "
              f"{e[2]:>16.6f}  {r[2]:>19.6f}")
    mean = {name: sum(row[name][0] for row in rows) / len(rows) for name in rows[0]}
    print(f"  mean  {mean['evolution']:>12.6f}          {mean['random']:>10.6f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller runs, one seed")
    parser.add_argument("--skip", default="", help="comma list of parts to skip: tiny, "
                        "baseline, compare")
    args = parser.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    if not os.environ.get("CORAL_DATA_DIR"):
        os.environ["CORAL_DATA_DIR"] = str(ROOT.parent / "shared" / "datasets")
    samples = 2 if args.quick else 5
    with tempfile.TemporaryDirectory() as scratch:
        tmp = Path(scratch)
        if "tiny" not in skip:
            tiny_model(tmp, population=4 if args.quick else 6, generations=2)
        if "baseline" not in skip:
            baseline(tmp, population=6, generations=3 if args.quick else 4, samples=samples)
        if "compare" not in skip:
            compare(tmp, population=6, generations=4, samples=samples,
                    seeds=[0] if args.quick else [0, 1, 2])


if __name__ == "__main__":
    main()
