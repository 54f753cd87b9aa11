"""The house's walls: built-in plugins import the core, never each other, and neither the
core nor the CLI imports a plugin (what two plugins share lives in the core; what one offers
another reaches it through a hook or the registry)."""

from __future__ import annotations

import ast
from pathlib import Path

from coral_core.plugins import BUILTIN_PLUGINS

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {"coral_core": ROOT / "coral_core", "coral_cli": ROOT / "cli",
            "coral_plugins": ROOT / "plugins"}


def _module_name(package: str, path: Path) -> tuple[str, bool]:
    parts = path.relative_to(PACKAGES[package]).with_suffix("").parts
    is_package = parts[-1] == "__init__"
    parts = parts[:-1] if is_package else parts
    return ".".join((package, *parts)), is_package


def _imports(package: str, path: Path) -> list[tuple[int, str]]:
    """(line, module) for every import in the file, relative ones resolved."""
    name, is_package = _module_name(package, path)
    here = name if is_package else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = here.split(".")
                anchor = anchor[:len(anchor) - (node.level - 1)]
                base = ".".join(filter(None, (*anchor, base)))
            # `from package import module` names a module too
            found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
            found.append((node.lineno, base))
    return found


def _owner(module: str) -> str | None:
    """The built-in plugin a module belongs to (its entry module or a module below it)."""
    for plugin in BUILTIN_PLUGINS:
        if module == plugin or module.startswith(plugin + "."):
            return plugin
    return None


def _files(package: str) -> list[Path]:
    return sorted(PACKAGES[package].rglob("*.py"))


def test_the_layout_is_what_this_test_reads():
    assert len(_files("coral_plugins")) > 50 and len(_files("coral_cli")) > 5
    assert _owner("coral_plugins.evaluators.mutation.worker") == "coral_plugins.evaluators.mutation"
    assert _owner("coral_plugins.evaluators.fim_tests") == "coral_plugins.evaluators.fim_tests"
    imports = dict((m, line) for line, m in _imports(
        "coral_plugins", PACKAGES["coral_plugins"] / "evaluators" / "mutation" / "campaign.py"))
    assert "coral_plugins.evaluators.mutation.workers" in imports  # a relative import, resolved


def test_no_built_in_plugin_imports_another():
    crossings = []
    helpers: dict[str, set[str]] = {}  # a module outside every plugin -> plugins using it
    for path in _files("coral_plugins"):
        module, _ = _module_name("coral_plugins", path)
        mine = _owner(module)
        for line, target in _imports("coral_plugins", path):
            if not target.startswith("coral_plugins."):
                continue
            theirs = _owner(target)
            if theirs is None:
                if target.count(".") >= 2:  # a helper module beside the plugins
                    helpers.setdefault(target, set()).add(mine or module)
                continue
            if theirs != mine:
                crossings.append(f"{path.relative_to(ROOT)}:{line} imports {target}")
    shared = {helper: users for helper, users in helpers.items() if len(users) > 1}
    assert not crossings, "\n".join(crossings)
    assert not shared, f"helper modules used by more than one plugin: {shared}"


def test_neither_the_core_nor_the_cli_imports_a_plugin():
    crossings = [f"{path.relative_to(ROOT)}:{line} imports {target}"
                 for package in ("coral_core", "coral_cli") for path in _files(package)
                 for line, target in _imports(package, path)
                 if target.split(".")[0] == "coral_plugins"]
    assert not crossings, "\n".join(crossings)


def _core_graph() -> dict[str, set[str]]:
    """Core module -> the core modules it imports (at the top, inside functions, or for
    type checking alike: a circle of any of them is one a reader must hold in mind)."""
    modules = {_module_name("coral_core", path)[0]: path for path in _files("coral_core")}
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        targets = set()
        for _, target in _imports("coral_core", path):
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != module:
                targets.add(target)
        graph[module] = targets
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_cycle_finder_finds_a_cycle():
    assert _circles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]


def test_the_core_has_no_import_circles():
    circles = _circles(_core_graph())
    assert not circles, "\n".join(" <-> ".join(circle) for circle in circles)
