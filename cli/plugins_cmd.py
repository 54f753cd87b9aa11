"""`coral plugins list`: what is installed and what each plugin registers."""

from __future__ import annotations

from typing import Any

import typer

from coral_core import plugins

from .output import print_json, print_table

app = typer.Typer(help="Installed plugins.", no_args_is_help=True)


def plugin_documents() -> list[dict[str, Any]]:
    registry = plugins.registry()
    documents = []
    for info in registry.plugins:
        provides = {
            kind: sorted(name for name, entry in registry.entries[kind].items()
                         if entry.plugin == info.name)
            for kind in plugins.KINDS
        }
        evaluators = [registry.entries["evaluators"][name] for name in provides["evaluators"]]
        objectives = sorted({o for e in evaluators for o in _objectives(e.factory)})
        documents.append({"name": info.name, "source": info.source, "hooks": list(info.hooks),
                          **{k: v for k, v in provides.items() if v},
                          **({"objectives": objectives} if objectives else {})})
    return documents


def _objectives(factory: Any) -> tuple[str, ...]:
    return tuple(getattr(factory, "objectives", ()) or ())


@app.command("list")
def list_plugins(json_output: bool = typer.Option(False, "--json")) -> None:
    """List plugins, their source and what they register."""
    documents = plugin_documents()
    if json_output:
        print_json(documents)
        return
    rows = []
    for doc in documents:
        registers = "; ".join(f"{kind}: {', '.join(doc[kind])}" for kind in plugins.KINDS
                              if kind in doc)
        if "objectives" in doc:
            registers += f" (objectives: {', '.join(doc['objectives'])})"
        rows.append((doc["name"], doc["source"], registers, ", ".join(doc["hooks"])))
    print_table("Coral plugins", ("name", "source", "registers", "hooks"), rows)
