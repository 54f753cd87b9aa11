"""Shared fixtures: the QuixBugs data folder, and running the real `coral` command."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytest_plugins = ("serve_fixture",)  # `served_tiny_model`: transformers serve on loopback


def data_root() -> Path:
    """CORAL_DATA_DIR if set (CI sets ../shared/datasets), else ../shared/datasets."""
    configured = os.environ.get("CORAL_DATA_DIR")
    path = Path(configured) if configured else ROOT.parent / "shared" / "datasets"
    return path.resolve()


@pytest.fixture(scope="session")
def data_dir() -> Path:
    path = data_root()
    if not (path / "quixbugs").is_dir():
        pytest.fail(f"QuixBugs data not found under {path}; set CORAL_DATA_DIR")
    return path


@pytest.fixture(autouse=True)
def _fresh_plugins(monkeypatch):
    """Each test sees the plugins its own environment selects."""
    from coral_core import plugins

    plugins.reset()
    yield
    plugins.reset()


def coral_env(data_dir: Path | None = None, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CORAL_")}
    if data_dir is not None:
        env["CORAL_DATA_DIR"] = str(data_dir)
    env.update(extra)
    return env


def run_coral(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
              timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """The installed console script, as a user runs it."""
    command = [str(Path(sys.executable).with_name("coral")), *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=timeout)
