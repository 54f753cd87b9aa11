"""Shared fixtures: the QuixBugs data folder, and running the real `coral` command.

Tests see the built-in plugins and the plugins they install, whatever else the environment
has installed: entry-point autoloading is off (CORAL_DISABLE_PLUGIN_AUTOLOAD=1) in process
and in every `coral` a test runs through `coral_env`, and a test that installs plugins
names them in CORAL_PLUGINS (`coral_env` does it for the distributions on its PYTHONPATH).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import sqlite3
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# served_tiny_model; the slow tier (tiers.py); longest files first (schedule.py)
pytest_plugins = ("serve_fixture", "tiers", "schedule")


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
    """Each test sees the built-in plugins, plus those it installs and names itself."""
    from coral_core import plugins

    monkeypatch.setenv("CORAL_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.delenv("CORAL_PLUGINS", raising=False)
    monkeypatch.delenv("CORAL_DISABLE_PLUGINS", raising=False)
    plugins.reset()
    yield
    plugins.reset()


def pytest_sessionstart(session):
    """Processes the tests start must hear ^C as a user's do, but they inherit an ignored
    SIGINT: pytest-xdist's workers ignore it, as does a suite started in the background
    (`nohup`, `cmd &`). Python's own handler is put in place for the whole session."""
    import signal

    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True)
def _interrupts_stay_on(request):
    """A test that leaves SIGINT or SIGTERM ignored in this process (code run in-process
    that sets them aside) would make every process a later test starts deaf to ^C: it
    inherits the disposition. The handlers are put back, with a warning naming the test."""
    import signal
    import warnings

    before = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    yield
    for number, handler in before.items():
        if signal.getsignal(number) != handler:
            signal.signal(number, handler)
            warnings.warn(f"{request.node.nodeid} left {signal.Signals(number).name} changed")


def installed_plugins(*folders: str | Path) -> list[str]:
    """Names of the `coral` entry points of the distributions installed in `folders`."""
    names: list[str] = []
    for dist in metadata.distributions(path=[str(folder) for folder in folders]):
        names += [ep.name for ep in dist.entry_points if ep.group == "coral"]
    return sorted(set(names))


def skip_without(*modules: str) -> None:
    """Skip the calling test module where one of `modules` is not installed, without
    importing them: every pytest process collects every module, and importing torch,
    transformers and peft there took each about 4 s of CPU (the tests import them)."""
    missing = [name for name in modules if importlib.util.find_spec(name) is None]
    if missing:
        pytest.skip(f"needs {', '.join(missing)}", allow_module_level=True)


def coral_env(data_dir: Path | None = None, **extra: str) -> dict[str, str]:
    """The environment for a `coral` subprocess: no CORAL_* variable of the caller's, no
    entry-point autoloading, and CORAL_PLUGINS naming the plugins installed in `extra`'s
    PYTHONPATH folders unless `extra` sets CORAL_PLUGINS itself."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CORAL_")}
    env["CORAL_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    if data_dir is not None:
        env["CORAL_DATA_DIR"] = str(data_dir)
    if "CORAL_PLUGINS" not in extra and extra.get("PYTHONPATH"):
        names = installed_plugins(*extra["PYTHONPATH"].split(os.pathsep))
        if names:
            env["CORAL_PLUGINS"] = ",".join(names)
    env.update(extra)
    return env


def interrupt_coral(*args: str, env: dict[str, str], after: float = 4.0,
                    timeout: float = 120) -> tuple[int, str, str, float]:
    """`coral ARGS` sent Ctrl-C (SIGINT, at its default whatever started the tests) after
    `after` seconds: (exit status, stdout, stderr, seconds from the signal to the exit)."""
    command = [str(Path(sys.executable).with_name("coral")), *args]
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    time.sleep(after)
    process.send_signal(signal.SIGINT)
    signalled = time.monotonic()
    stdout, stderr = process.communicate(timeout=timeout)
    return process.returncode, stdout, stderr, time.monotonic() - signalled


def run_coral(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
              timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """The installed console script, as a user runs it."""
    command = [str(Path(sys.executable).with_name("coral")), *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=timeout)


def store_sql(path: Path, statement: str, params: tuple = (), *,
              read_only: bool = False) -> list[tuple]:
    """One statement on a run's store, committed, and the connection closed before the next
    Coral starts: a test's idle connection left open across a Coral that ended the store's
    WAL kept an old -shm, and its next connection in the same process read a WAL that no
    longer existed (SQLITE_IOERR_SHORT_READ)."""
    target = f"file:{path}?mode=ro" if read_only else str(path)
    with contextlib.closing(sqlite3.connect(target, uri=read_only, timeout=5)) as db:
        with db:
            return db.execute(statement, params).fetchall()


def ended_owner_tag() -> str:
    """The owner tag (coral_core/files/scratch.py) of a process that has ended: what names
    the scratch folders and cgroups a killed Coral left."""
    done = subprocess.run([sys.executable, "-c", "from coral_core.files.scratch import "
                           "owner_tag; print(owner_tag())"], capture_output=True, text=True,
                          check=True)
    return done.stdout.strip()


def gene_space(backend: str, adapters: bool, options: dict):
    """The evolution strategy's genes for a registered model backend, as a run finds them
    (through the model's registry entry)."""
    from coral_core import plugins
    from coral_plugins.search.evolution.genome import GeneSpace

    factory = plugins.registry().get("models", backend).factory
    return GeneSpace.for_model(backend, factory, adapters, options)
