"""Where data sets live, and fetching a pinned archive into the user cache atomically."""

from __future__ import annotations

import hashlib
import os
import shutil
import tarfile
import tempfile
import urllib.request
import zipfile
from pathlib import Path
from typing import Iterable

from .atomic import publish_dir
from .errors import UserError


def cache_root() -> Path:
    """$CORAL_CACHE_DIR, else $XDG_CACHE_HOME/coral, else ~/.cache/coral."""
    if os.environ.get("CORAL_CACHE_DIR"):
        return Path(os.environ["CORAL_CACHE_DIR"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "coral"


def fetched_dir(name: str) -> Path:
    return cache_root() / "datasets" / name


def find_dataset_dir(name: str, data_dir: str | os.PathLike[str] | None = None) -> Path:
    """`--data-dir DIR/NAME`, else `$CORAL_DATA_DIR/NAME`, else the fetched copy.

    Missing data is a UserError that names both ways to provide it.
    """
    if data_dir:
        where = Path(data_dir).expanduser()
        source = f"--data-dir {data_dir}"
    elif os.environ.get("CORAL_DATA_DIR"):
        where = Path(os.environ["CORAL_DATA_DIR"]).expanduser()
        source = f"CORAL_DATA_DIR={os.environ['CORAL_DATA_DIR']}"
    else:
        where, source = None, ""
    if where is not None:
        if (where / name).is_dir():
            return (where / name).resolve()
        reason = "does not exist" if not where.exists() else f"has no '{name}' folder"
        raise UserError(
            f"{source} {reason}; give a folder holding {name}/ (upstream layout) "
            f"or run 'coral datasets fetch {name}'"
        )
    if fetched_dir(name).is_dir():
        return fetched_dir(name)
    raise UserError(
        f"no {name} data: pass --data-dir DIR (or set CORAL_DATA_DIR) to a folder holding "
        f"{name}/, or run 'coral datasets fetch {name}'"
    )


def tree_digest(root: Path, folders: Iterable[str]) -> str:
    """sha256 over (relative path, content digest) of every file under `folders`."""
    outer = hashlib.sha256()
    for folder in sorted(folders):
        base = root / folder
        if not base.is_dir():
            raise UserError(f"{root} has no '{folder}' folder")
        for path in sorted(p for p in base.rglob("*") if p.is_file()):
            if "__pycache__" in path.parts or path.suffix == ".pyc":
                continue
            relative = path.relative_to(root).as_posix()
            outer.update(relative.encode() + b"\0")
            outer.update(hashlib.sha256(path.read_bytes()).digest())
    return outer.hexdigest()


def _download(url: str, target: Path, timeout: float = 60.0) -> None:
    if not url.startswith(("https://", "http://", "file://")):
        raise UserError(f"unsupported URL '{url}'")
    try:
        # scheme checked above: no file:// surprises from a redirect to elsewhere
        response = urllib.request.urlopen(url, timeout=timeout)  # nosec B310
        with response, target.open("wb") as out:
            shutil.copyfileobj(response, out)
    except OSError as error:
        raise UserError(f"download of {url} failed: {error}") from None


def _unpack(archive: Path, into: Path) -> Path:
    """Unpack safely (no absolute paths, no escapes) and return the single top folder."""
    into.mkdir(parents=True)
    if tarfile.is_tarfile(archive):
        with tarfile.open(archive) as tar:
            tar.extractall(into, filter="data")
    elif zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as zipped:
            for member in zipped.namelist():
                resolved = (into / member).resolve()
                if not str(resolved).startswith(str(into.resolve()) + os.sep):
                    raise UserError(f"archive member escapes the target folder: {member}")
            zipped.extractall(into)
    else:
        raise UserError(f"{archive.name} is neither a tar nor a zip archive")
    entries = [p for p in into.iterdir() if not p.name.startswith(".")]
    return entries[0] if len(entries) == 1 and entries[0].is_dir() else into


def fetch_pinned(
    name: str, url: str, digest: str, folders: Iterable[str], *, force: bool = False,
) -> Path:
    """Download `url`, check the content digest, and move it into the cache in one rename.

    The digest covers the unpacked files that Coral reads (archive bytes produced by a
    forge are not stable across time; their content is). Nothing is left in place unless
    the check passes.
    """
    folders = list(folders)
    target = fetched_dir(name)
    if target.is_dir() and not force:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{name}-", dir=target.parent) as scratch:
        scratch_path = Path(scratch)
        archive = scratch_path / "archive"
        _download(url, archive)
        unpacked = _unpack(archive, scratch_path / "unpacked")
        found = tree_digest(unpacked, folders)
        if found != digest:
            raise UserError(
                f"{name} archive from {url} has content digest {found}, expected {digest}; "
                "nothing was installed"
            )
        publish_dir(unpacked, target, replace=True)  # `force`: a fresh copy replaces the old
    return target
