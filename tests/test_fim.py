"""FIM: metrics against hand-computed values, templates, data shapes, the builder,
extraction, hf rendering with tiny tokenizers, and the `fim` preset end to end."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conftest import coral_env, run_coral
from coral_core.errors import UserError
from coral_plugins.datasets.fim import FimDataset, PRESET, read_tasks
from coral_plugins.datasets.fim import build as builder
from coral_core.fim.canary import CANARIES, run_self_test
from coral_plugins.datasets.fim.extract import (
    EXTRACTORS, extractor_for, infill_java, infill_python, infill_statement)
from coral_core.fim.templates import FAMILIES, parse_any, template_for
from coral_core.fim import metrics
from coral_plugins.evaluators.fim import FimEvaluator

# ----- metrics: independent expected values -----


def test_edit_similarity_matches_hand_computed_levenshtein():
    # kitten -> sitting: 3 edits, longer length 7
    assert metrics.edit_similarity("kitten", "sitting") == pytest.approx(1 - 3 / 7)
    assert metrics.edit_similarity("  abc \n", "abc") == 1.0  # stripped
    assert metrics.edit_similarity("", "") == 1.0
    assert metrics.edit_similarity("", "abcd") == 0.0
    assert metrics.edit_similarity("flaw", "lawn") == pytest.approx(1 - 2 / 4)


def test_fuzz_es_is_indel_ratio_and_cceval_rounds_it():
    # InDel distance abc/abd = 2, total length 6: 1 - 2/6
    assert metrics.edit_similarity_fuzz("abc", "abd") == pytest.approx(4 / 6)
    assert metrics.edit_similarity_fuzz("abc", "abd", rounded=True) == 0.67
    # fuzz ES is never below the seed's ES on these
    assert metrics.edit_similarity_fuzz("kitten", "sitting") > metrics.edit_similarity(
        "kitten", "sitting")


def test_exact_match_normalises_whitespace_and_combined_equals_em():
    assert metrics.exact_match("x =  f(a)\n", " x = f(a)")
    assert metrics.exact_match("if a:\n\n    b\t+ 1\r\n", "if a:\n  b + 1")
    assert not metrics.exact_match("x=f(a)", "x = f(a)")
    # found by a red-team pass: a line break or a non-breaking space is not a space
    assert not metrics.exact_match("return\n    x * 2", "return x * 2")
    assert not metrics.exact_match("return\xa0x\xa0+\xa01", "return x + 1")
    for p, g in [("a + b", "a  +  b"), ("a + b", "a + c"), ("", ""), ("foo", "fo")]:
        row = metrics.score(p, g)
        assert row["em_es"] == row["em"]  # seed 003's "pass@1" is EM


def test_identifier_em_and_f1():
    em, f1 = metrics.identifier_match("return self.x + y", "return self.x + z")
    # identifiers [self, x, y] vs [self, x, z]: common 2, P = R = 2/3
    assert em == 0.0 and f1 == pytest.approx(2 / 3)
    assert metrics.identifier_match("if a: pass", "if a:  pass") == (1.0, 1.0)
    assert metrics.identifiers("int n = count; // note", "java") == ["n", "count"]
    assert metrics.identifiers("x = 'name' # comment") == ["x"]


def test_balanced_score_is_the_seed_formula_over_means():
    rows = [metrics.score("a = 1", "a = 1"), metrics.score("b = 2", "a = 1")]
    overall = metrics.overall(rows)
    es = (1.0 + metrics.edit_similarity("b = 2", "a = 1")) / 2
    expected = (es / 0.7 + 0.5 / 0.25 + 0.5 / 0.55) / 3
    assert overall["balanced_seed_scale"] == pytest.approx(expected)
    assert overall["balanced"] == pytest.approx(expected / metrics.BALANCED_MAX)
    assert "balanced_score" not in overall, "one name, one meaning"
    # the per-task objective is normalised: mean x maximum = the seed's score
    mean_balanced = sum(r["balanced"] for r in rows) / 2
    assert mean_balanced * metrics.BALANCED_MAX == pytest.approx(expected)
    assert metrics.BALANCED_MAX == pytest.approx((1 / 0.7 + 4 + 1 / 0.55) / 3)


def test_cceval_mode_reproduces_its_comment_removal_defect():
    # CrossCodeEval strips `//...` in every language: an integer division loses its divisor
    assert metrics.cceval_exact_match("mid = (lo + hi) // 2", "mid = (lo + hi) // 3")
    assert not metrics.exact_match("mid = (lo + hi) // 2", "mid = (lo + hi) // 3")
    assert metrics.score("mid = (lo + hi) // 2", "mid = (lo + hi) // 3", mode="cceval")["em"] == 1
    with pytest.raises(UserError):
        FimEvaluator(mode="bogus")


# ----- templates -----

@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_family_renders_and_parses_back(family):
    template = FAMILIES[family]
    text = template.render("def f(x):\n    return {", "}\n")
    assert template.parse(text) == ("def f(x):\n    return {", "}\n")
    for sentinel in template.sentinels:
        assert sentinel in text


def test_known_formats():
    assert FAMILIES["codellama"].render("P", "S") == "<PRE> P <SUF>S <MID>"
    assert FAMILIES["codestral"].render("P", "S") == "[SUFFIX]S[PREFIX]P"
    assert FAMILIES["deepseek"].render("P", "S") == "<｜fim▁begin｜>P<｜fim▁hole｜>S<｜fim▁end｜>"
    custom = template_for("<A>{prefix}<B>{suffix}<C>")
    assert custom.render("p", "s") == "<A>p<B>s<C>" and custom.sentinels == ("<A>", "<B>", "<C>")
    with pytest.raises(UserError, match="did you mean 'qwen'"):
        template_for("qwenn")
    assert template_for("<S>{suffix}<P>{prefix}").sentinels == ("<S>", "<P>")  # SPM
    # a red-team pass: formats that mark no gap ran without a word
    for fmt, words in (("{prefix}{suffix}", "marks no gap"), ("<A>{prefix}<B>{suffix}", "no gap"),
                       ("<S>{suffix}{prefix}", "no gap"), ("{suffix}{prefix}<M>{prefix}", "once")):
        with pytest.raises(UserError, match=words):
            template_for(fmt)


def test_a_qwen_prompt_is_retemplated_for_deepseek():
    family, prefix, suffix = parse_any("<|fim_prefix|>a = <|fim_suffix|>\nprint(a)<|fim_middle|>")
    assert (family, prefix, suffix) == ("qwen", "a = ", "\nprint(a)")
    assert FAMILIES["deepseek"].render(prefix, suffix) == \
        "<｜fim▁begin｜>a = <｜fim▁hole｜>\nprint(a)<｜fim▁end｜>"


# ----- data -----

def _write(path: Path, rows: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def test_three_shapes_ids_and_crossfile(tmp_path):
    path = _write(tmp_path / "tasks_java.jsonl", [
        {"prompt": "<fim_prefix>int a = <fim_suffix>;<fim_middle>", "groundtruth": "1"},
        {"task_id": "b", "prefix": "x = ", "suffix": "\n", "groundtruth": "2"},
        {"prompt": "left ", "right_context": " right", "groundtruth": "3",
         "metadata": {"task_id": "repo/3"}, "crossfile_context": {"text": "// other\n"}},
    ])
    rows = read_tasks(path, None, crossfile=True)
    assert [r["task_id"] for r in rows] == ["1", "b", "repo/3"]
    assert rows[0]["prefix"] == "int a = " and rows[0]["suffix"] == ";"
    assert rows[2]["prefix"] == "// other\nleft "
    assert rows[0]["language"] == "java"  # guessed from the file name
    assert read_tasks(path, None, crossfile=False)[2]["prefix"] == "left "
    tasks = FimDataset(path=str(path)).tasks("test")
    assert tasks[1].prompt.prefix == "x = " and tasks[1].reference == "2"
    assert tasks[1].success.objective == "em" and tasks[1].candidate_kind == "completion"
    assert "\n\npublic " in tasks[1].stop


@pytest.mark.parametrize("line, message", [
    ("{not json", "malformed JSON"),
    ('{"groundtruth": "x"}', "not a FIM task"),
    ('{"prompt": "plain text", "groundtruth": "x"}', "no known FIM format"),
    ('[1, 2]', "not a FIM task"),
    ('{"prefix": "a", "suffix": "b", "groundtruth": "c", "metadata": "x"}',
     "'metadata' must be an object, not str"),
    ('{"prefix": "a", "suffix": "b", "groundtruth": "c", "task_id": ""}',
     "not an empty string"),
    ('{"prompt": "a", "right_context": "b", "groundtruth": "c", "metadata": {"task_id": ["a"]}}',
     "a task id must be a non-empty string or an integer, not a list"),
    ('{"prompt": "a", "right_context": "b", "groundtruth": "c", "crossfile_context": '
     '{"text": 5}}', "crossfile = true reads 'crossfile_context'"),
])
def test_a_bad_line_is_one_clear_error(tmp_path, line, message):
    path = _write(tmp_path / "t.jsonl", [{"prefix": "a", "suffix": "b", "groundtruth": "c"}, line])
    with pytest.raises(UserError, match=rf"t.jsonl:2: .*{message}"):
        read_tasks(path, None, True)


# ----- builder -----

@pytest.fixture
def source_tree(tmp_path):
    root = tmp_path / "src"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "a.py").write_text(
        "import os\n\n\ndef area(w, h):\n    # width times height\n    total = w * h\n"
        "    if total < 0:\n        raise ValueError(total)\n    return total\n\n\n"
        "def name(p):\n    base = os.path.basename(p)\n    stem, _ = os.path.splitext(base)\n"
        "    return stem.upper()\n")
    (root / "b.py").write_text(
        "class Box:\n    def __init__(self, items):\n        self.items = list(items)\n"
        "        self.size = len(self.items)\n\n    def first(self):\n"
        "        return self.items[0] if self.items else None\n")
    return root


@pytest.mark.parametrize("kind", builder.KINDS)
def test_builder_is_deterministic_and_middles_are_real_code(source_tree, kind):
    one = builder.build_tasks(source_tree, kind, n=6, seed=3)
    assert one == builder.build_tasks(source_tree, kind, n=6, seed=3)
    assert one
    for task in one:
        original = (source_tree / task["metadata"]["file"]).read_text()
        assert task["prefix"] + task["groundtruth"] + task["suffix"] in original + "\n"
        assert task["groundtruth"].strip()
        assert not task["groundtruth"].strip().startswith("#")
        if kind == "multiline":
            assert 2 <= task["groundtruth"].count("\n") + 1 <= 8


@pytest.mark.parametrize("kind", builder.KINDS)
def test_lines_are_counted_as_python_counts_them(tmp_path, kind):
    """Form feeds, U+2028 and U+0085 in a file, and a file of CR-only line ends: a red-team
    pass saw str.splitlines put middles off the sites ast chose (a line's middle taken from
    another function), cut ground truths short at U+2028 and add a newline to the text."""
    for j in range(4):
        body = "".join(f'\x0c\ndef f{i}(a, b):\n    x = "a\u2028b" + "\x85" * {i}\n'
                       f"    y = a * {i} + b\n    if y > {i}:\n        y -= 1\n"
                       f"    return x, y\n\n" for i in range(4))
        (tmp_path / f"m{j}.py").write_text(body, encoding="utf-8", newline="")
    (tmp_path / "cr.py").write_text("def g(a):\r    b = a + 1\r    c = b * 2\r    return c\r",
                                    encoding="utf-8", newline="")
    tasks = builder.build_tasks(tmp_path, kind, n=12, seed=1)
    assert tasks
    for task in tasks:
        path = tmp_path / task["metadata"]["file"]
        text = path.read_bytes().decode("utf-8")
        assert task["prefix"] + task["groundtruth"] + task["suffix"] == text
        if kind != "span":  # a span may start on a later line of its site
            first = builder.code_lines(text)[task["metadata"]["line"] - 1]
            assert builder.code_lines(task["groundtruth"])[0].strip() in first
    bom = tmp_path / "bom"  # Python reads past a BOM (a red-team pass: 0 tasks, exit 0)
    bom.mkdir()
    (bom / "b.py").write_bytes(b"\xef\xbb\xbfdef h(a):\n    b = a + 1\n    c = b * 2\n"
                               b"    d = c - 3\n    return d\n")
    made = builder.build_tasks(bom, kind, n=2, seed=0)
    assert made and all(t["prefix"].startswith("\ufeff") for t in made)


JAVA = """package a;

/* a { comment */
public class Box {
  private int size = 0; // {
  public int add(int x) {
    String s = "{ not a brace";
    char c = '{';
    if (x > 0) {
      size += x;
    }
    return size;
  }

  @Override
  public String toString() {
    return "Box(" + size + ")";
  }
}
"""


@pytest.mark.parametrize("kind", builder.KINDS)
def test_java_middles_are_inside_method_bodies(tmp_path, kind):
    """Brace depth, not indentation (this file indents by 2), finds method bodies; braces
    in comments, strings and char literals do not count."""
    (tmp_path / "Box.java").write_text(JAVA)
    tasks = builder.build_tasks(tmp_path, kind, n=20, seed=0, language="java")
    assert tasks and all(t["language"] == "java" for t in tasks)
    body_lines = set(range(7, 13)) | {17}
    for task in tasks:
        assert task["prefix"] + task["groundtruth"] + task["suffix"] in JAVA + "\n"
        first = task["prefix"].count("\n") + 1
        last = first + task["groundtruth"].rstrip("\n").count("\n")
        assert set(range(first, last + 1)) <= body_lines, task["groundtruth"]


def test_fim_build_command(source_tree, tmp_path):
    out = tmp_path / "tasks.jsonl"
    result = run_coral("fim", "build", str(source_tree), "--out", str(out), "--kind", "line",
                       "--n", "3", env=coral_env())
    assert result.returncode == 0, result.stderr
    assert len(read_tasks(out, None, False)) == 3
    bad = run_coral("fim", "build", str(tmp_path / "nope"), "--out", str(out), env=coral_env())
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "not a directory" in bad.stderr


# ----- extraction -----

def test_python_extraction_stops_at_the_line_end_and_the_suffix_echo():
    # an inline middle: the suffix continues the line
    assert infill_python("len(x))\nprint(1)", "y = max(", ")\n") == "len(x))"
    # ... and where it opens a bracket, at the first line end where the brackets balance
    # (a red-team pass found every later line kept)
    assert infill_python("f(a,\n      b)\nprint(1)\nprint(2)", "y = g(", ")\n") == (
        "f(a,\n      b)")
    reply = "    a = 1\n    b = 2\nreturn a\n"
    assert infill_python(reply, "def f():\n", "\n    return a\n") == "    a = 1\n    b = 2"
    assert infill_python("total = w * h\n\n\ndef other():", "    ", "\n") == "total = w * h"


def test_java_and_statement_extraction():
    assert infill_java("count + 1;\n    other();", "int n = ", ";\n") == "count + 1;"
    assert infill_statement("foo(a,\n  b)\nbar()", "", "") == "foo(a,\n  b)"
    assert infill_statement("x++; y++;", "", "", "java") == "x++;"


# ----- the preset, end to end with the reference model -----

def test_fim_preset_runs_the_grid_and_reference_is_perfect(source_tree, tmp_path):
    assert PRESET["search"]["rank_by"] == "balanced"
    tasks = tmp_path / "t.jsonl"
    builder.write_jsonl(builder.build_tasks(source_tree, "line", n=5, seed=0), tasks)
    config = tmp_path / "fim.toml"
    config.write_text(f'[dataset.options]\npath = "{tasks}"\n[search.space]\n'
                      '"model.temperature" = [0.1, 0.2]\n"model.max_new_tokens" = [16, 32]\n')
    result = run_coral("run", "--plugin", "fim", "--config", str(config), "--out",
                       str(tmp_path / "run"), "--json", "--model", "reference",
                       env=coral_env(CORAL_CACHE_DIR=str(tmp_path / "cache")))
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert len(summary["trials"]) == 4
    assert summary["best"]["rank_by"] == "balanced"
    assert all(value == 1.0 for value in summary["objectives"].values())
    assert summary["pass_at_k"]["1"] == 1.0
    # every trial is perfect on every task: no runner-up to beat, all tie with the best
    assert summary["best"]["runner_up"] == {"trial": None, "ties": [1, 2, 3]}
    assert summary["heatmap"] == "heatmap.png"
    assert (tmp_path / "run" / "heatmap.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_evolution_search_runs_on_fim_with_the_baseline(source_tree, tmp_path):
    """The baseline's genes depend on the data set: its edit-family weights weigh repairs,
    and its infiller refuses them, so on fim the search varies sampling knobs only (a
    red-team's evolution run failed at trial 0, after its run directory was made)."""
    tasks = tmp_path / "t.jsonl"
    builder.write_jsonl(builder.build_tasks(source_tree, "line", n=4, seed=0), tasks)
    config = tmp_path / "evolution.toml"
    config.write_text(f'[dataset.options]\npath = "{tasks}"\n[search]\nstrategy = "evolution"\n'
                      "[search.options]\npopulation = 2\ngenerations = 1\n")
    env = coral_env(CORAL_CACHE_DIR=str(tmp_path / "cache"))
    bad = tmp_path / "bad.toml"
    bad.write_text(config.read_text() + "schedule = \"cubic\"\n")
    refused = run_coral("run", "--plugin", "fim", "--config", str(bad), "--out",
                        str(tmp_path / "refused"), env=env)
    # one line: the note that the preset's grid is replaced waits for a run that starts
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1, \
        refused.stderr
    assert "bad.toml (line 8): [search.options] schedule" in refused.stderr
    result = run_coral("run", "--plugin", "fim", "--config", str(config), "--samples", "1",
                       "--out", str(tmp_path / "run"), "--json", env=env)
    assert result.returncode == 0, result.stderr
    assert "the preset's search space is replaced" in result.stderr
    trials = json.loads(result.stdout)["trials"]
    assert len(trials) == 2
    assert all(trial["status"] == "finished" for trial in trials)
    keys = {key for trial in trials for key in trial["overrides"]}
    assert keys and all(key.startswith("model.top") or key == "model.temperature"
                        for key in keys), keys


# ----- the weight-free baseline infiller -----

def test_baseline_infill_candidates_come_from_the_visible_context():
    from coral_plugins.models.baseline.infill import candidates
    prefix = "colors = {'red': 1}\nprint(colors['red'])\nprint(colo"
    assert candidates(prefix, "\n")[0].text == "rs['red'])"
    # the part the suffix already holds is cut
    assert candidates("x = f(alpha)\ny = f(al", ")\n")[0].text == "pha"
    # the longest matching context wins over a shorter, more frequent one
    prefix = "a.run(1)\na.run(1)\nb.stop(fast=True)\nb.stop(fa"
    assert candidates(prefix, "\n")[0].text == "st=True)"
    # nothing to copy: close what the line opened
    assert [c.text for c in candidates("z = max(abs(", "\n")] == ["))"]
    # an untrusted prompt of a megabyte on one line: few candidates, each capped
    huge = candidates("a" * 1_000_000, "b" * 300_000)
    assert 1 <= len(huge) <= 64 and all(len(c.text) <= 256 for c in huge)


def test_hostile_literals_and_comments_end_where_their_line_or_text_ends():
    """An unclosed string ends at its line, an unclosed block comment or triple-quoted
    string at the end of the text (each once: no rescan from every later quote)."""
    assert metrics.identifiers('"' + '\\"' * 20000 + "\nafter") == ["after"]
    assert metrics.identifiers("'" + "\\'" * 20000) == []
    assert metrics.identifiers("x /* a " * 20000, "java") == ["x"]
    assert metrics.identifiers('y = """never closed\nz') == ["y"]
    reply = '"' + '\\"' * 20000
    assert infill_python(reply, "y = ", "\n") == reply


def test_baseline_infills_reproducibly_and_never_sees_the_ground_truth(source_tree, tmp_path):
    from coral_core.types import GenerationRequest, Prompt, SamplingParams
    from coral_plugins.models.baseline.model import create_baseline
    model = create_baseline(dataset=FimDataset(path=str(tmp_path / "unused.jsonl")))
    prompt = Prompt(prefix="v = 1\nw = 2\nv = 3\nw = 4\nu = ", suffix="\n")
    request = GenerationRequest(prompt, SamplingParams(temperature=1.0, n=6, seed=5))
    first = [g.text for g in model.generate([request])[0]]
    assert first == [g.text for g in model.generate([request])[0]]
    assert set(first) <= {"1", "2", "3", "4"} and len(set(first)) > 1
    with pytest.raises(UserError, match="takes no options"):
        create_baseline(dataset=FimDataset(), family_weights={"operator": 1.0})
    tasks = tmp_path / "t.jsonl"
    builder.write_jsonl(builder.build_tasks(source_tree, "line", n=6, seed=1), tasks)
    config = tmp_path / "fim.toml"
    config.write_text(f'[dataset.options]\npath = "{tasks}"\n[search.space]\n'
                      '"model.temperature" = [0.0, 1.0]\n')
    runs = []
    for name in ("one", "two"):
        result = run_coral("run", "--plugin", "fim", "--config", str(config), "--out",
                           str(tmp_path / name), "--json", "--model", "baseline",
                           env=coral_env())
        assert result.returncode == 0, result.stderr
        runs.append(json.loads(result.stdout))
    assert runs[0]["trials"] == runs[1]["trials"]
    assert 0.0 < runs[0]["objectives"]["es"] < 1.0


def test_vectorised_scoring_equals_scoring_one_by_one():
    predictions = ["x + 1", "", "  ", "foo(a,  b)", "return None  # done", "a // 2",
                   "s = 'it''s'", "y", "ünïcode()", "(lo + hi) // 2"]
    truths = ["x + 1", "", "x", "foo(a, b)", "return None", "a // 3", "s = 'its'", "",
              "unicode()", "(lo + hi) // 2"]
    for mode in ("coral", "cceval"):
        rows = metrics.score_many(predictions, truths, mode=mode)["tasks"]
        assert rows == [metrics.score(p, g, "python", mode)
                        for p, g in zip(predictions, truths)]
    assert metrics.score_many([], [])["overall"]["tasks"] == 0


# ----- hf rendering with tiny tokenizers carrying each family's tokens -----

def _tokenizer(tmp_path, sentinels):
    tokenizers = pytest.importorskip("tokenizers")
    from transformers import PreTrainedTokenizerFast
    tok = tokenizers.Tokenizer(tokenizers.models.BPE())
    tok.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = tokenizers.decoders.ByteLevel()
    trainer = tokenizers.trainers.BpeTrainer(
        vocab_size=300, special_tokens=["<|endoftext|>"], show_progress=False,
        initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(["def f(x):\n    return x + 1\n"] * 10, trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>")
    if sentinels:
        fast.add_special_tokens({"additional_special_tokens": list(sentinels)})
    return fast


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_hf_detects_family_and_renders(tmp_path, family):
    from coral_plugins.models.hf.prompts import render_prompt, resolve_fim
    from coral_core.types import Prompt
    template = FAMILIES[family]
    tok = _tokenizer(tmp_path, template.sentinels + template.stops[:1])
    fim, stop_ids = resolve_fim(tok, None)
    assert fim.name == family
    text, _ = render_prompt(tok, Prompt(prefix="a = ", suffix="\n"), False, "hf:t", fim)
    assert text == template.render("a = ", "\n")
    for sentinel in template.sentinels:
        assert len(tok(sentinel, add_special_tokens=False)["input_ids"]) == 1


def test_hf_refuses_sentinels_that_are_not_special_tokens(tmp_path):
    from coral_plugins.models.hf.prompts import check_supported, resolve_fim
    from coral_core.types import Prompt
    tok = _tokenizer(tmp_path, ())
    assert resolve_fim(tok, None) == (None, set())
    with pytest.raises(UserError, match="has no FIM template"):
        check_supported(Prompt(prefix="a", suffix="b"), "hf:t", None)
    with pytest.raises(UserError, match=re.escape("'<|fim_prefix|>' as one special token")):
        resolve_fim(tok, "qwen", "hf:t")


def test_hf_tiny_model_completes_infill_prompts(tmp_path, caplog):
    pytest.importorskip("torch")
    from tiny_model import build_tiny_fim_model
    from transformers import AutoTokenizer

    from coral_core.types import GenerationRequest, Prompt, SamplingParams
    from coral_plugins.models.hf.model import HFModel
    directory = build_tiny_fim_model(tmp_path / "tiny", FAMILIES["qwen"].sentinels)
    tok = AutoTokenizer.from_pretrained(directory)
    hf = HFModel(str(directory), device="cpu")
    assert hf.fim.name == "qwen"
    request = GenerationRequest(Prompt(prefix="def f(x):\n    return ", suffix="\n"),
                                SamplingParams(temperature=0.0, max_new_tokens=8, n=2))
    with caplog.at_level("WARNING"):
        [generations] = hf.generate([request])
    assert len(generations) == 2 and all(isinstance(g.text, str) for g in generations)
    ids = hf._encode(request.prompt)
    assert ids[0] == tok.convert_tokens_to_ids("<|fim_prefix|>")
    # The canaries ran once, before the first infilling request: random weights miss them.
    assert hf.fim_self_test is not None and not hf.fim_self_test.ok
    assert len(hf.fim_self_test.failed) == len(CANARIES)
    assert "0/3 canaries infilled" in caplog.text and "set fim_template" in caplog.text
    hf.close()
    strict = HFModel(str(directory), device="cpu", fim_self_test="require")
    for _ in range(2):  # refused again on a later call, without running the canaries again
        with pytest.raises(UserError, match="refused: fim_self_test"):
            strict.generate([request])
    silent = HFModel(str(directory), device="cpu", fim_self_test="off")
    silent.generate([request])
    assert silent.fim_self_test.passed == silent.fim_self_test.failed == ()
    with pytest.raises(UserError, match="fim_self_test"):
        HFModel(str(directory), device="cpu", fim_self_test="sometimes")


def test_canaries_pass_a_model_that_infills_them():
    """The self-test's verdict from replies: a right middle passes with any spacing and
    with the suffix echoed after it; a wrong one does not."""
    from coral_core.types import Generation
    answers = {"counting": "6,7, 8, 9, 10, 11, 12]", "alphabet": "ijklmno",
               "return": "a + b"}

    def infiller(requests):
        found = [next(c.name for c in CANARIES if c.prefix == r.prompt.prefix)
                 for r in requests]
        assert all(r.params.temperature == 0.0 for r in requests)
        return [[Generation(text=answers[name])] for name in found]
    assert run_self_test(infiller, "qwen").ok
    answers["return"] = "a - b"
    result = run_self_test(infiller, "qwen")
    assert result.passed == ("counting", "alphabet") and result.failed == (("return", "a - b"),)


SERVED_TASKS = [
    {"task_id": "inc", "prefix": "def inc(x):\n    return ", "suffix": "\n",
     "groundtruth": "x + 1"},
    {"task_id": "pair", "prefix": "pair = ", "suffix": "\nprint(pair)\n",
     "groundtruth": "(left, right)"},
    {"task_id": "join", "prefix": "import os\n\npath = os.path.", "suffix": "('a', 'b')\n",
     "groundtruth": "join"},
]


def _texts(run_dir: Path) -> dict[str, str]:
    import sqlite3
    with sqlite3.connect(run_dir / "coral.sqlite") as db:
        return dict(db.execute("SELECT task_id, text FROM generations"))


def test_openai_fim_through_transformers_serve_equals_hf(tmp_path):
    """`openai:` infilling against a real server (`transformers serve`, completions mode):
    with fim_template = "qwen" the prompt is rendered client-side, so greedy replies equal
    the same weights run in-process with `hf:`; with the server's `suffix` field, the
    suffix that transformers serve appends to the text is removed with strip_suffix_echo."""
    pytest.importorskip("torch")
    from serve_fixture import serve_model
    from tiny_model import build_tiny_fim_model
    model = build_tiny_fim_model(tmp_path / "tiny", FAMILIES["qwen"].sentinels)
    data = _write(tmp_path / "tasks.jsonl", SERVED_TASKS)
    config = tmp_path / "one.toml"
    config.write_text(f'[dataset.options]\npath = "{data}"\n[search.space]\n'
                      '"model.temperature" = [0.0]\n"model.max_new_tokens" = [12]\n')
    env = coral_env()

    def run(name: str, *args: str) -> dict[str, str]:
        result = run_coral("run", "--plugin", "fim", "--config", str(config), "--json",
                           "--out", str(tmp_path / name), *args, env=env)
        assert result.returncode == 0, result.stderr
        return _texts(tmp_path / name)
    in_process = run("hf", "--model", f"hf:{model}")
    with serve_model(model, tmp_path / "serve.log") as served:
        server = ("--model", f"openai:{served.model}", "--base-url", served.base_url)
        templated = run("templated", *server, "--model-arg", "fim_template=qwen")
        with_suffix = run("suffix", *server, "--model-arg", "strip_suffix_echo=true")
    assert set(in_process) == {t["task_id"] for t in SERVED_TASKS}
    assert templated == in_process and any(in_process.values())
    for task in SERVED_TASKS:
        assert not with_suffix[task["task_id"]].endswith(task["suffix"])


RESCORE_TASKS = [
    {"prefix": "def inc(x):\n    return ", "suffix": "\n", "groundtruth": "x + 1"},
    {"task_id": "pair", "prefix": "pair = ", "suffix": "\n", "groundtruth": "(left, right)"},
    {"task_id": "total", "prefix": "total = ", "suffix": "\nprint(total)\n",
     "groundtruth": "sum(values)"},
]


def _rescore(tmp_path: Path, predictions: list, *extra: str):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(t) + "\n" for t in RESCORE_TASKS))
    path = tmp_path / "pred.jsonl"
    path.write_text("".join((p if isinstance(p, str) else json.dumps(p)) + "\n"
                            for p in predictions))
    return run_coral("evaluate", "--plugin", "fim", "--data", str(tasks), "--predictions",
                     str(path), *extra, env=coral_env())


def test_evaluate_rescores_predictions_from_another_harness(tmp_path):
    """By task id or by index, extracted as a run would, scored with the same metrics."""
    predictions = [{"index": 0, "prediction": "x + 1"},
                   {"task_id": "total", "prediction": "sum(values)\nprint(total)"},
                   {"task_id": "pair", "prediction": "(right, left)"}]
    result = _rescore(tmp_path, predictions, "--json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    rows = {row["task_id"]: row for row in document["tasks"]}
    assert list(rows) == ["1", "pair", "total"]  # the task file's order
    assert rows["1"]["em"] == 1.0 and rows["total"]["em"] == 1.0  # the echoed suffix is cut
    assert rows["total"]["prediction"] == "sum(values)"
    assert rows["pair"]["em"] == 0.0 and 0 < rows["pair"]["es"] < 1
    expected = metrics.score_many(["x + 1", "(right, left)", "sum(values)"],
                                  [t["groundtruth"] for t in RESCORE_TASKS])
    assert document["overall"] == expected["overall"]
    raw = _rescore(tmp_path, predictions, "--json", "--extract", "none")
    assert json.loads(raw.stdout)["tasks"][2]["em"] == 0.0  # kept whole: not exact
    table = _rescore(tmp_path, predictions)
    assert table.returncode == 0 and "| pair" in table.stdout
    assert "tasks 3" in table.stdout and "tasks 3.000" not in table.stdout
    balanced = document["overall"]["balanced"]
    assert 0 <= balanced <= 1 and f"balanced {balanced:.3f}" in table.stdout


@pytest.mark.parametrize("predictions, words", [
    ([{"task_id": "totl", "prediction": "x"}], "unknown task 'totl' (did you mean 'total'?)"),
    ([{"index": 0, "prediction": "x"}, {"task_id": "1", "prediction": "y"}],
     "a second prediction for task '1'"),
    ([{"index": 0, "prediction": "x"}], "no prediction for task 'pair' (and 1 more)"),
    (["{not json"], "malformed JSON"),
    ([{"index": 7, "prediction": "x"}], 'an "index" in 0..2'),
    ([{"task_id": "pair"}], '"prediction"'),
    ([{"index": 0, "task_id": "pair", "prediction": "x"}],
     "\"task_id\" 'pair' is at index 1 of the task file, but \"index\" is 0"),
])
def test_bad_predictions_are_one_line_and_exit_2(tmp_path, predictions, words):
    result = _rescore(tmp_path, predictions, "--json")
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], result.stderr
    assert result.stdout == ""


def test_predictions_are_for_fim_only(tmp_path, data_dir):
    path = tmp_path / "pred.jsonl"
    path.write_text('{"index": 0, "prediction": "x"}\n')
    result = run_coral("evaluate", "--plugin", "quixbugs", "--predictions", str(path),
                       env=coral_env(data_dir))
    assert result.returncode == 2
    assert "--predictions rescores FIM completions" in result.stderr


# ----- infilling checked by execution: tasks built from QuixBugs -----


@pytest.mark.parametrize("kind", builder.KINDS)
def test_quixbugs_infill_tasks_put_back_are_the_program(data_dir, kind):
    from coral_plugins.datasets.fim.quixbugs_source import without_trailing_strings

    dataset = FimDataset(source="quixbugs", kind=kind, seed=3, data_dir=str(data_dir))
    tasks = dataset.tasks("test")
    assert 6 <= len(tasks) <= 8 and {t.split for t in tasks} == {"test"}
    for task in tasks:
        program = dataset.quixbugs.task(task.id).reference
        whole = task.prompt.prefix + task.reference + task.prompt.suffix
        assert whole == without_trailing_strings(program)
        assert '"""' not in task.prompt.suffix  # QuixBugs' alternative solutions are gone
        assert task.execution is not None and task.success.objective == "infill_pass"
    again = FimDataset(source="quixbugs", kind=kind, seed=3, data_dir=str(data_dir))
    assert [t.prompt for t in again.tasks("test")] == [t.prompt for t in tasks]
    with pytest.raises(UserError, match="contamination"):
        dataset.tasks("test", ["bitcount"])


@pytest.mark.parametrize("kind", builder.KINDS)
def test_every_ground_truth_survives_the_default_extraction(data_dir, kind):
    """The reference scores 1.0 by construction: a red-team pass found the python rule
    cutting about half of QuixBugs' reference spans at their first line (EM 0.48 for the
    ground truth), and a multi-line middle holding a line equal to the suffix's first."""
    dataset = FimDataset(source="quixbugs", kind=kind, seed=1, data_dir=str(data_dir))
    tree = data_dir / "quixbugs" / "correct_python_programs"
    built = [dataset._task(row) for row in builder.build_tasks(tree, kind, n=40, seed=2)]
    tasks = dataset.tasks("all") + built
    assert len(tasks) >= 60
    for task in tasks:
        extracted = dataset.extract_code(task, task.reference)
        assert extracted.split() == task.reference.split(), (task.id, task.reference)
    assert extractor_for("auto", "python", "span") is EXTRACTORS["none"]
    assert extractor_for("auto", "python", "line") is EXTRACTORS["python"]


def test_fim_tests_runs_the_completion_in_its_program(data_dir):
    from coral_core.execution import ExecutionContext
    from coral_core.sandbox import Sandbox, SandboxPolicy
    from coral_core.types import Candidate
    from coral_plugins.evaluators.fim_tests import FimTestsEvaluator

    dataset = FimDataset(source="quixbugs", kind="multiline", data_dir=str(data_dir))
    task = dataset.tasks("train", ["gcd"])[0]
    sandbox = Sandbox(SandboxPolicy(timeout=2.0), workers=1)
    context = ExecutionContext(sandbox)
    try:
        evaluator = FimTestsEvaluator()
        right = evaluator.evaluate(Candidate(task, task.reference), context)
        assert right.objectives["infill_pass"] == 1.0
        wrong = evaluator.evaluate(Candidate(task, "    return 1"), context)
        assert wrong.objectives["infill_pass"] < 1.0 and wrong.details["failing"]
        broken = evaluator.evaluate(Candidate(task, "    return ((("), context)
        assert broken.objectives["infill_pass"] == 0.0 and broken.details["load_error"]
    finally:
        context.close()
        sandbox.close()


@pytest.mark.parametrize("kind", ["line", "span"])
def test_fim_quixbugs_preset_end_to_end(data_dir, tmp_path, kind):
    """`[dataset.options] kind` (documented) crashed every run: the option's name clashed
    with the plugin builder's own argument."""
    config = tmp_path / "kind.toml"
    config.write_text(f'[dataset.options]\nkind = "{kind}"\n')
    done = run_coral("run", "--plugin", "fim-quixbugs", "--config", str(config), "--out",
                     str(tmp_path / "r"), "--json", "--model", "reference",
                     env=coral_env(data_dir))
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["split"] == "test" and summary["fixed"] == len(summary["problems"]) >= 6
    assert all(p["objectives"]["infill_pass"] == 1.0 for p in summary["problems"])
    assert summary["fitness"] == 1.0


def test_source_and_path_are_exclusive(tmp_path):
    with pytest.raises(UserError, match="not both"):
        FimDataset(path=str(tmp_path / "x.jsonl"), source="quixbugs")
    with pytest.raises(UserError, match="source"):
        FimDataset(source="humaneval")
