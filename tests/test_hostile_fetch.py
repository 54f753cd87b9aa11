"""`coral datasets fetch` against crafted archives and a hostile server (hostile_archives).

Each case runs the real command and asserts its exit status, one line on stderr, its time
and peak memory, and that nothing but the digested folders is ever installed. Bounds are
generous (a loaded machine must pass); before them a 3 MB archive took 3 GB of memory, a
108 KB one raised MemoryError, and an endless server wrote 13.8 GB.
"""

from __future__ import annotations

import fcntl
import os
import signal
import stat
import subprocess  # nosec B404 - runs the coral console script
import sys
import tarfile
import time
from pathlib import Path

import pytest

from coral_core.data.fetch import tree_digest
from coral_core.data.locate import FetchLimits
from coral_plugins.datasets.quixbugs import COMMIT, CONTENT_DIGEST, FOLDERS
from hostile_archives import (
    GiB, ArchiveServer, Entry, corrupt, extra_files, genuine, members_bytes, padded,
    pax_bomb_header, sparse_header, tar_gz, truncated,
)
from hostile_cli import base_env, run_measured

TOP = f"QuixBugs-{COMMIT}"
LIMITS = FetchLimits()


@pytest.fixture(scope="module")
def server():
    with ArchiveServer() as running:
        yield running


@pytest.fixture(scope="module")
def tree(data_dir: Path) -> list[Entry]:
    return genuine(data_dir, TOP)


def fetch(server: ArchiveServer, archive: bytes | None, tmp_path: Path, *flags: str,
          how: str = "plain", name: str = "quixbugs.tar.gz"):
    url = server.put(name, archive) if archive is not None else f"{server.base}/{name}"
    cache = tmp_path / "cache"
    env = base_env(CORAL_CACHE_DIR=str(cache), CORAL_QUIXBUGS_URL=f"{url}?how={how}")
    return run_measured("datasets", "fetch", "quixbugs", *flags, env=env), cache


def assert_refused(result, cache: Path, *words: str) -> None:
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert len(result.error_lines) == 1 and result.error_lines[0].startswith("coral: error: ")
    for word in words:
        assert word in result.stderr, result.stderr
    assert "nothing was installed" in result.stderr or "refused" in result.stderr
    datasets = cache / "datasets"
    left = sorted(p.name for p in datasets.iterdir() if not p.name.endswith(".lock"))
    assert left == [], f"left behind: {left}"
    assert result.peak_mib < 400, result  # about 140 MiB here, all of it the CLI itself
    assert result.seconds < 90, result


def installed_files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def test_only_digested_content_is_installed(server, tree, tmp_path, data_dir) -> None:
    """Extra files, a setuid bit, links and a 64 GiB sparse file outside the data folders:
    the genuine content installs, and nothing else comes with it."""
    setuid = [Entry(e.name, e.data, mode=0o4755) if e.name.endswith("/gcd.py") else e
              for e in tree]
    archive = tar_gz(
        members_bytes(setuid + [
            Entry(f"{TOP}/README.evil", b"#!/bin/sh\n"),
            Entry(f"{TOP}/link-out", kind=tarfile.SYMTYPE, link="/etc/passwd"),
            Entry(f"{TOP}/java_programs/Evil.java", b"class Evil {}"),
        ]),
        sparse_header(f"{TOP}/holes.bin", 64 * GiB) + b"x" * tarfile.BLOCKSIZE,
    )
    result, cache = fetch(server, archive, tmp_path)
    assert result.returncode == 0, result.stderr
    installed = cache / "datasets" / "quixbugs"
    files = installed_files(installed)
    assert files and all(f.split("/")[0] in FOLDERS for f in files), files
    expected = installed_files(data_dir / "quixbugs")
    assert files == [f for f in expected if f.split("/")[0] in FOLDERS]
    assert tree_digest(installed, FOLDERS) == CONTENT_DIGEST
    modes = {stat.S_IMODE(p.stat().st_mode) for p in installed.rglob("*") if p.is_file()}
    assert modes == {0o644}, modes  # the setuid bit did not come along
    assert result.peak_mib < 400 and result.seconds < 90, result


def _with(tree: list[Entry], *extra: Entry) -> bytes:
    return tar_gz(members_bytes(tree + list(extra)))


@pytest.mark.parametrize("case, words", [
    ("padded_outside", ("unpacks to more than",)),
    ("padded_inside", ("over the", "cap for one file")),
    ("many_entries", (f"more than {LIMITS.members} entries",)),
    ("extra_inside", ("content digest",)),
    ("symlink_inside", ("is a link",)),
    ("hardlink_inside", ("is a link",)),
    ("device_inside", ("device or FIFO",)),
    ("fifo_inside", ("device or FIFO",)),
    ("sparse_inside", ("python_programs/holes.py",)),
    ("traversal", ("escapes the target folder",)),
    ("absolute", ("escapes the target folder",)),
    ("two_tops", ("several top folders",)),
    ("pax_bomb", ("truncated or corrupt", "extended header")),
    ("truncated", ("truncated or corrupt",)),
    ("corrupt", ("truncated or corrupt",)),
    ("not_an_archive", ("truncated or corrupt",)),
])
def test_crafted_archives_are_refused_in_one_line(server, tree, tmp_path, case: str,
                                                  words: tuple[str, ...]) -> None:
    programs = f"{TOP}/python_programs"
    genuine_archive = _with(tree)
    archive = {
        "padded_outside": lambda: padded(tree, f"{TOP}/padding.bin", 4 * GiB),
        "padded_inside": lambda: padded(tree, f"{programs}/padding.py", 4 * GiB),
        "many_entries": lambda: tar_gz(members_bytes(tree) + extra_files(TOP, 100_000)),
        "extra_inside": lambda: _with(tree, Entry(f"{programs}/evil.py", b"import os\n")),
        "symlink_inside": lambda: _with(tree, Entry(f"{programs}/l.py", kind=tarfile.SYMTYPE,
                                                    link="/etc/passwd")),
        "hardlink_inside": lambda: _with(tree, Entry(f"{programs}/l.py", kind=tarfile.LNKTYPE,
                                                     link=f"{programs}/gcd.py")),
        "device_inside": lambda: _with(tree, Entry(f"{programs}/null", kind=tarfile.CHRTYPE)),
        "fifo_inside": lambda: _with(tree, Entry(f"{programs}/pipe", kind=tarfile.FIFOTYPE)),
        "sparse_inside": lambda: tar_gz(members_bytes(tree), sparse_header(
            f"{programs}/holes.py", 64 * GiB) + b"x" * tarfile.BLOCKSIZE),
        "traversal": lambda: _with(tree, Entry(f"{TOP}/../../evil.py", b"x")),
        "absolute": lambda: _with(tree, Entry("/tmp/coral-evil.py", b"x")),
        "two_tops": lambda: _with(tree, Entry("Other/python_programs/gcd.py", b"x")),
        "pax_bomb": lambda: tar_gz(members_bytes(tree) + pax_bomb_header("x", GiB)),
        "truncated": lambda: truncated(genuine_archive),
        "corrupt": lambda: corrupt(genuine_archive),
        "not_an_archive": lambda: b"<html>GitHub is down</html>\n" * 100,
    }[case]()
    assert len(archive) < 16 * 1024 * 1024  # a few MiB on the wire, whatever it unpacks to
    result, cache = fetch(server, archive, tmp_path)
    assert_refused(result, cache, *words)


@pytest.mark.parametrize("how, flags, words", [
    ("slow", ("--timeout", "3"), ("did not finish within 3 s",)),
    ("endless", (), (f"over the {LIMITS.download_bytes}-byte cap",)),
    ("short", (), ("cut short",)),
    ("huge", (), ("announces", "over the")),
])
def test_hostile_transfers_are_bounded(server, tree, tmp_path, how: str,
                                       flags: tuple[str, ...], words: tuple[str, ...]) -> None:
    result, cache = fetch(server, _with(tree), tmp_path, *flags, how=how)
    assert_refused(result, cache, *words)
    if how == "slow":
        assert result.seconds < 30, result  # one byte per second took 10 hours before


def test_a_killed_fetch_leaves_scratch_that_the_next_fetch_removes(server, tree,
                                                                   tmp_path) -> None:
    url = server.put("slow.tar.gz", _with(tree))
    cache = tmp_path / "cache"
    datasets = cache / "datasets"
    env = base_env(CORAL_CACHE_DIR=str(cache), CORAL_QUIXBUGS_URL=f"{url}?how=slow")
    coral = str(Path(sys.executable).with_name("coral"))
    process = subprocess.Popen([coral, "datasets", "fetch", "quixbugs"], env=env,  # nosec B603
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not list(datasets.glob(".quixbugs.scratch-*")) and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(1.0)  # a byte or so on disk
    finally:
        os.kill(process.pid, signal.SIGKILL)
        process.wait(30)
    assert list(datasets.glob(".quixbugs.scratch-*")), "the killed fetch left its scratch folder"
    (datasets / ".quixbugs.old-dead").mkdir()  # as a killed --force replacement leaves
    result, _ = fetch(server, _with(tree), tmp_path)
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in datasets.iterdir()) == [".quixbugs.lock", "quixbugs"]


def test_scratch_left_beside_an_installed_copy_is_removed_by_the_next_fetch(server, tree,
                                                                            tmp_path) -> None:
    result, cache = fetch(server, _with(tree), tmp_path)
    assert result.returncode == 0, result.stderr
    datasets = cache / "datasets"
    (datasets / ".quixbugs.scratch-killed").mkdir()  # a fetch --force killed at its deadline
    (datasets / ".quixbugs.scratch-killed" / "archive").write_bytes(b"partial")
    again, _ = fetch(server, _with(tree), tmp_path)
    assert again.returncode == 0, again.stderr
    assert sorted(p.name for p in datasets.iterdir()) == [".quixbugs.lock", "quixbugs"]


@pytest.mark.parametrize("link", ["symbolic", "hard"])
def test_a_planted_lock_never_truncates_what_it_points_to(server, tree, tmp_path,
                                                          link: str) -> None:
    datasets = tmp_path / "cache" / "datasets"
    datasets.mkdir(parents=True)
    victim = tmp_path / "victim"
    victim.write_text("keep me\n")
    if link == "symbolic":
        (datasets / ".quixbugs.lock").symlink_to(victim)
    else:
        os.link(victim, datasets / ".quixbugs.lock")
    result, _ = fetch(server, _with(tree), tmp_path)
    assert result.returncode == 2 and len(result.error_lines) == 1, result.stderr
    assert victim.read_text() == "keep me\n"


def test_a_second_fetch_at_the_same_time_is_refused(server, tree, tmp_path) -> None:
    datasets = tmp_path / "cache" / "datasets"
    datasets.mkdir(parents=True)
    with open(datasets / ".quixbugs.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        result, cache = fetch(server, _with(tree), tmp_path)
    assert result.returncode == 2 and "another 'coral datasets fetch quixbugs'" in result.stderr
    assert len(result.error_lines) == 1


def test_no_secret_of_the_url_is_printed(server, tree, tmp_path) -> None:
    secret = "s3cret-canary-9f1d"
    url = server.put("secret.tar.gz", truncated(_with(tree)))
    for mirror in (f"{url}?how=plain&token={secret}",
                   url.replace("http://", f"http://mirror:{secret}@")):
        env = base_env(CORAL_CACHE_DIR=str(tmp_path / "cache"), CORAL_QUIXBUGS_URL=mirror)
        result = run_measured("datasets", "fetch", "quixbugs", env=env)
        assert result.returncode == 2 and len(result.error_lines) == 1, result.stderr
        assert secret not in result.stderr + result.stdout and "***" in result.stderr
