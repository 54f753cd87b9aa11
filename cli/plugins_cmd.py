"""`coral plugins list`: what is installed, what each plugin registers, which failed."""

from __future__ import annotations

from typing import Any

import typer

from coral_core.results.grids import Column, Grid

from .command import CONTEXT, CoralCommand

app = typer.Typer(help="Installed plugins.", no_args_is_help=True, context_settings=CONTEXT)


def plugin_documents() -> list[dict[str, Any]]:
    from coral_core import plugins

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
        documents.append({"name": info.name, "source": info.source, "status": info.status,
                          "hooks": list(info.hooks),
                          **{k: v for k, v in provides.items() if v},
                          **({"objectives": objectives} if objectives else {}),
                          **({"error": info.error} if info.error else {})})
    return documents


def _objectives(factory: Any) -> tuple[str, ...]:
    return tuple(getattr(factory, "objectives", ()) or ())


def _registers(doc: dict[str, Any]) -> str:
    from coral_core import plugins

    if doc["status"] == "failed":
        return f"FAILED: {doc['error']}"
    text = "; ".join(f"{kind}: {', '.join(doc[kind])}" for kind in plugins.KINDS if kind in doc)
    if "objectives" in doc:
        text += f" (objectives: {', '.join(doc['objectives'])})"
    return text


@app.command("list", cls=CoralCommand)
def list_plugins(json_output: bool = typer.Option(False, "--json",
                                                  help="Print the list as JSON.")) -> None:
    """List plugins, their source, what they register, and any that failed to load."""
    from .output import print_json, show

    documents = plugin_documents()
    if json_output:
        print_json(documents)
        return
    failed = sum(doc["status"] == "failed" for doc in documents)
    show(Grid("Coral plugins", (Column("name", key=True), Column("source"), Column("status"),
                                Column("registers"), Column("hooks")),
              tuple((doc["name"], doc["source"], doc["status"], _registers(doc),
                     ", ".join(doc["hooks"]))
                    for doc in documents),
              f"{failed} plugin(s) failed and were skipped; 'coral -v plugins list' shows "
              "the traceback" if failed else ""))
