"""Any OpenAI-compatible server as a Coral model: ``--model openai:MODEL``.

The client lives in `client` and is imported only when a run names this model, so
that other commands do not pay for httpx at start-up.
"""

from __future__ import annotations

import importlib
from typing import Any

from coral_core.hookspecs import hookimpl

_SUBMODULES = ("client", "retry")


def create_model(target: str, **options: Any):
    """`--model openai:TARGET`; options from [model.options] plus base_url."""
    from .client import create_model as create

    return create(target, **options)


def check_options(target: str, options: Any) -> None:
    """What `create_model` refuses before it sends anything: a missing model name, option
    values out of bounds, a malformed or missing server URL."""
    from .client import check_target
    from .options import OpenAIOptions

    check_target(target)
    OpenAIOptions.parse(options)


create_model.check_options = check_options  # type: ignore[attr-defined]

# The sampling knobs a server honours: what a search may vary for this model.
create_model.sampling_knobs = (  # type: ignore[attr-defined]
    "temperature", "top_p", "max_new_tokens")


def __getattr__(name: str) -> Any:
    """The client's names (OpenAIModel, OpenAIOptions, OpenAIRequestError...), lazily."""
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    if name.startswith("_"):  # probes such as __wrapped__ must not import httpx
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.client"), name)


@hookimpl
def coral_register_models(register):
    register("openai", create_model)
