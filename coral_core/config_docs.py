"""The configuration reference (docs/configuration.md), generated from the schema.

Every key of `config_schema.SCHEMA` has a meaning here; `reference()` renders each with its
type and default, and a test checks that the file holds exactly this text, so the
documentation cannot drift from what Coral accepts.
"""

from __future__ import annotations

import json
from typing import Any

from .config_schema import DEFAULTS, SCHEMA, TYPE_NAMES

SECTIONS = {
    "dataset": "What to evaluate on.",
    "model": "What generates the samples, and how it samples.",
    "evaluators": "How each candidate is scored.",
    "search": "Which configurations are tried (see docs/search.md).",
    "execution": "Where the work runs and the limits a candidate runs under "
                 "(see docs/sandbox.md).",
    "run": "The run itself.",
}

MEANINGS: dict[str, dict[str, str]] = {
    "dataset": {
        "name": "The data set (a name from `coral datasets list`); a preset sets it.",
        "split": "Which problems: a split the data set has (QuixBugs: train, test, extra, "
                 "all). `--split`.",
        "problems": "Only these problems (ids from `coral datasets show NAME`); empty = the "
                    "whole split. `--problems a,b`.",
        "limit": "Only the first N problems of the selection; 0 = all. `--limit N`.",
        "data_dir": "Folder holding the data set's folder; empty = `CORAL_DATA_DIR`, then "
                    "the fetched copy. `--data-dir`; may relocate a resumed run.",
        "options": "Passed to the data set plugin's factory as keyword arguments.",
    },
    "model": {
        "spec": "`baseline`, `reference`, `hf:PATH_OR_ID`, `openai:MODEL` or a model "
                "plugin's `PREFIX:TARGET`. `--model`.",
        "base_url": "Server URL for models served over HTTP (`openai:`); empty = "
                    "`OPENAI_BASE_URL`. `--base-url`; may relocate a resumed run.",
        "adapter": "A peft LoRA/DoRA adapter folder applied to the model (models that "
                   "support adapters only, e.g. `hf:`).",
        "temperature": "Sampling temperature; 0 = greedy. `--temperature`.",
        "top_p": "Nucleus sampling: keep the smallest set of tokens whose probability "
                 "reaches top_p. `--top-p`.",
        "top_k": "Keep only the k most likely tokens; 0 = no limit.",
        "max_new_tokens": "Longest reply, in tokens. `--max-new-tokens`.",
        "repetition_penalty": "Penalty on repeated tokens; 1.0 = none.",
        "stop": "Stop sequences, added to the task's own.",
        "batch_size": "Requests sent to the model at a time.",
        "options": "The model plugin's own options (e.g. `dtype` for `hf:`, `concurrency` "
                   "for `openai:`). `--model-arg KEY=VALUE`.",
    },
    "evaluators": {
        "use": "Evaluators to run on every candidate (names from `coral plugins list`).",
        "weights": "Objective -> weight for fitness (the weighted mean); empty = equal "
                   "weights. A table given here replaces the one before it whole.",
        "gate": "An objective that, when 0, sets every objective to 0 (QuixBugs: syntax).",
        "options": "`[evaluators.options.NAME]`: keyword arguments for evaluator NAME.",
    },
    "search": {
        "strategy": "`single`, `grid`, `random` or a search plugin's strategy.",
        "rank_by": "What names the best trial: `fitness`, an objective, or `pass@K`.",
        "space": "`\"section.key\" = [values]` (or `{low, high}` ranges for random): the "
                 "dimensions a search varies.",
        "budget": "Most trials a strategy proposes (at most 100000); 0 = the strategy's "
                  "default.",
        "options": "Keyword arguments for the strategy's factory.",
    },
    "execution": {
        "executor": "`local`, or an executor plugin's (e.g. `ray`). `--executor`.",
        "ray_address": "Ray cluster address for the ray executor. `--ray-address`.",
        "workers": "Sandbox slots running candidates at once (at most 4096); 0 = one per core "
                   "(with the ray executor: per node, 0 = the node's CPUs).",
        "generation_actors": "Ray executor: actors that each hold the model; 0 = one per GPU "
                             "in the cluster (one without GPUs). See docs/ray.md.",
        "evaluation_actors": "Ray executor: actors that each hold a sandbox pool; 0 = one per "
                             "node.",
        "parallel_trials": "Trials of one search batch run at once when they share a model "
                           "and scorers; 0 = the executor's choice (local: 1; ray: two per "
                           "generation actor).",
        "test_timeout": "CPU seconds a test may use (the cap when timeouts are relative).",
        "timeout_factor": "> 0: each test's timeout is this many times the reference "
                          "solution's time (between timeout_floor and test_timeout); 0 = "
                          "test_timeout for every test.",
        "timeout_floor": "The least a relative timeout may be, in seconds.",
        "memory_mb": "Memory a candidate may use, in MiB.",
        "isolation": "`auto` (bubblewrap where installed), `bwrap` (required) or `none`.",
    },
    "run": {
        "samples": "Samples per problem (n of pass@k). `--samples`.",
        "seed": "Run seed: each sample's seed derives from (seed, data set, task, sample). "
                "`--seed`.",
        "out": "The run directory; empty = runs/DATASET-MODEL-TIMESTAMP. `--out`.",
        "fail_fast": "Stop at the first evaluator or lifecycle-hook error instead of "
                     "recording it (scored 0, counted in the summary) and going on. "
                     "`--fail-fast`.",
    },
}

BEGIN = "<!-- generated from coral_core/config_schema.py: do not edit by hand -->"
END = "<!-- end of generated reference -->"


def _default(value: Any) -> str:
    return "`" + json.dumps(value) + "`"


def reference() -> str:
    """The generated part of docs/configuration.md: one table per section."""
    lines = [BEGIN, ""]
    for section, keys in SCHEMA.items():
        lines += [f"## [{section}]", "", SECTIONS[section], "",
                  "| key | type | default | meaning |", "|---|---|---|---|"]
        for key, (kind, _) in keys.items():
            meaning = MEANINGS[section][key].replace("|", "\\|")
            lines.append(f"| `{key}` | {TYPE_NAMES[kind]} | {_default(DEFAULTS[section][key])} "
                         f"| {meaning} |")
        lines.append("")
    lines.append(END)
    return "\n".join(lines) + "\n"
