"""Every FIM scoring and extraction path is linear in its input, hostile input included.

A model's reply, a prediction file and a task file are untrusted: a regex that fails and is
retried from every later position, or a loop that slices the text at every line, is
quadratic, and a reply of `"a\\` repeated once took 26 s at 60 KB. Each entry point here
gets adversarial shapes at 20 KB and at 160 KB (8x).

Work is measured as this process's CPU time (a loaded machine stretches the wall clock, not
the work), the best of a few runs, and a path passes when its 160 KB run costs less than
RATIO times its 20 KB run (linear: about 8, quadratic: 64) or less than FACTOR times scoring
plain code of 160 KB in the same test. Only a path that fails both is reported, so one slow
run on a busy machine does not fail the test; a quadratic path at 160 KB fails both by far.
The other tests pin the behaviour: the linear code reads ordinary text as before.
"""

from __future__ import annotations

import random
import re
import time
from typing import Callable

import pytest

from coral_core.errors import UserError
from coral_core.stops import cut_at_stop
from coral_core.types import Candidate, Prompt, Task
from coral_plugins.datasets.fim import FimDataset, parse_line
from coral_plugins.datasets.fim.extract import (
    infill_java, infill_none, infill_python, infill_statement)
from coral_core.fim.predictions import score_predictions
from coral_core.fim.templates import FAMILIES, FimTemplate, parse_any
from coral_core.fim import metrics
from coral_plugins.evaluators.fim import FimEvaluator

pytestmark = pytest.mark.loaded  # make test runs it beside CPU hogs

SMALL, BIG = 20_000, 160_000
RATIO = 24  # big / small: 8 when linear, 64 when quadratic
FACTOR = 40  # big / scoring plain code of the big size (the worst linear path is ~10)
PLAIN = 'total = compute(alpha, "beta") + gamma[1];  // sum\n'
SENTINELS = "".join(s for t in FAMILIES.values() for s in (*t.sentinels, *t.stops))


def _repeat(unit: str, head: str = "", tail: str = "") -> Callable[[int], str]:
    """A text of about `size` characters: `unit` repeated whole, between head and tail."""
    return lambda size: head + unit * max(1, (size - len(head) - len(tail)) // len(unit)) + tail


def _nested(size: int) -> str:
    return "([{" * (size // 6) + "}])" * (size // 6)


def _mixed(size: int) -> str:
    """Every hostile piece at once, in a seeded order (interactions between them)."""
    pieces = ['"', "'", "\\", "\n", "#", "//", "/*", "*/", "'''", '"""', "(", "[", "{", ")",
              "]", "}", ";", ":", ",", " ", "a", "def ", "\n\n", "<|fim_suffix|>", "<MID>"]
    rng = random.Random(size)
    out, length = [], 0
    while length < size:
        piece = rng.choice(pieces)
        out.append(piece)
        length += len(piece)
    return "".join(out)


SHAPES: dict[str, Callable[[int], str]] = {
    "quote_a_backslash": _repeat('"a\\'),
    "single_quote_a_backslash": _repeat("'a\\"),
    "escaped_quotes_then_lone_backslash": _repeat('\\"', '"', "\\"),
    "backslashes": _repeat("\\", tail="\\"),
    "quote_backslash_newline": _repeat('"\\\n'),
    "unterminated_quote_lines": _repeat('"(\n'),
    "open_brackets": _repeat("("),
    "open_braces": _repeat("{"),
    "closers": _repeat(")]}"),
    "deep_nesting": _nested,
    "block_comment_openers": _repeat("/*"),
    "block_comment_closers": _repeat("*/"),
    "triple_single_quotes": _repeat("'''"),
    "triple_double_quote_backslash": _repeat('"""a\\'),
    "hashes": _repeat("#"),
    "line_comment_slashes": _repeat("//"),
    "long_line": _repeat("x"),
    "newlines": _repeat("\n"),
    "continued_lines": _repeat("x,\n"),
    "colon_lines": _repeat("if a:\n"),
    "blank_lines": _repeat("  \n"),
    "statements": _repeat("x = (1)\n\n"),
    "sentinels": _repeat(SENTINELS),
    "qwen_middles": _repeat("<|fim_suffix|>"),
    "codellama_middles": _repeat(" <SUF>"),
    "codestral_middles": _repeat("[PREFIX]"),
    "custom_middles": _repeat("<B>"),
    "mixed": _mixed,
}


def _cpu(call: Callable[[str], object], text: str, runs: int) -> float:
    """The least CPU time of `runs` calls (threads included: rapidfuzz's pool is work)."""
    best = float("inf")
    for _ in range(runs):
        start = time.process_time()
        call(text)
        best = min(best, time.process_time() - start)
    return best


def _score_plain(text: str) -> None:
    """What scoring one ordinary reply costs: extraction that reads every line, then every
    metric."""
    metrics.score(infill_java(text, "void f() {\n", "\n}\n"), "return x;", "java", "cceval")


def assert_linear(call: Callable[[str], object]) -> None:
    """Fail naming each shape on which `call` costs more at BIG than both RATIO times its
    cost at SMALL and FACTOR times scoring plain code of size BIG."""
    call(PLAIN)  # imports and compiled patterns: not part of any measurement
    reference = _cpu(_score_plain, PLAIN * (BIG // len(PLAIN)), 3)
    slow = []
    for name, make in SHAPES.items():
        text = make(BIG)
        big = _cpu(call, text, 1)
        if big <= FACTOR * reference:
            continue
        small = _cpu(call, make(SMALL), 5)
        if big > RATIO * small and big < 20 * FACTOR * reference:
            big = min(big, _cpu(call, text, 1))  # a second look, unless it is blatant
        if big > RATIO * small and big > FACTOR * reference:
            slow.append(f"{name}: {SMALL} chars {small:.4f} s, {BIG} chars {big:.4f} s "
                        f"(plain {BIG} chars scored: {reference:.4f} s)")
    assert not slow, "not linear:\n" + "\n".join(slow)


def _task(language: str, prefix: str = "def f():\n    ", suffix: str = "\n    return a\n"
          ) -> Task:
    return Task(id="t", dataset="fim", split="test", prompt=Prompt(prefix=prefix, suffix=suffix),
                reference="a = compute(b)", candidate_kind="completion",
                metadata={"language": language})


def _parse_line(obj: dict) -> object:
    """A task line read, or the one-line error of a line in no known format."""
    try:
        return parse_line(obj, "t.jsonl:1", False)
    except UserError as error:
        return error


ENTRY_POINTS: dict[str, Callable[[str], object]] = {
    "identifiers_python": lambda text: metrics.identifiers(text, "python"),
    "identifiers_java": lambda text: metrics.identifiers(text, "java"),
    "identifier_match": lambda text: metrics.identifier_match(text, "a = b(c)", "java"),
    "score": lambda text: metrics.score(text, "return compute(a, b)"),
    "score_cceval_java": lambda text: metrics.score(text, "return x; // done", "java",
                                                    "cceval"),
    "score_groundtruth": lambda text: metrics.score("return x", text, "python", "cceval"),
    "score_many": lambda text: metrics.score_many([text, "x"], ["return x", text],
                                                  ["python", "java"], "cceval"),
    "evaluator": lambda text: FimEvaluator("cceval").evaluate(
        Candidate(_task("java"), text), None),
    "cceval_exact_match": lambda text: metrics.cceval_exact_match(text, text[:100]),
    "extract_python_block": lambda text: infill_python(text, "def f():\n    ",
                                                       "\n    return a\n"),
    "extract_python_inline": lambda text: infill_python(text, "y = max(", ")\n"),
    "extract_python_echo": lambda text: infill_python(text, "    ", "    return total\n"),
    "extract_java_block": lambda text: infill_java(text, "void f() {\n", "\n}\n"),
    "extract_java_inline": lambda text: infill_java(text, "int n = ", ";\n"),
    "extract_statement_python": lambda text: infill_statement(text, "", "", "python"),
    "extract_statement_java": lambda text: infill_statement(text, "", "", "java"),
    "infill_none": lambda text: infill_none(text, "", ""),
    "rescore": lambda text: score_predictions(
        FimDataset(path="unused.jsonl"), [_task("python"), _task("java", "int n = ", ";\n")],
        [text, text]),
    "stop_sequences": lambda text: cut_at_stop(text, ("\n\ndef ", "\nclass ", "\n\n\n")),
    "parse_qwen_prompt": lambda text: parse_any("<|fim_prefix|>" + text),
    "parse_codellama_prompt": lambda text: parse_any("<PRE> " + text + " <SUF>" + text),
    "parse_task_line": lambda text: _parse_line({"prompt": "[SUFFIX]" + text + "[PREFIX]",
                                                 "groundtruth": text}),
    "parse_task_line_in_no_format": lambda text: _parse_line(
        {"prompt": "<|fim_prefix|>" + text + "<|fim_middle|>!", "groundtruth": ""}),
    "parse_custom_format": lambda text: FimTemplate(
        "custom", "<A>{prefix}<B>{suffix}<C>", ("<A>", "<B>", "<C>")).parse("<A>" + text),
}


@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
def test_every_entry_point_is_linear_on_adversarial_text(entry):
    assert_linear(ENTRY_POINTS[entry])


# ----- the behaviour the linear code keeps -----

def test_a_string_ending_in_a_lone_backslash_runs_to_the_end():
    """What the comment always promised: an unclosed string runs to the end of its line or
    text, also when a backslash ends the text (before, that string was no string at all)."""
    assert metrics.identifiers('"a\\' * 1000) == []
    assert metrics.identifiers("x = 'never closed \\", "java") == ["x"]
    assert metrics.identifiers('x = "ok" + y\nz = "a\\') == ["x", "y", "z"]
    assert metrics.identifiers('s = "\\\\" + t') == ["s", "t"]  # an escaped backslash closes
    assert metrics.identifiers('s = "\\\\\\" + t\nu') == ["s", "u"]  # three: the quote escaped
    assert metrics.identifiers('s = "a\\\nb" + c') == ["s", "c"]  # a continued line
    reply = '"(' + '\\"(' * 1000 + "\\"
    assert infill_python(reply, "y = ", "\n") == reply


def test_hostile_replies_are_cut_as_before():
    assert infill_statement("\n" * 100_000 + "x = 1\ny", "", "") == "\n" * 100_000 + "x = 1"
    assert infill_statement("a,\n" * 1000 + "b\nz", "", "") == "a,\n" * 1000 + "b"
    assert infill_statement("{" * 1000 + "}" * 1000 + ";", "", "", "java") == \
        "{" * 1000 + "}" * 1000
    assert infill_statement("(" * 5000 + ")" * 5000 + "; x;", "", "", "java") == \
        "(" * 5000 + ")" * 5000 + ";"
    prompt = "<|fim_prefix|>" + "a<|fim_suffix|>" * 1000 + "<|fim_middle|>"
    assert parse_any(prompt) == ("qwen", "a<|fim_suffix|>" * 999 + "a", "")


def _statement_by_characters(reply: str, language: str) -> str:
    """The former per-character rule (quadratic: it sliced the reply at every newline)."""
    depth = 0
    for i, ch in enumerate(reply):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if depth <= 0:
            if language == "java" and ch in ";{}":
                return reply[:i + 1]
            if language != "java" and ch == "\n" and reply[:i].strip() and \
                    not reply[:i].rstrip().endswith((":", "\\", ",")):
                return reply[:i]
    return reply


def _parse_by_regex(fmt: str, text: str) -> tuple[str, str] | None:
    """The former regex reading of a templated prompt."""
    pattern = re.escape(fmt).replace(re.escape("{prefix}"), "(?P<prefix>.*)", 1)
    pattern = pattern.replace(re.escape("{suffix}"), "(?P<suffix>.*)", 1)
    match = re.fullmatch(pattern, text, flags=re.DOTALL)
    return (match.group("prefix"), match.group("suffix")) if match else None


# The former tokenizer: the same except that a string ending the text in a lone backslash
# failed (and was retried from every later quote).
_STRING_BEFORE = (r"\"\"\"[\s\S]*?(?:\"\"\"|\Z)|'''[\s\S]*?(?:'''|\Z)"
                  r"|\"(?:\\[\s\S]|[^\"\\\n])*(?:\"|(?=\n)|\Z)"
                  r"|'(?:\\[\s\S]|[^'\\\n])*(?:'|(?=\n)|\Z)")
_TOKENS_BEFORE = {
    "python": re.compile(_STRING_BEFORE + r"|#[^\n]*|([A-Za-z_][A-Za-z0-9_]*)"),
    "java": re.compile(_STRING_BEFORE + r"|//[^\n]*|/\*[\s\S]*?(?:\*/|\Z)"
                       r"|([A-Za-z_][A-Za-z0-9_]*)")}
PIECES = ['"', "'", "\\", "\\\\", "\n", "#", "//", "/*", "*/", "'''", '"""', "(", ")", "[",
          "]", "{", "}", ";", ":", ",", " ", "\t", "\xa0", "a", "if", "x1", "\n\n", "<B>",
          "<A>", "<C>", "{prefix}"]


def test_linear_code_reads_ordinary_text_as_the_former_code_did():
    rng = random.Random(3)
    formats = [t.format for t in FAMILIES.values()] + [
        "<A>{prefix}<B>{suffix}<C>", "{prefix}{suffix}", "<C>{suffix}<A>{prefix}",
        "<A>{prefix}<A>{suffix}<A>", "{prefix}<B>{suffix}{prefix}"]
    for _ in range(3000):
        text = "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 14)))
        for language in ("python", "java"):
            assert infill_statement(text, "", "", language) == \
                _statement_by_characters(text, language), (text, language)
            if not text.endswith("\\"):
                keywords = metrics.JAVA_KEYWORDS if language == "java" \
                    else metrics.PYTHON_KEYWORDS
                before = [w for w in _TOKENS_BEFORE[language].findall(text)
                          if w and w not in keywords]
                assert metrics.identifiers(text, language) == before, (text, language)
        fmt = rng.choice(formats)
        template = FimTemplate("custom", fmt, ())
        for prompt in (text, template.render(text[:5], text[5:])):
            assert template.parse(prompt) == _parse_by_regex(fmt, prompt), (fmt, prompt)
