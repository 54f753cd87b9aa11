"""Scratch folders (and sandbox cgroups) that a killed Coral process leaves are removed by the
next one that makes one of the same kind; nothing of a live process, of another user, of a
process in another pid namespace, or behind a link is touched."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from conftest import ended_owner_tag
from coral_core.files.scratch import make_scratch, owner_gone, owner_tag, remove_tree, sweep
from coral_core.sandbox import cgroups

MAKER = ("import sys, time\n"
         "from coral_core.files.scratch import make_scratch\n"
         "print(make_scratch(sys.argv[1], sys.argv[2]), flush=True)\n"
         "time.sleep(600)\n")


def _owner(prefix: str, base: Path) -> tuple[subprocess.Popen, Path]:
    """A process that made a scratch folder and holds on."""
    process = subprocess.Popen([sys.executable, "-c", MAKER, prefix, str(base)],
                               stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    return process, Path(process.stdout.readline().strip())


def test_a_killed_owners_folder_goes_and_a_live_ones_stays(tmp_path):
    killed, left = _owner("coral-t-", tmp_path)
    (left / "deep" / "er").mkdir(parents=True)
    (left / "deep" / "er" / "file").write_text("x")
    os.chmod(left / "deep", 0o500)  # read-only: removed all the same
    alive, kept = _owner("coral-t-", tmp_path)
    try:
        killed.send_signal(signal.SIGKILL)
        killed.wait()
        killed.stdout.close()
        assert left.is_dir() and kept.is_dir()
        mine = Path(make_scratch("coral-t-", str(tmp_path)))
        assert not left.exists()
        assert kept.is_dir() and mine.is_dir()
        assert mine.name.startswith(f"coral-t-{owner_tag()}-")
    finally:
        alive.kill()
        alive.wait()
        alive.stdout.close()


def test_only_ones_own_kind_of_folder_is_judged(tmp_path):
    dead = ended_owner_tag()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious").write_text("keep")
    boot, namespace, _, _ = owner_tag().split("_")
    other_namespace = tmp_path / f"coral-t-{boot}_1_1_1-abc"  # not ours to judge
    other_boot = tmp_path / f"coral-t-{'0' * 12}_{namespace}_1_1-abc"  # another machine's
    unicode_digits = tmp_path / f"coral-t-{boot}_{namespace}_\u00b2_1-abc"  # '²'.isdigit()
    bare_pid = tmp_path / "coral-t-999999999-abc"  # what an older Coral's random name can be
    other_prefix = tmp_path / f"coral-u-{dead}-abc"
    not_a_tag = tmp_path / "coral-t-somebody-else"
    stale = tmp_path / f"coral-t-{dead}-abc"
    kept = (other_namespace, other_boot, unicode_digits, bare_pid, other_prefix, not_a_tag)
    for folder in (*kept, stale):
        folder.mkdir()
    link = tmp_path / f"coral-t-{dead}-link"
    link.symlink_to(outside, target_is_directory=True)
    stale_file = tmp_path / f"coral-t-{dead}-file"
    stale_file.write_text("a file, not a folder of ours")
    assert sweep("coral-t-", str(tmp_path)) == 1
    assert not stale.exists()
    for folder in (*kept, link, stale_file):
        assert folder.exists() or folder.is_symlink()
    assert (outside / "precious").read_text() == "keep"


def test_a_reused_pid_is_told_from_its_owner():
    boot, namespace, pid, start = owner_tag().split("_")
    assert not owner_gone(owner_tag())
    assert owner_gone(f"{boot}_{namespace}_{pid}_{int(start) + 1}")  # another process
    assert owner_gone(ended_owner_tag())
    for unjudged in ("x_1_1_1", f"{boot}_x_1_1", f"{boot}_{namespace}_1_x", "garbage", "",
                     "1", f"{boot}_{namespace}_{'9' * 40}_1"):
        assert not owner_gone(unjudged), unjudged


@pytest.mark.skipif(os.geteuid() != 0, reason="makes a folder another user owns")
def test_folders_of_another_user_are_left_alone(tmp_path):
    stale = tmp_path / f"coral-t-{ended_owner_tag()}-abc"
    stale.mkdir()
    os.chown(stale, 65534, 65534)
    assert sweep("coral-t-", str(tmp_path)) == 0
    assert stale.is_dir()


@pytest.mark.skipif(os.geteuid() != 0 or not os.path.isdir("/var/tmp"),
                    reason="runs the removal as nobody, in /var/tmp (/tmp may be root-only)")
def test_a_read_only_tree_is_removed_by_its_unprivileged_owner():
    """As root every folder is writable; as a user, a test's read-only folders are not."""
    base = Path(tempfile.mkdtemp(dir="/var/tmp"))
    os.chown(base, 65534, 65534)
    os.chmod(base, 0o755)
    try:
        pid = os.fork()
        if pid == 0:
            try:
                os.setgid(65534)
                os.setuid(65534)
                top = Path(make_scratch("coral-t-", str(base)))
                (top / "a" / "b").mkdir(parents=True)
                (top / "a" / "b" / "f").write_text("x")
                (top / "closed").mkdir()
                os.chmod(top / "a" / "b", 0o500)
                os.chmod(top / "a", 0o500)
                os.chmod(top / "closed", 0)
                remove_tree(top)
                remove_tree(top)  # gone already: the folder holding it stays as it was
                remove_tree(base / "closed-and-missing")
                intact = os.stat(base).st_mode & 0o7777 == 0o755
                os._exit(0 if not top.exists() and intact else 1)
            except BaseException as error:
                os.write(2, repr(error).encode())
                os._exit(2)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
    finally:
        subprocess.run(["rm", "-rf", "--", str(base)], check=False)


def test_cgroups_of_a_killed_process_are_found_by_their_owner(tmp_path):
    """Slot cgroups carry the same owner tag (here plain folders stand in for them)."""
    mine = tmp_path / cgroups.slot_name(0)
    stale = tmp_path / f"coral-{ended_owner_tag()}-1-0"
    legacy = tmp_path / "coral-999999999-1-0"  # an older Coral's: a bare pid no process has
    for folder in (mine, stale, legacy):
        folder.mkdir()
    cgroups._remove_stale(tmp_path)
    assert mine.is_dir() and not stale.exists() and not legacy.exists()


def test_removing_what_is_not_there_changes_nothing_around_it(tmp_path):
    """A folder removed twice (a worker and its runner both clean up) must not make the one
    that held it private: an earlier version made /tmp itself 0700 that way."""
    tmp_path.chmod(0o1777)
    remove_tree(tmp_path / "gone")
    link = tmp_path / "link"
    link.symlink_to(tmp_path)
    remove_tree(link)  # a link is not followed, and not a folder of ours to remove
    assert tmp_path.stat().st_mode & 0o7777 == 0o1777
    assert link.is_symlink()
