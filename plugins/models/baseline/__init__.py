"""The weight-free repair baseline, Coral's default model: ``--model baseline``.

It repairs the program shown in the prompt by sampling single-edit variants ranked by a
prior learned from the data set's training problems only (docs/models-baseline.md).
Modules: `prompt` (finding the program), `scope` / `sites` / `edits` / `render` (the
variants), `prior`, `prior_cache` and `tuning` (what the training problems teach),
`sampling`, `model`.
"""

from __future__ import annotations

from typing import Any

from coral_core.hookspecs import hookimpl
from coral_core.lazy import Lazy

NAME = "baseline"


@hookimpl
def coral_register_models(register: Any) -> None:
    register(NAME, Lazy(f"{__name__}.model:create_baseline"))
