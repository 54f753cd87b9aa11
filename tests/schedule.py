"""The order in which test files reach the workers of `make test` (pytest-xdist, one file
per worker, run with `--no-loadscope-reorder` so that this order is kept). xdist's own order
(most tests first) handed the files that take longest (a Ray cluster, cosmic-ray as the
oracle) out last, and one worker ran on alone for minutes after the others had finished.
Longest first, shortest last, keeps the workers busy to the end.

`LONGEST` is measured (worker seconds per file, `pytest --durations=0`), so a file that grows
long belongs in it; order only changes when tests run, never what they check. Files not
named follow by how many of their tests start processes (the slow tier), then the rest.
"""

from __future__ import annotations

import pytest

LONGEST = (  # 2026-11-29, worker seconds of the plain pass (3 workers, 2 cores): 383 to 84
    "test_ray_executor.py", "test_mutation_sdists.py", "test_evolution.py",
    "test_mutation.py", "test_mutation_hostile.py", "test_evolution_hf.py",
    "test_mutation_equivalent.py", "test_humaneval_upstream.py",
)


def _file(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


@pytest.hookimpl(trylast=True)  # after tiers.py has marked the slow tests
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    slow: dict[str, int] = {}
    for item in items:
        slow[_file(item)] = slow.get(_file(item), 0) + bool(item.get_closest_marker("slow"))

    def rank(item: pytest.Item) -> tuple[int, int]:
        name = _file(item).rsplit("/", 1)[-1]
        return (LONGEST.index(name) if name in LONGEST else len(LONGEST),
                -slow[_file(item)])

    items.sort(key=rank)  # stable: a file's tests keep their order
