"""Files a user names for an output (`--results`, `export -o`, `fim build --out`).

A regular file, or a new one, is replaced whole: written beside it under a temporary name
and renamed over it, so a reader never sees half of it and a failure leaves the old one.
Through a symbolic link the file it names is replaced, and the link stays. A device or a
FIFO (`/dev/null`, `/dev/stdout`, a pipe) is written to as it is: renaming over one
replaced the node itself with a regular file, which as root destroyed `/dev/null` (found by
a fuzzing pass). The new file keeps the replaced one's permissions (and, under root, owner);
being a new file, it is no longer a hard link of any other. A folder or a socket is refused
in one line. (Coral's own files in run directories and caches are written by
files/atomic.py instead, never through a link.)
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path
from typing import IO, Iterator

from coral_core.data.locate import read_folders
from coral_core.errors import UserError
from coral_core.files.fileio import is_within


def refuse_read_folders(path: Path, what: str) -> None:
    """An output in a folder Coral reads would replace its input: `--results` written over
    HumanEval.jsonl.gz, a QuixBugs program or the cache's test key (a red-team pass)."""
    from coral_core.data.catalog import data_set_folders  # the plugins' registry: lazily

    for root in sorted({*read_folders(), *data_set_folders()}):
        if is_within(path.absolute(), root):
            raise UserError(f"{what} {path} lies in {root}, which Coral reads (a data set or "
                            "its cache); write elsewhere")


def _destination(path: Path, what: str) -> Path | None:
    """The file to replace, or None for a device or FIFO to write to as it is."""
    refuse_read_folders(path, what)
    try:
        info = os.stat(path)  # through links
    except FileNotFoundError:
        info = None
    except OSError as error:
        raise UserError(f"cannot write {what} {path}: {error.strerror or error}") from None
    if info is not None and not stat.S_ISREG(info.st_mode):
        if stat.S_ISCHR(info.st_mode) or stat.S_ISFIFO(info.st_mode):
            return None
        kind = "a folder" if stat.S_ISDIR(info.st_mode) else "not a file"
        raise UserError(f"{what} {path} is {kind}; give a file to write")
    target = Path(os.path.realpath(path)) if path.is_symlink() else path
    if not target.parent.is_dir():
        raise UserError(f"{what} {path}: not a file in an existing folder")
    if info is not None and _is_database(target):
        raise UserError(f"{what} {path} is an SQLite database (a run's store, a mutation "
                        "session?), which a JSON or text output would replace; write elsewhere")
    return target


def _is_database(path: Path) -> bool:
    """`--results session.sqlite` replaced a mutation session with JSON Lines (a red-team
    pass); no output Coral writes is a database."""
    try:
        with open(path, "rb") as handle:
            return handle.read(16) == b"SQLite format 3\x00"
    except OSError:
        return False


@contextlib.contextmanager
def output_file(path: str | os.PathLike[str], what: str = "output") -> Iterator[IO[str]]:
    """A text handle whose content becomes `path` when the block ends without error."""
    path = Path(path)
    target = _destination(path, what)
    try:
        if target is None:
            with open(path, "w", encoding="utf-8", newline="") as handle:
                yield handle
            return
        draft = _draft(target)
        try:
            with open(draft, "x", encoding="utf-8", newline="") as handle:
                _keep_access(handle.fileno(), target)
                yield handle
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(draft, target)
        finally:
            draft.unlink(missing_ok=True)
    except OSError as error:
        raise UserError(f"cannot write {what} {path}: {error.strerror or error}") from None


def _draft(target: Path) -> Path:
    return target.with_name(f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")


def _keep_access(descriptor: int, target: Path) -> None:
    """The new file gets the replaced one's permissions (and, where Coral runs as root, its
    owner) before anything is written to it: a private (0600) export stayed private only
    until Coral replaced it with a file made under the umask (a red-team pass)."""
    try:
        info = os.stat(target)
    except FileNotFoundError:
        return
    if os.geteuid() == 0 and (info.st_uid, info.st_gid) != (os.getuid(), os.getgid()):
        with contextlib.suppress(PermissionError):  # root squashed on a network mount
            os.fchown(descriptor, info.st_uid, info.st_gid)
    os.fchmod(descriptor, stat.S_IMODE(info.st_mode) & 0o777)


def check_output(path: str | os.PathLike[str], what: str = "output") -> None:
    """Refuse, before any work, an output that cannot be written (a folder, a socket, a
    file in a folder that does not exist) or that lies in a folder Coral reads. (Data set
    folders are known once the data set has loaded: call again then; output_file checks
    it all once more as it writes.) The folder must take the new file: a read-only one was
    found only after minutes of scoring, whose results were then lost (a red-team pass)."""
    target = _destination(Path(path), what)
    if target is None:
        return
    draft = _draft(target)
    try:
        with open(draft, "x"):
            pass
        draft.unlink()
    except OSError as error:
        raise UserError(f"cannot write {what} {path}: {error.strerror or error}") from None


def write_output(path: str | os.PathLike[str], text: str, what: str = "output") -> None:
    with output_file(path, what) as handle:
        handle.write(text)
