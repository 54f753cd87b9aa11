"""A memory and pids cgroup per sandbox slot, where the machine lets us create one.

Resource limits count per process, and the worker's memory sample sees only what processes
map: memory in memfds, in tmpfs files, in kernel objects (inodes, pipes) or shared between
processes escapes both. A memory cgroup counts every page the slot's processes pin, kernel
memory included, and the kernel enforces it; a pids cgroup bounds the slot's processes on
their own (the process rlimit counts every process of the sandbox user on the host).

The slot's group is created under the cgroup Coral itself runs in (so limits set on Coral
still apply), for cgroup v1 (memory.limit_in_bytes, memory.memsw.limit_in_bytes where swap
is accounted, pids.max) or v2 (memory.max, memory.swap.max, pids.max, where our group
delegates those controllers). The worker enters it before bubblewrap starts: a shell writes
its own pid into the group, then execs the sandbox, so every process of the slot is born
inside. Where no group can be made Coral says so once and keeps the sampled limit.
"""

from __future__ import annotations

import itertools
import logging
import os
import re
import time
from pathlib import Path

from coral_core.files.scratch import owner_gone, owner_tag

log = logging.getLogger(__name__)

ENTER = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 111; shift; done; shift; exec "$@"'


def _mounts() -> dict[str, Path]:
    """Mount points by controller ("memory", "pids"; "unified" for cgroup v2)."""
    found: dict[str, Path] = {}
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        head, _, tail = line.partition(" - ")
        fields, rest = head.split(), tail.split()
        if len(fields) < 5 or len(rest) < 3:
            continue
        kind, options = rest[0], rest[2].split(",")
        if kind == "cgroup2":
            found.setdefault("unified", Path(fields[4]))
        elif kind == "cgroup":
            for controller in ("memory", "pids"):
                if controller in options:
                    found.setdefault(controller, Path(fields[4]))
    return found


def _own_paths() -> dict[str, str]:
    """Our cgroup path per v1 controller, and "unified" for v2."""
    paths: dict[str, str] = {}
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return paths
    for line in lines:
        number, controllers, path = line.split(":", 2)
        if number == "0" and controllers == "":
            paths["unified"] = path
        for controller in controllers.split(","):
            if controller in ("memory", "pids"):
                paths[controller] = path
    return paths


def _write(path: Path, value: str) -> None:
    path.write_text(value)


def _remove(folder: Path, wait: float = 2.0) -> bool:
    """rmdir, retried while the last killed processes leave the group."""
    deadline = time.monotonic() + wait
    while True:
        try:
            folder.rmdir()
            return True
        except FileNotFoundError:
            return True
        except OSError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)


def _remove_stale(parent: Path) -> None:
    """Groups a Coral process that was killed could not remove (its owner is in the name)."""
    try:
        entries = list(parent.iterdir())
    except OSError:
        return
    for entry in entries:
        parts = entry.name.split("-")
        if len(parts) >= 3 and parts[0] == "coral" \
                and (owner_gone(parts[1]) or _legacy_gone(parts[1])):
            _remove(entry, wait=0)


def _legacy_gone(owner: str) -> bool:
    """A group named by an older Coral, after its bare pid: gone when no process has it."""
    return owner.isascii() and owner.isdigit() and not Path(f"/proc/{owner}").exists()


class SlotCgroup:
    """The memory (and pids) cgroup of one sandbox slot."""

    def __init__(self, folders: list[Path], memory: Path, pids: bool = False):
        self.folders = folders  # every group made (one per v1 hierarchy, one for v2)
        self.memory = memory
        self.pids = pids  # pids.max bounds the slot's processes

    @classmethod
    def create(cls, name: str, memory_bytes: int, processes: int) -> "SlotCgroup | None":
        """The group, its limits set; None where this machine does not let us make one."""
        mounts, own = _mounts(), _own_paths()
        try:
            if "memory" in mounts and "memory" in own:
                return cls._v1(mounts, own, name, memory_bytes, processes)
            if "unified" in mounts and "unified" in own:
                return cls._v2(mounts["unified"] / own["unified"].lstrip("/"), name,
                               memory_bytes, processes)
        except OSError as error:
            log.debug("no cgroup for the sandbox slot: %s", error)
        return None

    @classmethod
    def _v1(cls, mounts, own, name, memory_bytes, processes):
        made: list[Path] = []
        try:
            parent = mounts["memory"] / own["memory"].lstrip("/")
            _remove_stale(parent)
            memory = parent / name
            memory.mkdir()
            made.append(memory)
            _write(memory / "memory.limit_in_bytes", str(memory_bytes))
            if (memory / "memory.memsw.limit_in_bytes").exists():
                _write(memory / "memory.memsw.limit_in_bytes", str(memory_bytes))
            if "pids" in mounts and "pids" in own:
                parent = mounts["pids"] / own["pids"].lstrip("/")
                _remove_stale(parent)
                pids = parent / name
                pids.mkdir()
                made.append(pids)
                _write(pids / "pids.max", str(processes))
        except OSError:
            for folder in reversed(made):
                _remove(folder, wait=0)
            raise
        return cls(made, memory, pids=len(made) > 1)

    @classmethod
    def _v2(cls, parent, name, memory_bytes, processes):
        enabled = (parent / "cgroup.subtree_control").read_text().split()
        if "memory" not in enabled:
            return None
        _remove_stale(parent)
        group = parent / name
        group.mkdir()
        try:
            _write(group / "memory.max", str(memory_bytes))
            if (group / "memory.swap.max").exists():
                _write(group / "memory.swap.max", "0")
            if "pids" in enabled:
                _write(group / "pids.max", str(processes))
        except OSError:
            _remove(group, wait=0)
            raise
        return cls([group], group, pids="pids" in enabled)

    def wrap(self, command: list[str]) -> list[str]:
        """`command`, started inside the group (its every descendant is born there)."""
        procs = [str(folder / "cgroup.procs") for folder in self.folders]
        return ["/bin/sh", "-c", ENTER, "coral-cgroup", *procs, "--", *command]

    def memory_failures(self) -> int:
        """How often the group hit its memory limit (v1 failcnt, v2 max events)."""
        try:
            if (self.memory / "memory.failcnt").exists():
                return int((self.memory / "memory.failcnt").read_text())
            for line in (self.memory / "memory.events").read_text().splitlines():
                if line.startswith("max "):
                    return int(line.split()[1])
        except (OSError, ValueError):
            pass
        return 0

    def remove(self) -> None:
        for folder in self.folders:
            if not _remove(folder):
                log.warning("could not remove the sandbox cgroup %s", folder)


_NUMBERS = itertools.count(1)


def slot_name(index: int) -> str:
    """coral-<owner tag>-<a number unique in this process>-<slot>: stale groups are found
    by the process that made them (coral_core/files/scratch.py)."""
    return f"coral-{owner_tag()}-{next(_NUMBERS)}-{index}"


def user_tasks(uid: int, proc: str = "/proc") -> int:
    """The processes and threads whose real user is `uid`, on the whole host: what the
    kernel counts against RLIMIT_NPROC (a thread is one)."""
    count = 0
    for entry in os.listdir(proc):
        if not entry.isdigit():
            continue
        try:
            with open(f"{proc}/{entry}/status", "rb") as handle:
                status = handle.read()
        except OSError:
            continue  # ended while we looked
        uids = re.search(rb"^Uid:\s+(\d+)", status, re.M)
        threads = re.search(rb"^Threads:\s+(\d+)", status, re.M)
        if uids and int(uids.group(1)) == uid:
            count += int(threads.group(1)) if threads else 1
    return count
