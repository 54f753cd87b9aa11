"""What gets installed: one distribution, the `coral` script, no bare `cli`/`plugins` package."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from conftest import ROOT


INSTALLED_AS = {"coral_core": "coral_core", "cli": "coral_cli", "plugins": "coral_plugins"}


def source_packages() -> set[str]:
    """Every folder with an __init__.py under the three roots, by its installed path."""
    found = set()
    for folder, installed in INSTALLED_AS.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            relative = init.parent.relative_to(ROOT / folder)
            if "__pycache__" not in relative.parts:
                found.add(str(Path(installed, relative)))
    return found


def test_wheel_installs_only_namespaced_packages_and_the_console_script(tmp_path):
    source = tmp_path / "source"  # setuptools builds in place: not in the working tree
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".venv", ".git", "build", "runs", "*.egg-info", "__pycache__", ".pytest_cache"))
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
         "--wheel-dir", str(tmp_path), str(source)], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    wheel, = tmp_path.glob("coral_engine-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top = {Path(name).parts[0] for name in names}
    assert {"coral_core", "coral_cli", "coral_plugins"} <= top
    assert not {"cli", "plugins", "tests", "benchmarks"} & top
    assert "coral_plugins/datasets/quixbugs.py" in names
    assert "coral_core/sandbox/inside/worker.py" in names
    for module in ("coral_plugins/models/baseline/__init__.py",
                   "coral_plugins/models/baseline/edits.py", "coral_plugins/models/hf/prompts.py",
                   "coral_plugins/models/openai/client.py", "coral_core/executors/in_process.py"):
        assert module in names
    packaged = {str(Path(name).parent) for name in names if name.endswith("/__init__.py")}
    assert packaged == source_packages(), "every package of the tree, found, not listed"
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "coral = coral_cli.entry:main" in text
