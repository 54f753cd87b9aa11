"""Scratch folders and cgroups that a killed Coral process leaves are removed by the next.

A process killed outright (SIGKILL, the OOM killer, a Ray actor killed mid-run) cannot
clean up after itself. So each such thing's name carries its owner: the machine's boot,
the pid namespace, pid and start time of the process that made it. Whoever next makes one
of the same kind removes those whose owner is gone. The start time tells a reused pid from
the owner; the boot and namespace keep a process from judging owners it cannot see
(another machine sharing the folder over the network, a container sharing /tmp, a boot
before this one): their folders are left alone, as is anything whose owner's state cannot
be read.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import shutil
import stat
# `rm -rf` for a tree deeper than Python recurses
import subprocess  # nosec B404
import sys
import tempfile
from collections.abc import Iterator

log = logging.getLogger(__name__)

_UNKNOWN = "x"  # no /proc (or not ours): such an owner is never judged gone
_TAG = re.compile(r"([0-9a-f]{12})_([0-9]+)_([0-9]+)_([0-9]+)", re.ASCII)


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError:
        return None


def _boot() -> str:
    """This boot of this machine (12 hex digits of the kernel's boot id)."""
    text = (_read("/proc/sys/kernel/random/boot_id") or b"").decode("ascii", "replace")
    digits = "".join(c for c in text if c in "0123456789abcdef")
    return digits[:12] if len(digits) >= 12 else _UNKNOWN


def _namespace() -> str:
    """Our pid namespace, if /proc is that namespace's (it is not when a container mounts
    another's)."""
    try:
        if os.readlink("/proc/self") != str(os.getpid()):
            return _UNKNOWN
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return _UNKNOWN


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot; None if /proc has no such
    process. Raises OSError when it cannot tell (e.g. /proc hides other users' processes)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            text = handle.read()
    except FileNotFoundError:
        try:
            os.kill(pid, 0)  # hidden from /proc but alive (EPERM: another user's)?
        except ProcessLookupError:
            return None
        except PermissionError:
            raise OSError(errno.EPERM, "another user's process") from None
        raise OSError(errno.EEXIST, "a process /proc does not show")
    fields = text.rsplit(b")", 1)[-1].split()  # the name before it may hold anything
    if len(fields) < 20 or not fields[19].isdigit():
        raise OSError(errno.EINVAL, "an unreadable /proc/PID/stat")
    return fields[19].decode()


def owner_tag() -> str:
    """`<boot>_<pid namespace>_<pid>_<start time>` of this process (no '-' in it)."""
    pid = os.getpid()
    try:
        started = _start_time(pid) or _UNKNOWN
    except OSError:
        started = _UNKNOWN
    return f"{_boot()}_{_namespace()}_{pid}_{started}"


def owner_gone(tag: str) -> bool:
    """Whether the process `tag` names has certainly ended. A tag of another boot, machine
    or pid namespace, one without /proc, or not a tag at all is never gone."""
    match = _TAG.fullmatch(tag)
    if match is None:
        return False
    boot, namespace, pid, started = match.groups()
    if boot != _boot() or namespace != _namespace():
        return False
    try:
        return _start_time(int(pid)) != started
    except (OSError, ValueError, OverflowError):
        return False


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
                _rmtree(failed, writable_and_retry)
            else:
                function(failed)
        except OSError as error:
            log.debug("could not remove %s: %s", failed, error)

    try:
        _rmtree(top, writable_and_retry)
    except RecursionError:
        subprocess.run(["rm", "-rf", "--", top], check=False)  # nosec B603 B607
    except OSError as error:
        log.debug("could not remove %s: %s", top, error)


def _rmtree(path: str, handler) -> None:
    """shutil.rmtree with `handler(function, path, (type, error, traceback))` for failures
    (3.12 renamed the hook and passes the exception alone)."""
    if sys.version_info >= (3, 12):
        shutil.rmtree(path, onexc=lambda f, p, e: handler(f, p, (type(e), e, None)))
    else:
        shutil.rmtree(path, onerror=handler)


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
            if stat.S_ISDIR(info.st_mode) and info.st_uid in users and owner_gone(tag):
                log.debug("removing %s, left by a process that has ended", entry.path)
                remove_tree(entry.path)
                removed += 1
        except Exception as error:  # noqa: B902 - a sweep never stops the work it precedes
            log.debug("not sweeping %s: %s", entry.path, error)
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
