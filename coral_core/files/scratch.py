"""Scratch folders and cgroups that a killed Coral process leaves are removed by the next.

A process killed outright (SIGKILL, the OOM killer, a Ray actor killed mid-run) cannot
clean up after itself. So each such thing's name carries its owner: the pid namespace, pid
and start time of the process that made it. Whoever next makes one of the same kind
removes those whose owner is gone. The start time tells a reused pid from the owner; the
namespace keeps a process from judging owners it cannot see (two containers sharing /tmp),
whose folders are left alone.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import stat
# `rm -rf` for a tree deeper than Python recurses
import subprocess  # nosec B404
import tempfile
from collections.abc import Iterator

log = logging.getLogger(__name__)

_UNKNOWN = "x"  # no /proc: such an owner is never judged gone


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot, or None if there is none."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
        return fields[19].decode()
    except (OSError, IndexError):
        return None


def _namespace() -> str:
    """Our pid namespace, if /proc is that namespace's (it is not when a container mounts
    another's): otherwise no owner is judged."""
    try:
        if os.readlink("/proc/self") != str(os.getpid()):
            return _UNKNOWN
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return _UNKNOWN


def owner_tag() -> str:
    """`<pid namespace>_<pid>_<start time>` of this process (no '-' in it)."""
    pid = os.getpid()
    return f"{_namespace()}_{pid}_{_start_time(pid) or _UNKNOWN}"


def owner_gone(tag: str) -> bool:
    """Whether the process `tag` names has ended. A tag that cannot be judged (another pid
    namespace, no /proc, not a tag) is never gone; a bare pid (older names) is gone when no
    process has it."""
    if tag.isdigit():
        return not os.path.exists(f"/proc/{tag}")
    parts = tag.split("_")
    if len(parts) != 3 or not parts[1].isdigit() or _UNKNOWN in parts:
        return False
    if parts[0] != _namespace():
        return False
    return _start_time(int(parts[1])) != parts[2]


def remove_tree(path: str | os.PathLike[str]) -> None:
    """Remove a folder and everything in it, folders in it made read-only and trees deeper
    than Python recurses included; what still cannot go is logged, not raised. Nothing
    outside the folder is ever changed (not even the permissions of the one holding it)."""
    top = os.path.abspath(path)
    retried: set[tuple[object, str]] = set()

    def writable_and_retry(function, failed, info):
        failed = os.path.abspath(failed)
        inside = failed.startswith(top + os.sep)
        if os.geteuid() == 0 or not isinstance(info[1], PermissionError) \
                or not (inside or failed == top) or (function, failed) in retried:
            log.debug("could not remove %s: %s", failed, info[1])  # root: nothing read-only
            return
        retried.add((function, failed))
        try:
            if inside:  # the folder holding it is in the tree too
                os.chmod(os.path.dirname(failed), stat.S_IRWXU)
            if function is not os.rmdir and os.path.isdir(failed) \
                    and not os.path.islink(failed):
                os.chmod(failed, stat.S_IRWXU)
                shutil.rmtree(failed, onerror=writable_and_retry)
            else:
                function(failed)
        except OSError as error:
            log.debug("could not remove %s: %s", failed, error)

    try:
        shutil.rmtree(top, onerror=writable_and_retry)
    except RecursionError:
        subprocess.run(["rm", "-rf", "--", top], check=False)  # nosec B603 B607
    except OSError as error:
        log.debug("could not remove %s: %s", top, error)


def sweep(prefix: str, base: str, owners: tuple[int, ...] = ()) -> int:
    """Remove the folders named `prefix<tag>-...` in `base` that are ours (not links, owned
    by this user or one of `owners`) and whose owner process is gone; how many went."""
    users = {os.geteuid(), *owners}
    removed = 0
    try:
        entries = list(os.scandir(base))
    except OSError:
        return 0
    for entry in entries:
        if not entry.name.startswith(prefix):
            continue
        tag = entry.name[len(prefix):].split("-", 1)[0]
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if stat.S_ISDIR(info.st_mode) and info.st_uid in users and owner_gone(tag):
            log.debug("removing %s, left by a process that has ended", entry.path)
            remove_tree(entry.path)
            removed += 1
    return removed


def make_scratch(prefix: str, base: str | None = None, owners: tuple[int, ...] = ()) -> str:
    """A new private folder `<base>/<prefix><owner tag>-<random>` (base: the temporary
    folder), after removing those of the same prefix whose owners have ended (`owners`:
    users besides this one such a folder is handed to, as the sandbox's to nobody)."""
    base = base or tempfile.gettempdir()
    sweep(prefix, base, owners)
    return tempfile.mkdtemp(prefix=f"{prefix}{owner_tag()}-", dir=base)


@contextlib.contextmanager
def scratch_folder(prefix: str, base: str | None = None) -> Iterator[str]:
    """`make_scratch`, removed on leaving (a kill leaves it to the next sweep)."""
    folder = make_scratch(prefix, base)
    try:
        yield folder
    finally:
        remove_tree(folder)
