"""cosmic-ray's own sequential `exec` against `coral mutation run` (and mutmut 3, given its
executable) on the same module and tests, in one run: seconds, ratio, per-mutant time, and
whether every verdict agrees with cosmic-ray's.

    .venv/bin/python benchmarks/mutation.py            # the ~90-line module, 25 tests (slow:
                                                       # cosmic-ray takes about 10 minutes)
    .venv/bin/python benchmarks/mutation.py --small    # the test suite's small module
    .venv/bin/python benchmarks/mutation.py --library ordered-set --mutmut /path/to/mutmut
        # a real library as its source distribution lays it out (pip downloads it)
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

BIN = Path(sys.executable).parent
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from real_libraries import DEPS, LIBRARIES  # noqa: E402

SMALL = ('LIMIT = 10\n\n\ndef clamp(x, high=LIMIT):\n    if x > high:\n        return high\n'
         '    return x\n\n\ndef count_up(n):\n    i = 0\n    while i < n:\n        i += 1\n'
         '    return i\n\n\ndef unused(a):\n    return -a\n')
SMALL_TESTS = ('from calc import clamp, count_up\n\n\ndef test_clamp():\n'
               '    assert clamp(50) == 10\n    assert clamp(3) == 3\n\n\n'
               'def test_count():\n    assert count_up(3) == 3\n')

MODULE = '''\
"""Small numeric and text helpers (the benchmark's module under test)."""

THRESHOLD = 3
SCALE = 2


def clamp(x, low=0, high=100):
    if x < low:
        return low
    if x > high:
        return high
    return x


def gcd(a, b):
    while b != 0:
        a, b = b, a % b
    return a


def is_prime(n):
    if n < 2:
        return False
    k = 2
    while k * k <= n:
        if n % k == 0:
            return False
        k += 1
    return True


def fib(n):
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


def digits(n):
    total = 0
    while n > 0:
        total += n % 10
        n //= 10
    return total


def scaled(values):
    return [v * SCALE for v in values if v > THRESHOLD]


def running_max(values):
    best = None
    out = []
    for v in values:
        if best is None or v > best:
            best = v
        out.append(best)
    return out


def vowels(text):
    return sum(1 for ch in text.lower() if ch in "aeiou")


def caesar(text, shift):
    out = []
    for ch in text:
        if "a" <= ch <= "z":
            out.append(chr((ord(ch) - 97 + shift) % 26 + 97))
        else:
            out.append(ch)
    return "".join(out)


def bucket(score):
    if score >= 90:
        return "A"
    if score >= 75:
        return "B"
    if score >= 50:
        return "C"
    return "F"


def mean(values):
    if not values:
        return 0.0
    return sum(values) / len(values)
'''

TESTS = '''\
from calc import (bucket, caesar, clamp, digits, fib, gcd, is_prime, mean, running_max,
                  scaled, vowels)


def test_clamp_low(): assert clamp(-3) == 0
def test_clamp_high(): assert clamp(300) == 100
def test_clamp_mid(): assert clamp(42) == 42
def test_gcd(): assert gcd(12, 18) == 6
def test_gcd_prime(): assert gcd(7, 5) == 1
def test_prime_small(): assert not is_prime(1) and is_prime(2)
def test_prime_9(): assert not is_prime(9)
def test_prime_13(): assert is_prime(13)
def test_fib_0(): assert fib(0) == 0
def test_fib_10(): assert fib(10) == 55
def test_digits(): assert digits(1234) == 10
def test_digits_zero(): assert digits(0) == 0
def test_scaled(): assert scaled([1, 4, 5]) == [8, 10]
def test_running_max(): assert running_max([1, 3, 2, 5]) == [1, 3, 3, 5]
def test_running_max_empty(): assert running_max([]) == []
def test_vowels(): assert vowels("Education") == 5
def test_caesar(): assert caesar("abz", 1) == "bca"
def test_caesar_keep(): assert caesar("A-b", 2) == "A-d"
def test_bucket_a(): assert bucket(95) == "A"
def test_bucket_b(): assert bucket(80) == "B"
def test_bucket_c(): assert bucket(60) == "C"
def test_bucket_f(): assert bucket(10) == "F"
def test_mean(): assert mean([1, 2, 3]) == 2
def test_mean_empty(): assert mean([]) == 0.0
def test_smoke(): assert callable(mean)
'''


@dataclass(frozen=True)
class Project:
    """Where each tool runs (a fresh copy each), on what, and with which PYTHONPATH."""

    make: Callable[[Path], None]
    module: str
    tests: tuple[str, ...]
    mutmut_paths: str
    pythonpath: tuple[str, ...] = ()
    mutmut_copy: tuple[str, ...] = ()

    def env(self, root: Path) -> dict[str, str]:
        """The environment every tool runs the tests in (the library's own path entries are
        relative to its folder)."""
        paths = [str(root / p) if not Path(p).is_absolute() else p for p in self.pythonpath]
        return dict(os.environ, PYTHONPATH=os.pathsep.join(paths)) if paths \
            else dict(os.environ)


def built_in(module: str, tests: str) -> Project:
    def make(root: Path) -> None:
        root.mkdir()
        (root / "calc.py").write_text(module)
        (root / "test_calc.py").write_text(tests)

    return Project(make, "calc.py", ("test_calc.py",), "calc.py")


def library(name: str, work: Path) -> Project:
    chosen = LIBRARIES[name]  # tests/real_libraries.py: the mutation tests' corpus
    pip = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]
    subprocess.run(pip + ["download", "--no-deps", "--no-binary", ":all:", "-d", str(work),
                          chosen.requirement], check=True)
    subprocess.run(pip + ["install", "--no-deps", "--target", str(work / "deps"), *DEPS],
                   check=True)
    archive = next(work.glob("*.tar.gz"))
    subprocess.run(["tar", "xzf", str(archive)], cwd=work, check=True)

    def make(root: Path) -> None:
        shutil.copytree(work / chosen.folder, root)

    return Project(make, chosen.module, chosen.tests, chosen.package,
                   (str(work / "deps"), *chosen.pythonpath), chosen.mutmut_copy)


def verdicts(path: Path) -> dict:
    from cosmic_ray.work_db import WorkDB, use_db

    with use_db(str(path), WorkDB.Mode.open) as db:
        return {(i.mutations[0].operator_name, i.mutations[0].occurrence): r.test_outcome.value
                for i, r in db.completed_work_items}


def cosmic_ray(root: Path, project: Project) -> float:
    """cosmic-ray's init and exec, timed (the suite is run once before, untimed, to set
    cosmic-ray's timeout by the seed's rule)."""
    tests = " ".join(project.tests)
    begin = time.perf_counter()
    env = project.env(root)
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *project.tests],
                   cwd=root, check=True, capture_output=True, env=env)
    suite = time.perf_counter() - begin
    (root / "cr.toml").write_text(
        f'[cosmic-ray]\nmodule-path = "{project.module}"\ntimeout = {max(10, 1.5 * suite)}\n'
        'excluded-modules = []\n'
        f'test-command = "{sys.executable} -m pytest -x -q -p no:cacheprovider {tests}"\n'
        '[cosmic-ray.distributor]\nname = "local"\n')
    start = time.perf_counter()
    for step in ("init", "exec"):
        subprocess.run([str(BIN / "cosmic-ray"), step, "cr.toml", "s.sqlite"], cwd=root,
                       check=True, capture_output=True, env=env)
    return time.perf_counter() - start


def coral(root: Path, project: Project, workers: int) -> None:
    tests = [arg for test in project.tests for arg in ("--tests", test)]
    subprocess.run([sys.executable, "-m", "coral_cli.app", "mutation", "run", "--module",
                    project.module, *tests, "--session", "s.sqlite", "--workers", str(workers),
                    "--json"], cwd=root, check=True, capture_output=True, env=project.env(root))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true")
    parser.add_argument("--library", choices=sorted(LIBRARIES),
                        help="a real library instead of the built-in module")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--mutmut", metavar="PATH", default="",
                        help="a mutmut 3 executable (in a venv of its own, with pytest): "
                             "adds its row, on its own operator set")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if options.library:
            (Path(tmp) / "sdist").mkdir()
            project = library(options.library, Path(tmp) / "sdist")
        else:
            project = built_in(*((SMALL, SMALL_TESTS) if options.small else (MODULE, TESTS)))
        times = {}
        for who in ("cosmic-ray", "coral"):
            root = Path(tmp) / who
            project.make(root)
            if who == "cosmic-ray":  # its time starts after the suite's timing run
                times[who] = cosmic_ray(root, project)
            else:
                start = time.perf_counter()
                coral(root, project, options.workers)
                times[who] = time.perf_counter() - start
        theirs = verdicts(Path(tmp) / "cosmic-ray" / "s.sqlite")
        ours = verdicts(Path(tmp) / "coral" / "s.sqlite")
        differ = [key for key in theirs if theirs[key] != ours.get(key)]
        print("| tool | mutants | seconds | per mutant |")
        print("|---|---:|---:|---:|")
        print(f"| cosmic-ray exec (sequential) | {len(theirs)} | {times['cosmic-ray']:.1f} | "
              f"{times['cosmic-ray'] / max(1, len(theirs)):.3f} |")
        print(f"| coral mutation run ({options.workers} workers) | {len(ours)} | "
              f"{times['coral']:.1f} | {times['coral'] / max(1, len(ours)):.3f} |")
        print(f"ratio: {times['cosmic-ray'] / times['coral']:.1f}x; verdicts differing: "
              f"{len(differ)} {differ[:5]}", flush=True)
        if options.mutmut:  # last: a project mutmut cannot run loses only its row
            print(mutmut_row(Path(tmp) / "mutmut", project, options.mutmut))


def mutmut_row(root: Path, project: Project, mutmut: str) -> str:
    """mutmut 3 on the same module and tests: its own operators, so counts, not verdicts,
    compare (killed includes its timeouts, as cosmic-ray's)."""
    project.make(root)
    copy = "".join(f"\n    {path}" for path in project.mutmut_copy)
    (root / "setup.cfg").write_text(f"[mutmut]\npaths_to_mutate={project.mutmut_paths}\n"
                                    f"tests_dir={','.join(project.tests)}\n"
                                    + (f"also_copy ={copy}\n" if copy else ""))
    start = time.perf_counter()
    env = project.env(root)
    done = subprocess.run([mutmut, "run"], cwd=root, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        return f"| mutmut 3 run | - | - | - | failed (exit {done.returncode}): {last[0][:200]} |"
    seconds = time.perf_counter() - start
    results = subprocess.run([mutmut, "results", "--all", "true"], cwd=root, check=True,
                             capture_output=True, text=True, env=env).stdout.split()
    counts = {word: results.count(word) for word in ("killed", "survived", "timeout")}
    total = sum(counts.values())
    return (f"| mutmut 3 run (its own operators) | {total} | {seconds:.1f} | "
            f"{seconds / max(1, total):.3f} | killed {counts['killed'] + counts['timeout']}, "
            f"survived {counts['survived']} |")


if __name__ == "__main__":
    main()
