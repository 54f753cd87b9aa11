"""The exact path: a private copy of the project with the mutant written into the module's
file, as cosmic-ray writes it, for the mutants whose tests can see the file on disk."""

from __future__ import annotations

import glob
import os
import secrets
import shutil
import stat

from coral_plugins.evaluators.mutation.probe import found_elsewhere

# Folders never copied (caches a run rebuilds) and folders linked rather than copied
# (version control, dependencies: big, and read, not written, by a test run).
CACHES = {"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"}
LINKED = {".git", ".hg", ".svn", "node_modules", ".tox", ".nox", ".venv", "venv"}
BIG_FILE = 8 << 20  # bytes: a bigger file is linked, not copied


def copy_project(source: str, dest: str, own: str = "") -> None:
    """Copy the project folder `source` to `dest`: regular files copied, symbolic links kept
    as they are (a relative one points into the copy), virtual environments, version
    control and files over BIG_FILE linked to the original, caches left out (and `dest`
    itself, should it lie inside the project). The file `own` (the module the mutants are
    written into) is always copied: through a link, a 9 MiB module's mutants were written
    into the user's file (a red-team pass)."""
    inside = {os.path.realpath(dest)}
    for folder, subfolders, files in os.walk(source):
        here = os.path.join(dest, os.path.relpath(folder, source))
        os.makedirs(here, exist_ok=True)
        keep = []
        for name in subfolders:
            path = os.path.join(folder, name)
            if name in CACHES or os.path.realpath(path) in inside:
                continue
            if os.path.islink(path):
                os.symlink(os.readlink(path), os.path.join(here, name))
            elif name in LINKED or os.path.exists(os.path.join(path, "pyvenv.cfg")):
                os.symlink(path, os.path.join(here, name))
            else:
                keep.append(name)
        subfolders[:] = keep
        for name in files:
            path, target = os.path.join(folder, name), os.path.join(here, name)
            if os.path.islink(path):
                os.symlink(os.readlink(path), target)
            elif os.path.isfile(path):
                if os.path.getsize(path) > BIG_FILE and path != own:
                    os.symlink(path, target)
                else:
                    shutil.copy2(path, target)


def forget_bytecode(module_file: str) -> None:
    """Remove the module's cached bytecode: a stale .pyc whose recorded size and mtime
    match the rewritten file would be imported instead of it."""
    folder, name = os.path.split(module_file)
    stem = name.rsplit(".", 1)[0]
    for path in glob.glob(os.path.join(folder, "__pycache__", glob.escape(stem) + ".*.pyc")):
        try:
            os.unlink(path)
        except OSError:
            pass


def write_mutant(module_file: str, source: str) -> None:
    """Write the mutated source as cosmic-ray's `mutate_path` does (UTF-8 text)."""
    replace_file(module_file, source.encode("utf-8"))
    forget_bytecode(module_file)


def restore(module_file: str, original: bytes) -> None:
    replace_file(module_file, original)
    forget_bytecode(module_file)


def replace_file(path: str, data: bytes) -> None:
    """A new file beside `path`, renamed over it: a test may have left a link (to a file
    outside the project) or a FIFO where the module was, which is replaced, never written
    through. The file keeps the permissions of the regular file it replaces."""
    try:
        info = os.lstat(path)
        mode = info.st_mode & 0o7777 if stat.S_ISREG(info.st_mode) else None
    except FileNotFoundError:
        mode = None
    folder, name = os.path.split(path)
    temporary = os.path.join(folder, f".{name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        with open(temporary, "xb") as handle:
            handle.write(data)
        if mode is not None:
            os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise


def in_copy(path: str, project: str, copy: str) -> str:
    """`path` inside the copy where it lies inside the project (`project` is a real path),
    else as it is."""
    real = os.path.realpath(path) if path else path
    here = os.path.realpath(copy)
    if not real or real == here or real.startswith(here + os.sep):
        return path  # already in the copy (which may lie inside the project)
    if real == project or real.startswith(project + os.sep):
        return os.path.join(copy, os.path.relpath(real, project))
    return path


class IntoCopy:
    """A meta path finder for the exact path's pytest: a module that some other finder would
    load from the project (an absolute PYTHONPATH entry, a .pth file, an editable install's
    finder) is loaded from the same place in the copy, where the mutant was written, as it
    would be from the project itself in cosmic-ray's run, which writes the mutant in place."""

    def __init__(self, project: str, copy: str):
        self.project, self.copy = project, copy

    def find_spec(self, fullname, path=None, target=None):
        import importlib.util

        spec = found_elsewhere(self, fullname, path, target)
        if spec is None:
            return None
        origin = spec.origin if spec.has_location else None
        moved = in_copy(origin, self.project, self.copy) if origin else origin
        if not origin or moved == origin or not os.path.exists(moved):
            return spec
        locations = spec.submodule_search_locations
        there = importlib.util.spec_from_file_location(
            fullname, moved, submodule_search_locations=None if locations is None else
            [in_copy(p, self.project, self.copy) for p in locations])
        return there or spec  # no loader for that kind of file: as it was found
