"""Where a data set lives: `--data-dir`, `$CORAL_DATA_DIR`, or the copy `coral datasets
fetch` left in the user cache; and what a fetch may cost. Cheap to import (every data set
needs it to start): the downloading is in `fetch`."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from coral_core.errors import UserError

MiB = 1 << 20


@dataclass(frozen=True)
class FetchLimits:
    """What one fetch may cost. The QuixBugs archive is 0.1 MiB (0.9 MiB unpacked, 400
    files, none over 0.2 MiB): each limit leaves a wide margin over it."""

    download_bytes: int = 32 * MiB  # the archive as downloaded
    deadline: float = 600.0  # seconds for the whole download: connect, headers, body
    unpacked_bytes: int = 128 * MiB  # the decompressed archive stream, read or skipped
    members: int = 10_000  # archive entries (files, folders, links...)
    installed_bytes: int = 16 * MiB  # all installed files together
    file_bytes: int = 4 * MiB  # one installed file
    header_bytes: int = 1 * MiB  # one extended (pax / GNU long name) header


def cache_root() -> Path:
    """$CORAL_CACHE_DIR, else $XDG_CACHE_HOME/coral, else ~/.cache/coral."""
    if os.environ.get("CORAL_CACHE_DIR"):
        return Path(os.environ["CORAL_CACHE_DIR"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "coral"


def cache_folder(*parts: str) -> Path:
    """A folder in Coral's cache, made if missing; a cache that cannot be used (a file, a
    folder that cannot be made or written) is one line, not a traceback."""
    root = cache_root()
    path = root.joinpath(*parts)
    try:
        path.mkdir(parents=True, exist_ok=True)
        if not os.access(path, os.W_OK | os.X_OK):
            raise PermissionError(13, "Permission denied")
    except OSError as error:
        raise UserError(f"cannot use Coral's cache folder {root} ({error.strerror or error}); "
                        "set CORAL_CACHE_DIR to a folder you can write") from None
    return path


def is_folder(path: Path) -> bool:
    """`path.is_dir()`, False where it cannot be looked at (a cache under a home another
    user cannot enter raised PermissionError)."""
    try:
        return path.is_dir()
    except OSError:
        return False


_READ: set[str] = set()


def read_folders() -> list[str]:
    """The real paths of the folders this process reads data from: every data set's folder
    found so far, and Coral's cache (the fetched data sets, the HumanEval test key). No
    output a user names may be written in one (files/outputs.py)."""
    return sorted({*_READ, os.path.realpath(cache_root())})


def fetched_dir(name: str) -> Path:
    return cache_root() / "datasets" / name


def data_root(data_dir: str | os.PathLike[str] | None) -> tuple[Path | None, str]:
    """The folder of data sets the user gave (`--data-dir`, else `$CORAL_DATA_DIR`) and how
    they gave it; (None, "") when they gave none."""
    if data_dir:
        return Path(data_dir).expanduser(), f"--data-dir {data_dir}"
    if os.environ.get("CORAL_DATA_DIR"):
        return (Path(os.environ["CORAL_DATA_DIR"]).expanduser(),
                f"CORAL_DATA_DIR={os.environ['CORAL_DATA_DIR']}")
    return None, ""


def check_data_root(data_dir: str | os.PathLike[str] | None) -> None:
    """A folder of data sets that is none (a file, a path that does not exist) is the
    user's error, even where no data set is read (`coral datasets list` called every data
    set missing, exit status 0, a bad-input pass)."""
    where, source = data_root(data_dir)
    if where is not None and not is_folder(where):
        reason = "is not a folder" if os.path.lexists(where) else "does not exist"
        raise UserError(f"{source} {reason}; give a folder holding the data sets' folders "
                        "(quixbugs/, humaneval/, ...)")


def find_dataset_dir(name: str, data_dir: str | os.PathLike[str] | None = None) -> Path:
    """`--data-dir DIR/NAME`, else `$CORAL_DATA_DIR/NAME`, else the fetched copy.

    Missing data is a UserError that names both ways to provide it.
    """
    where, source = data_root(data_dir)
    if where is not None:
        if is_folder(where / name):
            found = (where / name).resolve()
            _READ.add(str(found))
            return found
        reason = (f"has no '{name}' folder" if is_folder(where) else
                  "is not a folder" if os.path.lexists(where) else "does not exist")
        raise UserError(
            f"{source} {reason}; give a folder holding {name}/ (upstream layout) "
            f"or run 'coral datasets fetch {name}'"
        )
    if is_folder(fetched_dir(name)):
        return fetched_dir(name)
    raise UserError(
        f"no {name} data: pass --data-dir DIR (or set CORAL_DATA_DIR) to a folder holding "
        f"{name}/, or run 'coral datasets fetch {name}'"
    )
