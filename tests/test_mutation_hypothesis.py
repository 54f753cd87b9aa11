"""`coral mutation run` on a suite of Hypothesis tests: the same verdicts in every run,
whatever the number of workers (Hypothesis seeded, every run with an example database of
its own, nothing stored in the project), each one cosmic-ray's seeded the same way.

The module's constant is found only by examples that happen to hit it, so unseeded examples
would decide mutants by chance, and change which lines the baseline covers. Hypothesis is
installed (pinned, from the package index) for this test alone: its pytest plugin costs
every pytest process of the suite half a second once installed. The pinned version does
not yet read the module's file for constants (later ones do, which sends every mutant the
exact way); one test here reads the file itself, so both ways run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import mutation_oracle

pytest.importorskip("cosmic_ray")

from test_mutation_sdists import _pip  # noqa: E402

CORAL = [sys.executable, "-m", "coral_cli.app"]
HYPOTHESIS = ["hypothesis==6.122.3", "attrs==24.3.0", "sortedcontainers==2.4.0"]
MODULE = '''def special(x):
    if x == 437:
        return -1
    return x


def small(x):
    if x == 3:
        return 0
    return x
'''
TESTS = '''import inspect

from hypothesis import given, strategies as st

import m


@given(st.integers(min_value=0, max_value=2000))
def test_special(x):
    assert m.special(x) == (-1 if x == 437 else x)


@given(st.integers(min_value=0, max_value=9))
def test_small(x):
    assert m.small(x) == (0 if x == 3 else x)


@given(st.integers(min_value=0, max_value=3))
def test_source_and_small_values(x):
    assert "def special" in inspect.getsource(m)
    assert m.special(x) == x
'''


@pytest.fixture(scope="module")
def hypothesis_path(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("hypothesis")
    _pip("install", "--no-deps", "--target", "deps", *HYPOTHESIS, cwd=root)
    return str(root / "deps")


def _run(project: Path, workers: int, path: str) -> dict[tuple[str, int], tuple[str, str]]:
    done = subprocess.run(CORAL + ["mutation", "run", "--module", "m.py", "--tests",
                                   "test_m.py", "--session", "s.sqlite", "--fresh",
                                   "--operator", "core/NumberReplacer",  # the constants
                                   "--workers", str(workers), "--json"],
                          cwd=project, capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, PYTHONPATH=path))
    assert done.returncode == 0, done.stderr
    return {(row["operator"], row["occurrence"]): (row["verdict"], row["mode"])
            for row in json.loads(done.stdout)["mutants"] if row["verdict"] != "skipped"}


@pytest.mark.slow
def test_hypothesis_verdicts_repeat_and_equal_cosmic_rays_seeded(tmp_path, hypothesis_path):
    project = tmp_path / "p"
    project.mkdir()
    (project / "m.py").write_text(MODULE, encoding="utf-8")
    (project / "test_m.py").write_text(TESTS, encoding="utf-8")
    kept = project / ".hypothesis" / "examples" / "kept"
    kept.parent.mkdir(parents=True)
    kept.write_text("the project's own", encoding="utf-8")
    rows = _run(project, 2, hypothesis_path)
    assert _run(project, 1, hypothesis_path) == rows
    assert sorted(p.name for p in (project / ".hypothesis").rglob("*")) == ["examples", "kept"]
    verdicts = {key: verdict for key, (verdict, _) in rows.items()}
    assert verdicts == mutation_oracle.verdicts(
        project, "m.py", ["--hypothesis-seed=0", "test_m.py"], sorted(verdicts),
        env={"PYTHONPATH": hypothesis_path})
    assert len(verdicts) >= 4 and "killed" in verdicts.values()
    assert {mode for _, mode in rows.values()} >= {"swap", "exact"}, rows
