"""The kernel keyrings of the sandbox user: emptied, so that no key passes between candidates.

A user's keyring, user session keyring and persistent keyring belong to the uid on the whole
host (not to a namespace of ours) and outlive every process: keys a candidate put there
would reach the next candidate, even one in a later Coral process. The seccomp filter keeps
candidates from creating keys at all; this is the second layer: run as the sandbox user
(every uid dropped: these keyrings are the real uid's), it empties all three. It never runs
as the user who started Coral (without a drop to `nobody` there is no separate sandbox user,
and emptying that user's keyrings would break their session).
"""

from __future__ import annotations

import os

from . import privileges

_KEYCTL = {"x86_64": 250, "aarch64": 219}.get(os.uname().machine)
_CLEAR, _JOIN_SESSION, _GET_PERSISTENT, _INVALIDATE = 7, 1, 22, 21
_USER, _USER_SESSION, _PROCESS = -4, -5, -2


def _keyctl(*args):
    return privileges.libc().syscall(_KEYCTL, *args)


def usable():
    """Whether this process may empty keyrings: it runs as the separate sandbox user."""
    return _KEYCTL is not None and privileges.CHILD_IDS is not None \
        and os.getuid() == privileges.CHILD_IDS[0]


def clear_user_keyrings():
    """Empty the user and user session keyrings (two syscalls: done before every child)."""
    if usable():
        for keyring in (_USER, _USER_SESSION):
            _keyctl(_CLEAR, keyring)


def _has_persistent():
    """/proc/keys lists the keys this uid may view; asking for the persistent keyring would
    create it, so it is only fetched when it exists."""
    try:
        with open("/proc/keys", "rb") as handle:
            return b"_persistent." in handle.read(1 << 20)
    except OSError:
        return False


def clear_all():
    """Everything the sandbox user keeps between processes: the user and user session
    keyrings are emptied (the kernel keeps those two for every user), the persistent
    keyring is emptied and invalidated (it would otherwise stay, empty, for days). Runs in a
    janitor process (at worker start, and after each job where the seccomp filter is not
    available)."""
    if not usable():
        return
    clear_user_keyrings()
    if _has_persistent():
        persistent = _keyctl(_GET_PERSISTENT, -1, _PROCESS)  # linked into a keyring that
        if persistent > 0:                                   # dies with this process
            _keyctl(_CLEAR, persistent)
            _keyctl(_INVALIDATE, persistent)


def leave_shared_session():
    """A fresh anonymous session keyring for the job: the one inherited from the worker is
    the host's (root's) session keyring, which the child still possesses after the drop."""
    if _KEYCTL is not None:
        _keyctl(_JOIN_SESSION, None)


def janitor():
    """Fork a process that drops to the sandbox user, empties its keyrings and exits; wait
    for it. A no-op where there is no separate sandbox user."""
    if privileges.CHILD_IDS is None or _KEYCTL is None:
        return
    pid = os.fork()
    if pid == 0:
        try:
            privileges.drop_fully()
            clear_all()
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
