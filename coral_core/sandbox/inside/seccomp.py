"""A seccomp filter for the children: kernel objects a candidate could leave behind, and
user namespaces, are refused before they exist.

What it refuses (EPERM, or ENOSYS for clone3 so that the C library falls back to clone):
- keyrings (add_key, request_key, keyctl): the kernel keyrings of the sandbox user are
  shared by every process of that user on the host and outlive them;
- System V IPC and POSIX message queues: objects that outlive their processes (and, without
  bubblewrap's IPC namespace, are shared with the whole host);
- new user namespaces (clone or unshare with CLONE_NEWUSER, unshare and setns altogether,
  clone3 whose flags a filter cannot read): inside one a candidate is root and could mount
  a tmpfs whose memory no limit of ours sees. bubblewrap's --disable-userns needs
  --unshare-user, which would make the sandbox user root outside (see docs/sandbox.md);
- huge pages (mmap MAP_HUGETLB, memfd_create MFD_HUGETLB), which a memory cgroup does not
  charge, io_uring (its operations bypass this filter), userfaultfd and bpf;
- every syscall of another ABI (i386 through int 0x80, x32), whose numbers differ;
- memfd_create altogether where the slot has no memory cgroup: a memfd's pages belong to no
  process, so only a cgroup counts them.

Installed once in the worker, after it has emptied the sandbox user's keyrings, and so
inherited by every child it forks (standard library only: ctypes and struct). The worker
itself needs none of what it refuses: with the filter no job can create an IPC object or a
key, so there is nothing of that kind to remove, and the job memfd is made before. Linux on
x86_64 and aarch64; elsewhere no filter is installed and the worker says so at start-up.
"""

from __future__ import annotations

import errno
import os
import struct

from .privileges import libc

_ARCHES = {  # AUDIT_ARCH_*, and the syscall numbers of that ABI
    "x86_64": (0xC000003E, {
        "keys": (248, 249, 250),  # add_key, request_key, keyctl
        "sysv": (29, 30, 31, 64, 65, 66, 67, 68, 69, 70, 71, 220),
        "mqueue": (240, 241, 242, 243, 244, 245),
        "namespaces": (272, 308),  # unshare, setns
        "other": (425, 426, 427, 323, 321),  # io_uring_*, userfaultfd, bpf
        "clone": 56, "clone3": 435, "mmap": 9, "memfd_create": 319,
        "x32": True,
    }),
    "aarch64": (0xC00000B7, {
        "keys": (217, 218, 219),
        "sysv": tuple(range(186, 198)),
        "mqueue": tuple(range(180, 186)),
        "namespaces": (97, 268),
        "other": (425, 426, 427, 282, 280),
        "clone": 220, "clone3": 435, "mmap": 222, "memfd_create": 279,
        "x32": False,
    }),
}

CLONE_NEWUSER = 0x10000000
MAP_HUGETLB = 0x40000
MFD_HUGETLB = 0x0004

_LD_W_ABS, _JEQ_K, _JGE_K, _JSET_K, _RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
_ALLOW = 0x7FFF0000
_NR, _ARCH, _ARG0, _ARG3 = 0, 4, 16, 40  # offsets in struct seccomp_data (low 32 bits)


def _stmt(code, k):
    return struct.pack("HBBI", code, 0, 0, k)


def _jump(code, k, true, false):
    return struct.pack("HBBI", code, true, false, k)


def _deny(number):
    return _stmt(_RET_K, 0x00050000 | number)  # SECCOMP_RET_ERRNO


def _flag_check(nr, offset, flag, refusal):
    """`nr` with `flag` set in the argument at `offset`: refused. Reloads the syscall number."""
    return [_jump(_JEQ_K, nr, 0, 3), _stmt(_LD_W_ABS, offset), _jump(_JSET_K, flag, 0, 1),
            refusal, _stmt(_LD_W_ABS, _NR)]


def build(machine=None, allow_memfd=True):
    """The filter program for this machine (bytes of struct sock_filter), or None."""
    entry = _ARCHES.get(machine or os.uname().machine)
    if entry is None:
        return None
    arch, numbers = entry
    eperm = _deny(errno.EPERM)
    program = [_stmt(_LD_W_ABS, _ARCH), _jump(_JEQ_K, arch, 1, 0), eperm, _stmt(_LD_W_ABS, _NR)]
    if numbers["x32"]:
        program += [_jump(_JGE_K, 0x40000000, 0, 1), eperm]
    refused = list(numbers["keys"] + numbers["sysv"] + numbers["mqueue"]
                   + numbers["namespaces"] + numbers["other"])
    if not allow_memfd:
        refused.append(numbers["memfd_create"])
    for nr in refused:
        program += [_jump(_JEQ_K, nr, 0, 1), eperm]
    program += [_jump(_JEQ_K, numbers["clone3"], 0, 1), _deny(errno.ENOSYS)]
    program += _flag_check(numbers["clone"], _ARG0, CLONE_NEWUSER, eperm)
    program += _flag_check(numbers["mmap"], _ARG3, MAP_HUGETLB, eperm)
    program += _flag_check(numbers["memfd_create"], _ARG0 + 8, MFD_HUGETLB, eperm)
    program.append(_stmt(_RET_K, _ALLOW))
    return b"".join(program)


# Syscalls that act on another process. "own": the first argument names it, which must be
# the caller (kill, tgkill, rt_sigqueueinfo, rt_tgsigqueueinfo); "self": it may also be 0
# (prlimit64, sched_setparam, sched_setscheduler, sched_setaffinity, sched_setattr);
# "never": it cannot be checked so (tkill takes a thread id, pidfd_send_signal a
# descriptor); "fcntl"/"ioctl": the requests that make a descriptor signal an owner
# (F_SETOWN, F_SETSIG, F_SETOWN_EX; FIOSETOWN, SIOCSPGRP); "priority": setpriority.
_OTHERS = {
    "x86_64": {"own": (62, 234, 129, 297), "self": (302, 142, 144, 203, 314),
               "never": (200, 424), "fcntl": 72, "ioctl": 16, "priority": 141},
    "aarch64": {"own": (129, 131, 138, 240), "self": (261, 118, 119, 122, 274),
                "never": (130, 424), "fcntl": 25, "ioctl": 29, "priority": 140},
}
_OWNER_FCNTL, _OWNER_IOCTL = (8, 10, 15), (0x8901, 0x8902)


def _refused_values(nr, offset, values, eperm, allow):
    """`nr` with the argument at `offset` equal to one of `values`: refused."""
    n = len(values)
    return ([_jump(_JEQ_K, nr, 0, n + 3), _stmt(_LD_W_ABS, offset)]
            + [_jump(_JEQ_K, v, n - i, 0) for i, v in enumerate(values)] + [allow, eperm])


def build_alone(pid, machine=None):
    """A filter (stacked on the worker's) under which the process `pid` can signal, set
    the limits or the scheduling of, only itself (and its children only it): in a hosted
    job the candidate's process could otherwise stop the host's (SIGSTOP, directly or
    through a descriptor's owner) and hold its worker until the wall-clock limit, or change
    the host's limits. None where there is no filter for the machine."""
    machine = machine or os.uname().machine
    if machine not in _OTHERS:
        return None
    arch, numbers = _ARCHES[machine][0], _OTHERS[machine]
    eperm, allow = _deny(errno.EPERM), _stmt(_RET_K, _ALLOW)
    program = [_stmt(_LD_W_ABS, _ARCH), _jump(_JEQ_K, arch, 1, 0), eperm, _stmt(_LD_W_ABS, _NR)]
    for nr in numbers["never"]:
        program += [_jump(_JEQ_K, nr, 0, 1), eperm]
    for nr in numbers["own"]:
        program += [_jump(_JEQ_K, nr, 0, 4), _stmt(_LD_W_ABS, _ARG0),
                    _jump(_JEQ_K, pid, 1, 0), eperm, allow]
    for nr in numbers["self"]:
        program += [_jump(_JEQ_K, nr, 0, 5), _stmt(_LD_W_ABS, _ARG0),
                    _jump(_JEQ_K, 0, 2, 0), _jump(_JEQ_K, pid, 1, 0), eperm, allow]
    program += _refused_values(numbers["fcntl"], _ARG0 + 8, _OWNER_FCNTL, eperm, allow)
    program += _refused_values(numbers["ioctl"], _ARG0 + 8, _OWNER_IOCTL, eperm, allow)
    # setpriority(which, who, prio): only PRIO_PROCESS (0) of itself (0 or its pid)
    program += [_jump(_JEQ_K, numbers["priority"], 0, 7), _stmt(_LD_W_ABS, _ARG0),
                _jump(_JEQ_K, 0, 0, 3), _stmt(_LD_W_ABS, _ARG0 + 8),
                _jump(_JEQ_K, 0, 2, 0), _jump(_JEQ_K, pid, 1, 0), eperm, allow]
    program.append(allow)
    return b"".join(program)


_ALONE = []  # [(filter, offsets of its pid)]: made by the worker (prepare_alone)


def prepare_alone():
    """In the worker, before any fork: build_alone's program, wrapped for prctl, with the
    places of the pid noted (the two builds differ only there). A child then writes its pid
    in and installs it: building it there cost ~0.3 ms of page faults a job."""
    one, two = build_alone(1), build_alone(2)
    if one is None or two is None:
        return
    try:
        made = Filter(one)
    except (ImportError, OSError, AttributeError):
        return
    places = [at + 4 for at in range(0, len(one), 8) if one[at:at + 8] != two[at:at + 8]]
    _ALONE.append((made, places))


def confine_alone():
    """Install build_alone's filter for this process; True when it is in place."""
    if not _ALONE:
        return _install(build_alone(os.getpid()))
    made, places = _ALONE[0]
    pid = os.getpid()
    for at in places:
        struct.pack_into("I", made.code, at, pid)
    try:
        return made.install()
    except (OSError, AttributeError):
        return False


def _install(program):
    if program is None:
        return False
    try:
        return Filter(program).install()
    except (ImportError, OSError, AttributeError):
        return False


class Filter:
    """A built program, ready to install in a forked child with one prctl call."""

    def __init__(self, program):
        import ctypes

        class _Program(ctypes.Structure):
            _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

        self.code = ctypes.create_string_buffer(program, len(program))
        self._program = _Program(len(program) // 8, ctypes.addressof(self.code))
        self._pointer = ctypes.byref(self._program)

    def install(self):
        """No new privileges (setuid programs), then the filter; True when it is in place."""
        lib = libc()
        if lib.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
            return False
        return lib.prctl(22, 2, self._pointer, 0, 0) == 0  # PR_SET_SECCOMP, MODE_FILTER


def install(allow_memfd=True):
    """Install the filter for this machine in this process (the worker, once: every child
    inherits it, where installing it per child would cost half a millisecond each); True when
    it is in place, False where seccomp filters are not available (the worker reports it)."""
    return _install(build(allow_memfd=allow_memfd))
