"""The test suite's tiers: `slow` marks every test that starts processes (the `coral`
command, a sandbox pool, a server, Ray, pip, a Hugging Face model, cosmic-ray), found from
its source and its fixtures' sources, besides the tests marked by hand. `make test-fast`
(`pytest -m "not slow"`) runs the rest in a few minutes and catches most mistakes in the
core's logic; CI runs everything.

The rule is read from code, not from timings, so a test is in the same tier on a quiet and
a busy machine: a new test that starts a process is slow without anyone marking it.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

import pytest

# What in a test's (or a fixture's) source starts a process or loads something large.
STARTS_PROCESSES = (
    "run_coral(", "run_measured(", "subprocess", "Popen(", "Sandbox(", "sandbox_pool",
    "served_tiny_model", "ray.", "RayExecutor", "pip", "HFModel(", "tiny_model", "cosmic",
    "run_mutation(", "build_scoring(", "ArchiveServer(", "FaultProxy(", "HostileServer(",
    "LocalExecutor(", "os.fork(", "multiprocessing",
)


def _source(function: Callable[..., Any]) -> str:
    try:
        return inspect.getsource(function)
    except (OSError, TypeError):
        return ""


def _names(code: Any) -> set[str]:
    """Every global name a function's code (nested functions included) refers to."""
    found = set(code.co_names)
    for constant in code.co_consts:
        if inspect.iscode(constant):
            found |= _names(constant)
    return found


def _heavy(function: Callable[..., Any], seen: dict[Any, bool]) -> bool:
    """The function's source starts processes, or a helper of the test suite it calls does
    (`_run(...)` in a test module, which calls `run_coral`)."""
    if function in seen:
        return seen[function]
    seen[function] = False  # a recursive helper ends here
    text = _source(function)
    heavy = any(word in text for word in STARTS_PROCESSES)
    code, scope = getattr(function, "__code__", None), getattr(function, "__globals__", {})
    if not heavy and code is not None:
        helpers = [scope[name] for name in _names(code) if inspect.isfunction(scope.get(name))]
        heavy = any(_heavy(helper, seen) for helper in helpers
                    if helper.__module__.split(".")[-1].startswith(("test_", "conftest"))
                    or "/tests/" in (getattr(helper.__code__, "co_filename", "")))
    seen[function] = heavy
    return heavy


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    seen: dict[Any, bool] = {}
    for item in items:
        if item.get_closest_marker("slow"):
            continue
        function = getattr(item, "function", None)
        fixtures = getattr(item, "_fixtureinfo", None)
        definitions = [d for defs in (fixtures.name2fixturedefs.values() if fixtures else ())
                       for d in defs]
        if (function is not None and _heavy(function, seen)) or any(
                _heavy(d.func, seen) for d in definitions
                if not d.func.__module__.startswith(("_pytest", "pytest"))):
            item.add_marker(pytest.mark.slow)
