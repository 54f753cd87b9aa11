"""Leaving nothing of a job behind: files, System V IPC objects, POSIX message queues;
sending its captured output back."""

from __future__ import annotations

import os
import stat

from .privileges import libc


def send_tail(path, limit, pad, frames, kind):
    """Send the end of a captured stream, read into the scratchpad (never into an object
    that would outlive the job). The child may have replaced the file by anything (a FIFO
    would block us forever, a symlink would make us read for it): regular files only."""
    try:
        info = os.lstat(path)
        if not stat.S_ISREG(info.st_mode) or info.st_size == 0:
            return
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        return
    try:
        info = os.fstat(fd)
        if stat.S_ISREG(info.st_mode):
            frames.send(kind, pad.read_at(fd, limit, max(0, info.st_size - limit)))
    except OSError:
        return
    finally:
        os.close(fd)


def mounts_within(roots, table="/proc/self/mountinfo"):
    """What cleaning must leave in the writable places: the mount points inside them and the
    folders that lead there, each with its device and inode as they are now. bubblewrap
    binds the interpreter's tree where it lives, so a virtual environment under /tmp appears
    inside the sandbox's own /tmp (read-only). Read once at start, before any job; a job
    cannot add a mount this process sees, and an entry that is no longer the very same
    folder (renamed away, replaced, a symlink) is cleaned like anything else."""
    found = {}
    try:
        with open(table, "rb") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return {}
    for line in lines:
        fields = line.split()
        if len(fields) < 5:
            continue
        point = _unescape(fields[4])
        for root in roots:
            root = root.rstrip("/") or "/"
            if not point.startswith(root + "/"):
                continue
            found[point] = "mount"
            parent = os.path.dirname(point)
            while parent != root and parent.startswith(root + "/"):
                found.setdefault(parent, "path")
                parent = os.path.dirname(parent)
    keep = {}
    for path, kind in found.items():
        try:
            info = os.lstat(path)
        except OSError:
            continue
        keep[path] = (kind, info.st_dev, info.st_ino)
    return keep


def _unescape(raw):
    """mountinfo writes space, tab, newline and backslash as octal escapes."""
    text = raw.decode("utf-8", "surrogateescape")
    for code in ("040", "011", "012", "134"):
        text = text.replace("\\" + code, chr(int(code, 8)))
    return text


def _kept(path, info, keep):
    """'mount' or 'path' for an entry recorded at start that is still that same folder."""
    entry = keep.get(path)
    if entry is None or not stat.S_ISDIR(info.st_mode):
        return None
    kind, device, inode = entry
    return kind if (info.st_dev, info.st_ino) == (device, inode) else None


def _clean_quickly(root):
    """The common case: nothing, or only the job folder holding plain files."""
    with os.scandir(root) as found:
        entries = list(found)
    if not entries:
        return True
    if len(entries) != 1 or entries[0].name != "job" or not entries[0].is_dir(
            follow_symlinks=False):
        return False
    with os.scandir(entries[0].path) as found:
        files = list(found)
    if any(not f.is_file(follow_symlinks=False) for f in files):
        return False
    for item in files:
        os.unlink(item.path)
    return True


def clean(root, keep=None):
    """Remove everything a job left in the writable places, whatever its permissions, except
    what `keep` (from mounts_within) names: mount points stay untouched, and the folders
    leading to them stay but are emptied of anything else. Runs after every process of the
    job is gone, so nothing changes under it; it never crosses into another file system."""
    keep = keep or {}
    if not keep:
        try:
            if _clean_quickly(root):
                return
        except OSError:
            pass
    device = os.lstat(root).st_dev
    _clean_folder(root, keep, device)
    for entry in os.listdir(root):
        path = os.path.join(root, entry)
        if _kept(path, os.lstat(path), keep) is None:
            raise OSError("cannot clean " + root)


def _clean_folder(folder, keep, device):
    """Every entry is tried; the first failure is raised after the rest are gone."""
    failed = None
    for entry in os.listdir(folder):
        path = os.path.join(folder, entry)
        try:
            info = os.lstat(path)
            kind = _kept(path, info, keep)
            if kind == "path":
                _clean_folder(path, keep, device)
            elif kind is None and stat.S_ISDIR(info.st_mode):
                if info.st_dev != device:  # a mount moved here by renaming its parent
                    raise OSError("a mount point is not where it was: " + path)
                _remove_tree(path, device)  # any depth, any permissions
            elif kind is None:
                os.unlink(path)
        except OSError as error:
            failed = failed or error
    if failed is not None:
        raise failed


def _remove_tree(path, device=None):
    """Remove a directory tree of any depth and permissions, iteratively: walking down with
    chdir keeps every path short, and each directory is unlocked before it is entered. With
    `device`, a folder on another file system (a mount moved inside) stops it: OSError."""
    home = os.open(".", os.O_RDONLY)
    try:
        os.chdir(os.path.dirname(path))
        stack = [os.path.basename(path)]
        while stack:
            os.chmod(stack[-1], 0o700)
            os.chdir(stack[-1])
            below = None
            for entry in os.listdir("."):
                info = os.lstat(entry)
                if stat.S_ISDIR(info.st_mode):
                    if device is not None and info.st_dev != device:
                        raise OSError("a mount point is not where it was")
                    below = entry
                    break
                os.unlink(entry)
            if below is not None:  # we are in its parent, as the loop expects
                stack.append(below)
                continue
            os.chdir("..")
            os.rmdir(stack.pop())
            if stack:
                os.chdir("..")
    finally:
        os.fchdir(home)
        os.close(home)


def _ipc_in_use():
    """Whether any System V object exists: one *_INFO call per kind instead of reading
    /proc/sysvipc (the common case, after every job, is that there is none)."""
    import ctypes
    import struct

    lib = libc()
    info = ctypes.create_string_buffer(256)
    counts = []
    if lib.shmctl(0, 14, info) >= 0:  # SHM_INFO: shm_info.used_ids
        counts.append(struct.unpack_from("i", info.raw)[0])
    if lib.msgctl(0, 12, info) >= 0:  # MSG_INFO: msginfo.msgpool = queues in use
        counts.append(struct.unpack_from("i", info.raw)[0])
    if lib.semctl(0, 0, 19, info) >= 0:  # SEM_INFO: seminfo.semusz = sets in use
        counts.append(struct.unpack_from("8i", info.raw)[7])
    return len(counts) < 3 or any(counts)


def remove_ipc():
    """System V IPC objects outlive their processes (shared memory keeps its memory, outside
    any rlimit): as PID 1 of a private IPC namespace, every object in it is the job's."""
    if not _ipc_in_use():
        return
    lib = libc()
    removers = {"shm": lambda ident: lib.shmctl(ident, 0, None),  # IPC_RMID = 0
                "msg": lambda ident: lib.msgctl(ident, 0, None),
                "sem": lambda ident: lib.semctl(ident, 0, 0)}
    for table, remove in removers.items():
        try:
            with open("/proc/sysvipc/" + table) as handle:
                rows = handle.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            remove(int(row.split()[1]))


def remove_mqueues(root="/dev/mqueue"):
    """POSIX message queues outlive their processes; bubblewrap mounts the private IPC
    namespace's queue file system here, so every queue in it is the job's."""
    if os.path.isdir(root):
        for name in os.listdir(root):
            os.unlink(os.path.join(root, name))
