"""`coral datasets fetch quixbugs`: a real archive served over loopback HTTP."""

from __future__ import annotations

import functools
import io
import http.server
import json
import tarfile
import threading
from pathlib import Path

import pytest

from conftest import coral_env, run_coral
from coral_plugins.datasets.quixbugs import COMMIT


@pytest.fixture
def served(tmp_path):
    """Serve tmp_path/www on a free loopback port; yield its base URL."""
    www = tmp_path / "www"
    www.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(www))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield www, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _entries(cache: Path) -> list[str]:
    """What the data set cache holds, less the fetch lock files (kept on purpose)."""
    return sorted(p.name for p in (cache / "datasets").iterdir() if not p.name.endswith(".lock"))


def _archive(data_dir: Path, target: Path, tamper: bool = False) -> None:
    """What GitHub serves: one top folder QuixBugs-<commit>/ holding the repository."""
    top = f"QuixBugs-{COMMIT}"
    with tarfile.open(target, "w:gz") as tar:
        for path in sorted((data_dir / "quixbugs").rglob("*")):
            relative = path.relative_to(data_dir / "quixbugs")
            if tamper and relative.as_posix() == "json_testcases/gcd.json":
                info = tar.gettarinfo(path, f"{top}/{relative}")
                payload = path.read_bytes().replace(b"1", b"2")
                info.size = len(payload)
                tar.addfile(info, io.BytesIO(payload))
                continue
            tar.add(path, f"{top}/{relative}", recursive=False)


def test_fetch_downloads_checks_and_installs_atomically(served, tmp_path, data_dir):
    www, base = served
    _archive(data_dir, www / "quixbugs.tar.gz")
    cache = tmp_path / "cache"
    env = coral_env(None, CORAL_CACHE_DIR=str(cache),
                    CORAL_QUIXBUGS_URL=f"{base}/quixbugs.tar.gz")

    listed = json.loads(run_coral("datasets", "list", "--json", env=env).stdout)
    assert next(d for d in listed if d["name"] == "quixbugs")["data"] is None
    testgen = next(d for d in listed if d["name"] == "testgen")  # reads quixbugs/: its splits
    assert testgen["splits"] == ["train", "test", "extra", "all"] and testgen["fetchable"]
    table = run_coral("datasets", "list", env=dict(env, COLUMNS="200")).stdout
    assert "CORAL_DATA_DIR, or coral datasets fetch quixbugs" in next(
        line for line in table.splitlines() if "| testgen" in line)
    missing = run_coral("run", "--plugin", "quixbugs", "--out", str(tmp_path / "r0"), env=env)
    assert missing.returncode == 2
    assert "--data-dir" in missing.stderr and "coral datasets fetch quixbugs" in missing.stderr

    fetched = run_coral("datasets", "fetch", "quixbugs", env=env)
    assert fetched.returncode == 0, fetched.stderr
    installed = cache / "datasets" / "quixbugs"
    assert (installed / "json_testcases" / "gcd.json").exists()
    assert _entries(cache) == ["quixbugs"], "no leftovers"

    listed = json.loads(run_coral("datasets", "list", "--json", env=env).stdout)
    entry = next(d for d in listed if d["name"] == "quixbugs")
    assert entry["cached"] is True and entry["data"] == str(installed)
    testgen = next(d for d in listed if d["name"] == "testgen")  # it reads quixbugs/
    assert testgen["data"] == str(installed) and testgen["cached"] is True
    good = data_dir / "quixbugs" / "correct_python_programs" / "gcd.py"
    scored = run_coral("evaluate", "--plugin", "quixbugs", "--problem", "gcd", "--candidate",
                       str(good), "--json", env=env)
    assert scored.returncode == 0, scored.stderr
    assert json.loads(scored.stdout)["passed"] is True


def test_tampered_archive_is_refused_and_nothing_is_installed(served, tmp_path, data_dir):
    www, base = served
    _archive(data_dir, www / "quixbugs.tar.gz", tamper=True)
    cache = tmp_path / "cache"
    env = coral_env(None, CORAL_CACHE_DIR=str(cache),
                    CORAL_QUIXBUGS_URL=f"{base}/quixbugs.tar.gz")
    result = run_coral("datasets", "fetch", "quixbugs", env=env)
    assert result.returncode == 2
    assert "content digest" in result.stderr and "nothing was installed" in result.stderr
    assert not (cache / "datasets" / "quixbugs").exists()
    assert not _entries(cache), "temporary files left behind"


def test_unreachable_archive_is_a_clear_error(tmp_path):
    env = coral_env(None, CORAL_CACHE_DIR=str(tmp_path / "cache"),
                    CORAL_QUIXBUGS_URL="http://127.0.0.1:9/quixbugs.tar.gz")
    result = run_coral("datasets", "fetch", "quixbugs", env=env)
    assert result.returncode == 2 and "download of" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
