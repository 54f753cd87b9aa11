"""`coral mutation run` on a suite of Hypothesis tests: the same verdicts in every run,
whatever the number of workers (Hypothesis seeded, every run with an example database of
its own, nothing stored in the project), each one cosmic-ray's seeded the same way.

The module's constant is found only by examples that happen to hit it (before Hypothesis
read the module's file for constants; versions that do send every mutant the exact way,
as the test that reads the file does with any version), so unseeded examples would decide
mutants by chance, and change which lines the baseline covers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import mutation_oracle

pytest.importorskip("hypothesis")
pytest.importorskip("cosmic_ray")

CORAL = [sys.executable, "-m", "coral_cli.app"]
MODULE = '''def special(x):
    if x == 437:
        return -1
    return x
'''
TESTS = '''import inspect

from hypothesis import given, strategies as st

import m


@given(st.integers(min_value=0, max_value=2000))
def test_special(x):
    assert m.special(x) == (-1 if x == 437 else x)


@given(st.integers(min_value=0, max_value=3))
def test_source_and_small_values(x):
    assert "def special" in inspect.getsource(m)
    assert m.special(x) == x
'''


def _run(project: Path, workers: int) -> dict[tuple[str, int], str]:
    done = subprocess.run(CORAL + ["mutation", "run", "--module", "m.py", "--tests",
                                   "test_m.py", "--session", "s.sqlite", "--fresh",
                                   "--operator", "core/NumberReplacer",  # the constants
                                   "--workers", str(workers), "--json"],
                          cwd=project, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return {(row["operator"], row["occurrence"]): row["verdict"]
            for row in json.loads(done.stdout)["mutants"] if row["verdict"] != "skipped"}


@pytest.mark.slow
def test_hypothesis_verdicts_repeat_and_equal_cosmic_rays_seeded(tmp_path):
    project = tmp_path / "p"
    project.mkdir()
    (project / "m.py").write_text(MODULE, encoding="utf-8")
    (project / "test_m.py").write_text(TESTS, encoding="utf-8")
    kept = project / ".hypothesis" / "examples" / "kept"
    kept.parent.mkdir(parents=True)
    kept.write_text("the project's own", encoding="utf-8")
    verdicts = _run(project, 2)
    assert _run(project, 1) == verdicts
    assert sorted(p.name for p in (project / ".hypothesis").rglob("*")) == ["examples", "kept"]
    assert verdicts == mutation_oracle.verdicts(
        project, "m.py", ["--hypothesis-seed=0", "test_m.py"], sorted(verdicts))
    assert len(verdicts) >= 4 and "killed" in verdicts.values()
