"""Any OpenAI-compatible server as a Coral model: ``--model openai:MODEL``.

The client lives in `openai_client` and is imported only when a run names this model, so
that other commands do not pay for httpx at start-up.
"""

from __future__ import annotations

from typing import Any

from coral_core.hookspecs import hookimpl


def create_model(target: str, **options: Any):
    """`--model openai:TARGET`; options from [model.options] plus base_url."""
    from .openai_client import create_model as create

    return create(target, **options)


def __getattr__(name: str) -> Any:
    """The client's names (OpenAIModel, OpenAIOptions, OpenAIRequestError...), lazily."""
    from . import openai_client

    return getattr(openai_client, name)


@hookimpl
def coral_register_models(register):
    register("openai", create_model)
