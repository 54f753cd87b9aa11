"""The weight-free repair baseline: its edits, its prior, its sampling, and its score."""

from __future__ import annotations

import ast
import difflib
import hashlib
import itertools
import random
import shutil
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from coral_core.scoring.verdicts import judge_case
from coral_core.errors import UserError
from coral_core.sandbox import Job, Sandbox, SandboxPolicy
from coral_core.types import GenerationRequest, Message, Prompt, SamplingParams, TrainingExample
from coral_plugins.datasets.quixbugs import FOLDERS, TEST, TRAIN, QuixBugs, make_prompt
from coral_plugins.models.baseline.model import CLOSING_FENCE, BaselineModel, create_baseline
from coral_plugins.models.baseline.prompt import program_in
from coral_plugins.models.baseline.edits import KINDS
from coral_plugins.models.baseline.prior import SHRINK, learn_prior
from coral_plugins.models.baseline.render import Variant, enumerate_variants, normalized
from coral_plugins.models.baseline.sampling import sampling_distribution
from coral_plugins.models.baseline.tuning import best_shrink, held_out_hits, label_problems

ACCUMULATE = """\
def tally(items, limit):
    total = 0
    for i in range(len(items)):
        if items[i] < limit and not items[i] == 0:
            total += items[i] * 2
        else:
            break
    return max(total, limit) - 1
"""

WALK = """\
def walk(seq, k):
    if not seq:
        return []
    out = []
    for x in seq:
        out.append(helper(x, k))
    return out[:k]


def helper(a, b):
    return a - b


def check(xs):
    return any(x > 0 for x in xs)
"""

# (source, a line of it, what one edit turns that line into, the kind of that edit)
EXPECTED = [
    (ACCUMULATE, "total += items[i] * 2", "total += items[i] / 2", "binary_op"),
    (ACCUMULATE, "total += items[i] * 2", "total += items[i] + 2", "binary_op_far"),
    (ACCUMULATE, "if items[i] < limit and", "if items[i] <= limit and", "compare_boundary"),
    (ACCUMULATE, "if items[i] < limit and", "if items[i] > limit and", "compare_flip"),
    (ACCUMULATE, "if items[i] < limit and", "if limit < items[i] and", "swap_operands"),
    (ACCUMULATE, "limit and not", "limit or not", "boolean_op"),
    (ACCUMULATE, "and not items[i] == 0", "and items[i] == 0", "unary_op"),
    (ACCUMULATE, "total += items[i] * 2", "total -= items[i] * 2", "augassign_op"),
    (ACCUMULATE, "total += items[i] * 2", "total += items[i] * 3", "number"),
    (ACCUMULATE, "break", "continue", "break_continue"),
    (ACCUMULATE, "total += items[i] * 2", "total += items[i - 1] * 2", "add_one"),
    (ACCUMULATE, "range(len(items))", "range(len(items) - 1)", "add_one"),
    (ACCUMULATE, "max(total, limit) - 1", "max(total, limit)", "drop_one"),
    (ACCUMULATE, "max(total, limit) - 1", "min(total, limit) - 1", "builtin_dual"),
    (ACCUMULATE, "max(total, limit) - 1", "max(limit, total) - 1", "swap_library_args"),
    (ACCUMULATE, "max(total, limit) - 1", "max(total, total) - 1", "name"),
    (ACCUMULATE, "max(total, limit) - 1", "max(items, limit) - 1", "unlike_name"),
    (ACCUMULATE, "break", "pass", "delete"),  # a body's only statement leaves `pass`
    (WALK, "for x in seq:", "for x in seq[k:]:", "add_slice"),
    (WALK, "for x in seq:", "for x in seq[1:]:", "add_slice"),
    (WALK, "return out[:k]", "return out[:k + 1]", "add_one"),
    (WALK, "return out[:k]", "return out", "drop_slice"),
    (WALK, "helper(x, k)", "helper(k, x)", "swap_args"),
    (WALK, "out.append(helper(x, k))", "out.append(x)", "unwrap_call"),
    (WALK, "return a - b", "return b - a", "swap_operands"),
    (WALK, "return []", "return [[]]", "fill_list"),
    (WALK, "if not seq:", "if seq:", "unary_op"),
    (WALK, "return any(", "return all(", "builtin_dual"),
    (WALK, "    out = []\n", "", "delete"),
]

# The family each kind's prior shrinks towards (docs/models-baseline.md).
FAMILY = {
    "binary_op": "operator", "binary_op_far": "operator", "compare_boundary": "operator",
    "compare_flip": "operator", "boolean_op": "operator", "unary_op": "operator",
    "augassign_op": "operator", "builtin_dual": "operator", "number": "constant",
    "fill_list": "constant", "add_one": "off_by_one", "drop_one": "off_by_one",
    "add_slice": "off_by_one", "drop_slice": "off_by_one", "swap_operands": "swap",
    "swap_args": "swap", "swap_library_args": "swap", "name": "name", "unlike_name": "name",
    "unwrap_call": "unwrap", "delete": "statement", "break_continue": "statement",
}


@pytest.fixture(scope="module")
def quixbugs(data_dir: Path) -> QuixBugs:
    return QuixBugs(data_dir=str(data_dir))


@pytest.fixture(scope="module")
def model(quixbugs: QuixBugs) -> BaselineModel:
    return create_baseline("", dataset=quixbugs)


def buggy_prompt(data_dir: Path, problem: str) -> str:
    """The prompt Coral shows the model, built from the buggy program alone."""
    buggy = (data_dir / "quixbugs" / "python_programs" / f"{problem}.py").read_text()
    return make_prompt(problem, buggy)


def variant_made_by(source: str, old: str, new: str) -> Variant:
    """The variant of `source` that is `source` with `old` replaced by `new` (the same
    program up to layout and the direction of comparisons: those are merged)."""
    assert source.count(old) == 1, old
    wanted = normalized(source.replace(old, new))
    found = [v for v in enumerate_variants(source) if normalized(v.text) == wanted]
    assert len(found) == 1, f"no variant turns {old!r} into {new!r}"
    return found[0]


def hunks(before: str, after: str) -> int:
    matcher = difflib.SequenceMatcher(a=before.splitlines(), b=after.splitlines())
    return sum(tag != "equal" for tag, *_ in matcher.get_opcodes())


def request(prompt: str | Prompt, **params) -> GenerationRequest:
    if isinstance(prompt, str):
        prompt = Prompt(instruction=prompt)
    return GenerationRequest(prompt=prompt, params=SamplingParams(**params))


def pair(task_id: str, buggy: str, fixed: str, instruction: str = "fix it") -> TrainingExample:
    return TrainingExample(task_id, Prompt(instruction=f"{instruction}\n```python\n{buggy}```\n"),
                           answer=fixed, source=buggy, solution=fixed)


# ----- the edits -----

@pytest.mark.parametrize("source, old, new, kind", EXPECTED,
                         ids=[f"{kind}:{new.strip() or 'deleted'}" for *_, new, kind in EXPECTED])
def test_each_kind_of_edit_is_proposed(source: str, old: str, new: str, kind: str) -> None:
    variant = variant_made_by(source, old, new)
    assert kind in {origin.kind for origin in variant.origins}
    assert KINDS[kind] == FAMILY[kind]


@pytest.mark.parametrize("source", [ACCUMULATE, WALK])
def test_every_variant_is_one_compiling_edit_and_differs_from_the_input(source: str) -> None:
    variants = enumerate_variants(source)
    assert len(variants) > 20
    texts = [v.text for v in variants]
    assert len(set(texts)) == len(texts), "variants are deduplicated by text"
    keys = [normalized(t) for t in texts]
    assert keys == [v.canonical for v in variants], "the tree labelling compares"
    assert normalized(source) not in keys, "no variant is the input (up to layout)"
    assert len(set(keys)) == len(keys), "no two variants are the same program"
    for text in texts:
        assert text != source
        compile(text, "<variant>", "exec")
        assert hunks(source, text) == 1, f"more than one place changed:\n{text}"


def test_variants_keep_the_programs_own_text_around_the_edit() -> None:
    source = '# a comment\ndef f(x):\n    # why\n    return x + 1  # trailing\n\n"""doc after"""\n'
    texts = [v.text for v in enumerate_variants(source)]
    assert source.replace("x + 1", "x - 1") in texts
    assert all(t.startswith("# a comment\n") and t.endswith('"""doc after"""\n') for t in texts)


def test_enumeration_is_deterministic() -> None:
    first = [(v.text, v.origins) for v in enumerate_variants(ACCUMULATE)]
    assert first == [(v.text, v.origins) for v in enumerate_variants(ACCUMULATE)]


def test_edits_that_cannot_be_fixes_are_not_proposed() -> None:
    texts = [v.text for v in enumerate_variants(WALK)]
    assert not any("seq + 1" in t or "seq - 1" in t for t in texts), "a sequence plus one"
    assert not any("out[1:].append" in t for t in texts), "a mutated, discarded copy"
    ranges = [v.text for v in enumerate_variants(ACCUMULATE)]
    assert not any("range(len(items), " in t for t in ranges)
    assert not any("limit < limit" in t or "total = total" in t for t in ranges)


# ----- the prior -----

class RecordingDataset:
    """A data set that records what the model asks of it, and allows nothing else (but
    what its candidates are: repairs, not test files)."""

    candidate_kind = "program"

    def __init__(self, inner: QuixBugs):
        self.inner = inner
        self.asked: list[tuple[str, ...]] = []

    def training_examples(self, problems=()):
        self.asked.append(tuple(problems))
        examples = self.inner.training_examples(problems)
        self.asked.append(tuple(sorted({e.task_id for e in examples})))
        return examples

    def __getattr__(self, name: str):
        raise AssertionError(f"the baseline used dataset.{name}")


def test_the_prior_is_learned_from_training_examples_only(quixbugs: QuixBugs,
                                                          data_dir: Path) -> None:
    recording = RecordingDataset(quixbugs)
    model = create_baseline("", dataset=recording)
    out = model.generate([request(buggy_prompt(data_dir, "sieve"), seed=3)])
    assert len(out) == 1 and len(out[0]) == 1
    assert recording.asked == [(), tuple(sorted(TRAIN))], "training problems, nothing else"
    assert set(model.prior.problems) == set(TRAIN)
    assert set(model.prior.fixed) <= set(TRAIN) and len(model.prior.fixed) >= 10
    with pytest.raises(UserError, match="contamination"):
        quixbugs.training_examples(["sieve"])


def test_the_prior_counts_which_kinds_fixed_training_bugs() -> None:
    toy = [pair("toy", "def f(a, b):\n    return a - b\n",
                "def f(a, b):\n    '''Sum.'''\n    return a + b\n", f"variant {i}")
           for i in range(4)]
    prior = learn_prior(toy)
    assert prior.problems == ("toy",) and prior.fixed == ("toy",)
    assert {kind: n for kind, n in prior.kinds.fixing.items() if n} == {"binary_op": 1}
    assert prior.kinds.proposed["binary_op"] == 1, "the 4 instruction variants count once"
    unseen = prior.kind_rate("delete")
    assert 0 < unseen < prior.kind_rate("binary_op"), "unseen kinds keep some mass"


class BareExamples:
    """A data set whose training examples carry a prompt and an answer, no program pair."""

    def training_examples(self, problems=()):
        return [TrainingExample("a", Prompt(instruction="fix it"), answer="def f(): pass\n")]


def test_examples_without_a_program_pair_teach_nothing() -> None:
    bare = BareExamples().training_examples()
    prior = learn_prior(bare + [pair("b", "def g(x):\n    return -x\n",
                                     "def g(x):\n    return x\n")])
    assert prior.problems == ("b",)
    with pytest.raises(UserError, match="no training examples with a source and a solution"):
        create_baseline("", dataset=BareExamples()).prior


def test_leave_one_out_scores_held_out_training_problems() -> None:
    """Both toy bugs are fixed by a near operator swap: the less the prior is shrunk
    towards the overall rate, the more a held-out problem's fix is favoured."""
    toy = [pair("a", "def f(a, b):\n    return a - b\n", "def f(a, b):\n    return a + b\n"),
           pair("b", "def g(x, y):\n    return x // y\n", "def g(x, y):\n    return x % y\n")]
    problems = label_problems(toy)
    assert [p.problem for p in problems] == ["a", "b"]
    assert [sorted(p.fixes) for p in problems] == [["def f(a, b):\n    return a + b\n"],
                                                   ["def g(x, y):\n    return x % y\n"]]
    sharp, smooth = held_out_hits(problems, 10.0), held_out_hits(problems, SHRINK)
    assert 0 < smooth < sharp <= 2
    assert best_shrink(problems, (10.0, SHRINK)) == 10.0
    assert best_shrink(problems, (SHRINK, 10.0)) == 10.0


def test_the_baseline_never_reads_the_tests_or_reference_of_its_problem(
        data_dir: Path, tmp_path: Path) -> None:
    source = data_dir / "quixbugs"
    copy = tmp_path / "quixbugs"
    for folder in FOLDERS:
        shutil.copytree(source / folder, copy / folder)
    for problem in TEST:
        for path in (copy / "correct_python_programs" / f"{problem}.py",
                     copy / "json_testcases" / f"{problem}.json",
                     copy / "python_testcases" / f"test_{problem}.py"):
            path.unlink(missing_ok=True)
    model = create_baseline("", dataset=QuixBugs(data_dir=str(tmp_path)))
    for problem in TEST:
        samples = model.generate([request(buggy_prompt(tmp_path, problem), n=3, seed=1)])[0]
        assert len(samples) == 3 and all(s.text.endswith(CLOSING_FENCE) for s in samples)


# ----- sampling -----

def test_same_seed_same_text_and_different_seeds_differ(model: BaselineModel,
                                                        data_dir: Path) -> None:
    prompt = buggy_prompt(data_dir, "next_permutation")
    first = [model.generate([request(prompt, seed=s)])[0][0].text for s in range(12)]
    again = [model.generate([request(prompt, seed=s)])[0][0].text for s in range(12)]
    assert first == again
    assert len(set(first)) > 3


def test_n_samples_come_back_with_per_sample_seeds(model: BaselineModel, data_dir: Path) -> None:
    prompt = buggy_prompt(data_dir, "lcs_length")
    many = model.generate([request(prompt, n=6, seed=11), request(prompt, seed=11)])
    assert [len(m) for m in many] == [6, 1]
    assert many[0][0].text == many[1][0].text, "sample 0 of 6 is the one sample of n = 1"
    assert len({g.text for g in many[0]}) > 1
    # Sample i draws once from random.Random(s), where s is the first 63 bits of
    # sha256("sample" US "11" US "i"), and takes the ranked variant at that point of the CDF.
    distribution = sampling_distribution(model.ranked(program_in(Prompt(prompt))),
                                         SamplingParams(seed=11))
    for index, generation in enumerate(many[0]):
        digest = hashlib.sha256(f"sample\x1f11\x1f{index}".encode()).digest()
        point = random.Random(int.from_bytes(digest[:8], "big") & (2**63 - 1)).random()
        edges = itertools.accumulate(p for _, p in distribution)
        chosen = next((c for (c, _), edge in zip(distribution, edges) if point < edge),
                      distribution[-1][0])
        assert generation.text == chosen.text.rstrip("\n") + CLOSING_FENCE, index
    for generation in many[0]:
        assert generation.finish_reason == "stop" and generation.seconds >= 0
        assert generation.prompt_tokens is None and generation.completion_tokens is None


def test_temperature_zero_gives_the_top_ranked_variant(model: BaselineModel,
                                                       data_dir: Path) -> None:
    prompt = buggy_prompt(data_dir, "to_base")
    top = model.ranked(program_in(Prompt(prompt)))[0].text
    samples = model.generate([request(prompt, temperature=0.0, n=4, seed=5)])[0]
    assert {s.text for s in samples} == {top.rstrip("\n") + CLOSING_FENCE}


def test_top_k_one_is_greedy_and_stop_sequences_are_honoured(model: BaselineModel,
                                                             data_dir: Path) -> None:
    prompt = buggy_prompt(data_dir, "sieve")
    top = model.ranked(program_in(Prompt(prompt)))[0].text
    greedy = model.generate([request(prompt, top_k=1, n=3, seed=2, stop=("```",))])[0]
    assert {g.text for g in greedy} == {top.rstrip("\n") + "\n"}


def test_the_text_continues_the_prompts_open_fence(model: BaselineModel, quixbugs: QuixBugs,
                                                   data_dir: Path) -> None:
    task = quixbugs.tasks("test", ["wrap"])[0]
    text = model.generate([request(task.prompt, seed=0)])[0][0].text
    code = quixbugs.extract_code(task, text)
    assert text == code + CLOSING_FENCE
    assert code != task.source.strip("\n") and "def wrap(" in code


def test_user_errors(quixbugs: QuixBugs, model: BaselineModel) -> None:
    with pytest.raises(UserError, match="no ```python code block"):
        model.generate([request("Fix the bug, please.\n```python\n")])
    with pytest.raises(UserError, match="cannot fill in the middle"):
        model.generate([request(Prompt(prefix="def f(x):\n", suffix="\n"))])
    with pytest.raises(UserError, match="training examples"):
        create_baseline("", dataset=None)
    with pytest.raises(UserError, match="training examples"):
        create_baseline("", dataset=object())
    with pytest.raises(UserError, match="takes no target"):
        create_baseline("gpt", dataset=quixbugs)
    prompt = Prompt("Buggy Code:\n```python\ndef f(x):\n    return x + 1\n```\n")
    assert BaselineModel.supports_adapters is False
    with pytest.raises(UserError, match="adapters"):
        model.generate([GenerationRequest(prompt, SamplingParams(), adapter="/tmp/a")])


def test_the_program_is_found_in_an_instruction_or_a_chat(data_dir: Path,
                                                          model: BaselineModel) -> None:
    text = buggy_prompt(data_dir, "sieve")
    buggy = (data_dir / "quixbugs" / "python_programs" / "sieve.py").read_text().strip("\n")
    chat = Prompt(messages=(Message("system", "Reply with code.\n```python\nx = 1\n```\n"),
                            Message("user", text), Message("assistant", "Sure.")))
    assert program_in(Prompt(text)) == program_in(chat) == buggy
    by_chat = model.generate([request(chat, n=3, seed=8)])[0]
    assert [g.text for g in by_chat] == [g.text for g in model.generate(
        [request(text, n=3, seed=8)])[0]]


def test_it_is_registered_as_the_baseline_model() -> None:
    from coral_core import plugins

    entry = plugins.registry().get("models", "baseline")
    assert entry.factory.resolve() is create_baseline  # registered as a Lazy
    assert entry.plugin == "coral_plugins.models.baseline"


# ----- the score -----

def test_it_fixes_at_least_three_of_the_eight_test_problems(model: BaselineModel,
                                                            quixbugs: QuixBugs) -> None:
    """n = 50 samples per problem at the default temperature, seed 0, run in the sandbox.

    To stay fast, each distinct program runs once (the most sampled first), a problem
    stops once one of its programs passes every test, and everything stops at 3 fixed
    problems (docs/models-baseline.md has the full measurement).
    """
    tasks = quixbugs.tasks("test")
    outputs = model.generate([request(task.prompt, n=50, seed=0) for task in tasks])
    policy = SandboxPolicy(timeout=1.0)
    fixed: list[str] = []
    enough = threading.Event()

    def repair(sandbox: Sandbox, task, samples) -> None:
        codes = Counter(quixbugs.extract_code(task, s.text) for s in samples)
        for code, _ in codes.most_common():
            if enough.is_set():
                return
            result = sandbox.run(Job.build(task.execution, code, policy))
            outcomes = [judge_case(c, s) for c, s in zip(task.execution.cases, result.steps)]
            if len(outcomes) == len(task.execution.cases) and all(
                    o.status == "pass" for o in outcomes):
                fixed.append(task.id)
                if len(fixed) >= 3:
                    enough.set()
                return

    with Sandbox(policy) as sandbox, ThreadPoolExecutor(2) as pool:
        for future in [pool.submit(repair, sandbox, t, o) for t, o in zip(tasks, outputs)]:
            future.result()
    assert len(fixed) >= 3, fixed


def test_a_fixed_program_is_one_edit_away(model: BaselineModel, data_dir: Path) -> None:
    """The prompt's program is parsed, not re-typed: every sample is the program with
    one change, checked at the syntax-tree level."""
    prompt = buggy_prompt(data_dir, "kheapsort")
    program = program_in(Prompt(prompt))
    original = ast.dump(ast.parse(program))
    for sample in model.generate([request(prompt, n=20, seed=4)])[0]:
        code = sample.text[:-len(CLOSING_FENCE)]
        assert ast.dump(ast.parse(code)) != original
        assert hunks(program, code) == 1


def test_family_weights_scale_the_prior_of_each_edit_family(quixbugs: QuixBugs,
                                                            model: BaselineModel) -> None:
    """`[model.options] family_weights` (the evolution strategy's genes for this model):
    the same factor everywhere changes no order; a family weighted up leads the ranking;
    a family weighted 0 sinks below every other edit."""
    from coral_plugins.models.baseline.edits import FAMILIES
    from coral_plugins.models.baseline.sampling import rank

    program = quixbugs.task("kheapsort").prompt
    source = program_in(program)
    variants = enumerate_variants(source)
    families = {v.text: {KINDS[o.kind] for o in v.origins} for v in variants}
    plain = rank(variants, model.prior)
    doubled = rank(variants, model.prior, {family: 2.0 for family in FAMILIES})
    assert [r.text for r in doubled] == [r.text for r in plain]
    assert all(abs(d.weight - 2 * p.weight) < 1e-12 for d, p in zip(doubled, plain))
    last = families[plain[-1].text] - families[plain[0].text]
    assert last, "the best and the worst variant come from the same families"
    boosted_family = sorted(last)[0]
    boosted = rank(variants, model.prior, {boosted_family: 1e6})
    assert boosted_family in families[boosted[0].text]
    top_family = sorted(families[plain[0].text])[0]
    sunk = rank(variants, model.prior, {top_family: 0.0})
    only = [i for i, r in enumerate(sunk) if families[r.text] == {top_family}]
    rest = [i for i, r in enumerate(sunk) if families[r.text] != {top_family}]
    assert only and rest and min(only) > max(rest)  # the zeroed family's edits come last
    built = create_baseline("", dataset=quixbugs, family_weights={boosted_family: 1e6})
    assert built.ranked(source)[0].text == boosted[0].text


@pytest.mark.parametrize("weights, words", [
    ({"operatr": 2.0}, "unknown edit family 'operatr' (did you mean 'operator'?)"),
    ({"operator": -1}, "family_weights.operator must be a finite number >= 0"),
    ([1, 2], "family_weights must be a table of edit family = factor"),
])
def test_bad_family_weights_are_one_clear_error(quixbugs: QuixBugs, weights, words) -> None:
    with pytest.raises(UserError) as caught:
        create_baseline("", dataset=quixbugs, family_weights=weights)
    assert words in str(caught.value)
