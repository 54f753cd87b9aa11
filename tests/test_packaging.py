"""What gets installed: one distribution, the `coral` script, no bare `cli`/`plugins` package."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from conftest import ROOT


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
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "coral = coral_cli.app:main" in text
