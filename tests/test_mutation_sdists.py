"""`coral mutation run` on real libraries from the package index, laid out as their source
distributions ship them, against cosmic-ray's verdict on each mutant (mutation_oracle).

The libraries were chosen for their layouts: python-slugify (a package whose `__init__`
star-imports the module, relative imports, unittest subTest and a CLI run in subprocesses),
semver (src/ layout, conftest.py, `--import-mode=importlib`, `pythonpath` and pytest-cov in
its ini, decorator-made closures), humanize (src/ layout, `filterwarnings = error`,
`from __future__ import annotations`), ordered-set (a flat package, doctests in its ini),
inflection (the module is a package's `__init__`, its one test file beside the package,
nearly every test parametrized).
A seeded sample of each library's mutants runs in Coral; cosmic-ray's verdict is computed
for up to PER_MODE of them per way Coral applied them (swap, annotate, reload, exact,
uncovered, equivalent).
Needs the package index (pip download); skipped when it cannot be reached."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

import mutation_oracle
from real_libraries import DEPS, LIBRARIES as BY_NAME

pytest.importorskip("cosmic_ray")

CORAL = [sys.executable, "-m", "coral_cli.app"]
PER_MODE = 4
LIBRARIES = list(BY_NAME.values())


def _pip(*args: str, cwd: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "pip", *args, "-q", "--disable-pip-version-check"],
                          cwd=cwd, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        pytest.skip(f"the package index cannot be reached: {done.stderr.strip()[-200:]}")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("sdists")
    _pip("download", "--no-deps", "--no-binary", ":all:", "-d", "archives",
         *[library.requirement for library in LIBRARIES], cwd=root)
    _pip("install", "--no-deps", "--target", "deps", *DEPS, cwd=root)
    for archive in sorted((root / "archives").glob("*.tar.gz")):
        subprocess.run(["tar", "xzf", str(archive)], cwd=root, check=True)
    return root


@pytest.mark.parametrize("library", LIBRARIES, ids=lambda library: library.folder)
def test_verdicts_equal_cosmic_rays_on_real_layouts(corpus, library):
    project = corpus / library.folder
    pythonpath = os.pathsep.join([str(corpus / "deps"), *library.pythonpath])
    env = dict(os.environ, PYTHONPATH=pythonpath)
    args = ["mutation", "run", "--module", library.module, "--session", "coral.sqlite",
            "--fresh", "--sample", str(library.sample), "--seed", "1", "--workers", "2",
            "--json"]
    for tests in library.tests:
        args += ["--tests", tests]
    done = subprocess.run(CORAL + args, cwd=project, capture_output=True, text=True,
                          env=env, timeout=1200)
    assert done.returncode == 0, done.stderr
    rows = [row for row in json.loads(done.stdout)["mutants"] if row["verdict"] != "pending"]
    by_mode: dict[str, list[dict]] = {}
    for row in rows:
        by_mode.setdefault(row["mode"], []).append(row)
    chosen = [row for mode in sorted(by_mode) for row in random.Random(1).sample(
        by_mode[mode], min(PER_MODE, len(by_mode[mode])))]
    keys = [(row["operator"], row["occurrence"]) for row in chosen]
    expected = mutation_oracle.verdicts(project, library.module, list(library.tests), keys,
                                        env={"PYTHONPATH": pythonpath})
    got = {(row["operator"], row["occurrence"]): row["verdict"] for row in chosen}
    assert got == expected, sorted(
        (key, got[key], expected[key]) for key in got if got[key] != expected[key])
    assert len(chosen) >= 4


def test_a_resume_after_an_edit_reuses_verdicts_and_equals_a_fresh_session(corpus, tmp_path):
    """ordered-set with one method edited: the verdicts whose code and tests did not change
    are reused (doctests in the edited module run again: their file changed), and every
    verdict equals a fresh session's."""
    import shutil

    project = tmp_path / "ordered-set"
    shutil.copytree(corpus / "ordered-set-4.1.0", project)
    args = CORAL + ["mutation", "run", "--module", "ordered_set/__init__.py", "--tests", "test",
                    "--operator", "core/ReplaceComparisonOperator", "--workers", "2", "--json"]

    def run(*extra: str) -> dict:
        done = subprocess.run(args + list(extra), cwd=project, capture_output=True, text=True,
                              timeout=1200)
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout)

    run("--session", "s.sqlite")
    module = project / "ordered_set" / "__init__.py"
    text = module.read_text()
    edit = "            i = self.map[key]\n            del self.items[i]\n"
    assert text.count(edit) == 1  # discard()
    module.write_text(text.replace(edit, "            i = self.map[key]\n"
                                         "            assert i >= 0\n"
                                         "            del self.items[i]\n"))
    resumed = run("--session", "s.sqlite", "--resume")
    fresh = run("--session", "fresh.sqlite")
    assert resumed["changed"] == ["the module changed"]
    assert resumed["reused"] >= 10
    verdicts = {(m["operator"], m["occurrence"]): m["verdict"] for m in resumed["mutants"]}
    assert verdicts == {(m["operator"], m["occurrence"]): m["verdict"]
                        for m in fresh["mutants"]}
