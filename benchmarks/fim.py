"""FIM scoring speed: predictions scored per second, vectorised against one call per pair.

    .venv/bin/python benchmarks/fim.py                 # 100,000 predictions (~60 characters)
    .venv/bin/python benchmarks/fim.py --n 20000 --mode cceval

The pairs are made here, reproducibly (seeded), from lines of this interpreter's standard
library: each ground truth is a line of 45-120 characters, each prediction the same line
left alone (about a third), cut short, or edited at a few places. The baseline is the
per-pair `score` that a run's evaluator calls; `score_many` is what `coral evaluate
--plugin fim` uses on a whole file. Both run in this process, one after the other, and
every objective of every pair must agree. Target (issue 11): 100,000 predictions in under
2 s on 2 cores.
"""

from __future__ import annotations

import argparse
import random
import sysconfig
import time
from pathlib import Path


def pairs(count: int, seed: int) -> tuple[list[str], list[str]]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    lines: list[str] = []
    for path in sorted(stdlib.glob("*.py"))[:120]:
        text = path.read_text(encoding="utf-8", errors="ignore")
        lines.extend(s for s in (line.strip() for line in text.splitlines())
                     if 45 <= len(s) <= 120)
    rng = random.Random(seed)
    truths = [rng.choice(lines) for _ in range(count)]
    predictions = []
    for truth in truths:
        roll = rng.random()
        if roll < 0.33:
            predictions.append(truth)
        elif roll < 0.55:
            predictions.append(truth[:rng.randrange(1, len(truth))])
        else:
            chars = list(truth)
            for _ in range(rng.randrange(1, 6)):
                at = rng.randrange(len(chars))
                chars[at:at + rng.randrange(0, 4)] = rng.choice(["", "x", "_1", " ", ")"])
            predictions.append("".join(chars))
    return predictions, truths


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--mode", choices=("coral", "cceval"), default="coral")
    args = parser.parse_args()
    from coral_core.fim.metrics import score, score_many

    predictions, truths = pairs(args.n, args.seed)
    mean_chars = sum(map(len, truths)) / len(truths)
    started = time.perf_counter()
    one_by_one = [score(p, g, "python", args.mode) for p, g in zip(predictions, truths)]
    baseline = time.perf_counter() - started
    started = time.perf_counter()
    vectorised = score_many(predictions, truths, mode=args.mode)["tasks"]
    fast = time.perf_counter() - started
    differing = sum(1 for a, b in zip(one_by_one, vectorised) if a != b)
    print(f"{args.n} predictions (ground truth {mean_chars:.1f} characters on average), "
          f"mode {args.mode}")
    print(f"  per pair (score):          {baseline:7.3f} s  {args.n / baseline:>12,.0f} /s")
    print(f"  vectorised (score_many):   {fast:7.3f} s  {args.n / fast:>12,.0f} /s")
    print(f"  ratio: {baseline / fast:.2f}x; pairs whose objectives differ: {differing}")
    target = fast * 100_000 / args.n
    print(f"  target: 100,000 in < 2 s -> {target:.3f} s for 100,000 "
          f"({'met' if target < 2.0 else 'NOT met'})")
    return 1 if differing else 0


if __name__ == "__main__":
    raise SystemExit(main())
