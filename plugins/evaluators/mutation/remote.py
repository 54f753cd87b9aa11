"""Mutation workers on Ray (`coral mutation run --executor ray`).

Each worker is a Ray actor (one CPU) on whichever node Ray places it: it unpacks the project,
sent once through the object store (no shared file system is assumed), into a folder of its
own, and runs one warm worker (worker.py) there. The campaign talks to it exactly as to a local
worker (`hello`, `startup_seconds`, `ask`, `close`); verdicts are committed by the driver as
they arrive. An actor that dies is a dead worker: the campaign starts another and asks again.
"""

from __future__ import annotations

import io
import os
import tarfile
import tempfile
import uuid
from pathlib import Path
from typing import Any, Callable

from coral_core.errors import UserError
from coral_core.files.scratch import make_scratch, remove_tree, sweep
from coral_core.executors.ray_cluster import adopt, coral_environment

from .workers import SCRATCH, WorkerDied, start_worker

MAX_ARCHIVE = 64 << 20  # bytes of project sent to the cluster
SKIPPED_DIRS = {".git", ".hg", ".svn", "__pycache__", ".pytest_cache", ".mypy_cache", ".tox",
                ".nox", "node_modules", ".venv", "venv", "build", "dist", ".eggs"}


def pack_project(project: Path, leave_out: set[Path]) -> bytes:
    """The project folder as a gzipped tar: regular files only, no version control,
    virtual environments (a folder holding pyvenv.cfg), caches or sessions."""
    buffer = io.BytesIO()
    total = 0
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for folder, subfolders, files in os.walk(project):
            here = Path(folder)
            subfolders[:] = sorted(d for d in subfolders if d not in SKIPPED_DIRS
                                   and not (here / d / "pyvenv.cfg").exists()
                                   and not (here / d).is_symlink())
            for name in sorted(files):
                path = here / name
                if path in leave_out or name.endswith((".pyc", ".sqlite", ".sqlite-wal",
                                                       ".sqlite-shm")) or not path.is_file() \
                        or path.is_symlink():
                    continue
                total += path.stat().st_size
                if total > MAX_ARCHIVE:
                    raise UserError(f"the project folder {project} holds more than "
                                    f"{MAX_ARCHIVE >> 20} MiB of files to send to the Ray "
                                    "cluster; run from a smaller folder")
                archive.add(path, arcname=str(path.relative_to(project)), recursive=False)
    return buffer.getvalue()


class MutationActor:
    """Runs inside a Ray worker process: one warm mutation worker in an unpacked copy."""

    def __init__(self, archive: bytes, module: str, pytest_args: list[str],
                 environment: dict[str, str] | None = None):
        adopt(environment)
        self.folder = make_scratch(SCRATCH)
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as packed:
            packed.extractall(self.folder, filter="data")
        self.worker = None
        self.error = ""
        try:
            self.worker = start_worker(Path(module), pytest_args, Path(self.folder))
        except UserError as error:
            self.error = str(error)

    def hello(self) -> tuple[dict, float, str]:
        if self.worker is None:
            return {}, 0.0, self.error
        return self.worker.hello, self.worker.startup_seconds, ""

    def ask(self, request: dict) -> dict:
        if self.worker is None:
            raise WorkerDied(self.error)
        return self.worker.ask(request)

    def close(self) -> None:
        if self.worker is not None:
            self.worker.close()
        remove_tree(self.folder)
        # and the copies of actors killed on this node since this one started
        sweep(SCRATCH, os.path.dirname(self.folder))


class RemoteWorker:
    """The driver's handle on a MutationActor, shaped like pool.WorkerProcess."""

    def __init__(self, ray: Any, actor_class: Any, archive: Any, module: Path,
                 pytest_args: list[str]):
        self.ray = ray
        name = f"coral-mutation-{uuid.uuid4().hex[:12]}"  # a test or a user can find it
        self.actor = actor_class.options(name=name, namespace="coral").remote(
            archive, str(module), pytest_args, coral_environment())
        try:
            self.hello, self.startup_seconds, error = ray.get(self.actor.hello.remote())
        except ray.exceptions.RayError as failure:
            raise UserError(f"a mutation worker on the Ray cluster failed to start: "
                            f"{_first_line(failure)}") from None
        if error:
            raise UserError(error)

    def ask(self, request: dict) -> dict:
        try:
            return self.ray.get(self.actor.ask.remote(request))
        except self.ray.exceptions.RayError as failure:  # the actor or its worker died
            raise WorkerDied(_first_line(failure)) from None

    def close(self) -> None:
        try:
            self.ray.get(self.actor.close.remote(), timeout=30)
        except Exception:  # noqa: B902 - a dead actor has nothing left to close
            pass
        self.ray.kill(self.actor)


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[-1] if text else type(error).__name__


def ray_spawner(project: Path, leave_out: set[Path], address: str,
                ) -> tuple[Callable[[Path, list[str], Path], RemoteWorker], Callable[[], None]]:
    """(start a worker, shut down): workers as Ray actors, the project packed once."""
    from coral_core.executors.ray_cluster import connect, import_ray, shutdown as stop

    archive = pack_project(project, leave_out)
    started = connect(address)
    ray = import_ray()
    actor_class = ray.remote(num_cpus=1, max_restarts=0)(MutationActor)
    reference = ray.put(archive)

    def spawn(module: Path, pytest_args: list[str], _project: Path) -> RemoteWorker:
        return RemoteWorker(ray, actor_class, reference, module, pytest_args)

    def shutdown() -> None:
        if started:
            stop(ray)
        # what actors killed on this machine left, should no actor have outlived them here
        sweep(SCRATCH, tempfile.gettempdir())

    return spawn, shutdown
