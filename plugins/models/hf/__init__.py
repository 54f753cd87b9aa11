"""The `hf` model plugin: a transformers causal LM, ``--model hf:PATH_OR_ID``.

Modules: `loading` (source, device, dtype), `prompts` (rendering a structured prompt, for
generation and training alike), `sampling` (per-row seeded sampling and stopping),
`model` (HFModel), `adapters` and `adapter_cache` (LoRA/DoRA training, cached by content).
Importing this package imports none of them (the model is registered as a `Lazy`):
the CLI must start fast.
"""

from __future__ import annotations

from typing import Any

from coral_core.hookspecs import hookimpl
from coral_core.lazy import Lazy


@hookimpl
def coral_register_models(register: Any) -> None:
    register("hf", Lazy(f"{__name__}.model:HFModel"))
