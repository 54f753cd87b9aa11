"""cosmic-ray's verdict on one mutant, the way `cosmic-ray exec` reaches it: the mutant written
into the module's file (cosmic-ray's own `mutate_code`, UTF-8) in a copy of the project, then
`python -m pytest -x` there; exit status 0 survived, anything else killed. Used by the
real-layout tests and by `benchmarks/mutation.py` as the oracle Coral must equal."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache", "*.sqlite")


def mutant_source(source: str, operator: str, occurrence: int) -> str | None:
    import cosmic_ray.plugins
    from cosmic_ray.mutating import mutate_code

    return mutate_code(source, cosmic_ray.plugins.get_operator(operator)(), occurrence)


def verdict(project: Path, module: str, tests: list[str], operator: str, occurrence: int,
            env: dict | None = None, timeout: float = 60.0) -> str:
    """"killed" or "survived" (a timeout is killed, as in cosmic-ray)."""
    source = (project / module).read_text(encoding="utf-8")
    mutated = mutant_source(source, operator, occurrence)
    if mutated is None:
        return "no-test"
    with tempfile.TemporaryDirectory(prefix="coral-oracle-") as scratch:
        copy = Path(scratch) / project.name
        shutil.copytree(project, copy, ignore=IGNORE, symlinks=True)
        (copy / module).write_text(mutated, encoding="utf-8")
        environ = dict(os.environ, **(env or {}))
        environ["PYTHONDONTWRITEBYTECODE"] = "1"
        if "PYTHONPATH" in environ:  # relative entries name folders of the copy
            environ["PYTHONPATH"] = os.pathsep.join(
                str(copy / part) if part and not os.path.isabs(part) else part
                for part in environ["PYTHONPATH"].split(os.pathsep))
        try:
            done = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q",
                                   "-p", "no:cacheprovider", *tests], cwd=copy, env=environ,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            return "killed"
        return "survived" if done.returncode == 0 else "killed"


def verdicts(project: Path, module: str, tests: list[str], keys: list[tuple[str, int]],
             env: dict | None = None, workers: int = 2) -> dict[tuple[str, int], str]:
    """{(operator, occurrence): verdict} for `keys`, `workers` at a time."""
    with ThreadPoolExecutor(workers) as pool:
        found = pool.map(lambda key: verdict(project, module, tests, key[0], key[1], env), keys)
        return dict(zip(keys, found))
