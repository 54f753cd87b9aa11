"""Who the worker and its children run as, and what they may do to each other."""

from __future__ import annotations

import os
import signal

from .processes import IS_INIT


CHILD_IDS = None  # (uid, gid) the children run as, when the worker was started as root


_LIBC = []  # the C library through ctypes, loaded once before any fork (see libc)


def libc():
    """ctypes builds classes for every CDLL: load it once, in the worker, not per job."""
    if not _LIBC:
        import ctypes

        lib = ctypes.CDLL(None, use_errno=True)
        for name in ("prctl", "syscall", "shmctl", "msgctl", "semctl", "memmove", "memset"):
            getattr(lib, name, None)  # resolved once, here
        _LIBC.append(lib)
    return _LIBC[0]


def drop_privileges(uid, gid):
    """The worker acts as `uid` (files, /proc) but keeps root as its real and saved uid, so
    that no process running as `uid` (its children, other slots) may signal or trace it."""
    global CHILD_IDS
    CHILD_IDS = (uid, gid)
    try:
        os.setgroups([])
    except OSError:
        pass
    os.setresgid(gid, gid, gid)
    os.setresuid(0, uid, 0)


def die_with_parent():
    """Changing uids clears the parent-death signal that bubblewrap set: set it again."""
    try:
        libc().prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (ImportError, OSError, AttributeError):
        pass


def prefer_as_oom_victim():
    """In a forked child, before it drops root for good: when the slot's memory cgroup is
    full, the kernel kills the candidate's processes before the worker (which cleans up).
    Its /proc files belong to root (it is not dumpable), hence the brief return to euid 0."""
    try:
        if CHILD_IDS is not None:
            os.setresuid(-1, 0, -1)
        fd = os.open("/proc/self/oom_score_adj", os.O_WRONLY)
        try:
            os.write(fd, b"1000")
        finally:
            os.close(fd)
    except OSError:
        pass


def drop_fully():
    """In the child: every uid becomes the sandbox user's, so nothing can be regained."""
    if CHILD_IDS is not None:
        uid, gid = CHILD_IDS
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)


def harden():
    """No core dumps and no ptrace/proc-mem access from the children (same uid)."""
    try:
        lib = libc()
        lib.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 0
        if not IS_INIT:
            lib.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: orphans come back to us
            lib.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG: die with the host
    except (ImportError, OSError, AttributeError):
        pass
