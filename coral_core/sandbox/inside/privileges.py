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
        for name in ("prctl", "syscall", "shmctl", "msgctl", "semctl"):  # resolved once, here
            getattr(lib, name, None)
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


def clear_keyring():
    """The kernel keyring of the sandbox user is shared by all its processes on the host and
    outlives them: each candidate starts with it empty, so no state passes between them.
    Called in the child after it dropped every uid: the worker keeps real uid 0, and the
    user keyring is the real uid's (clearing there would empty root's)."""
    number = {"x86_64": 250, "aarch64": 219}.get(os.uname().machine)  # keyctl(2)
    if number and CHILD_IDS is not None:  # never the keyring of the user who runs Coral
        try:
            libc().syscall(number, 7, -4)  # KEYCTL_CLEAR, KEY_SPEC_USER_KEYRING
        except (ImportError, OSError, AttributeError):
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
