"""FIM metrics: edit similarity, exact match and identifier match of a completion (no sandbox).

With p = prediction.strip() and g = groundtruth.strip() (the task's `reference`):

- es: 1 - Levenshtein(p, g) / max(len(p), len(g)), 1.0 when both are empty;
- es_fuzz: rapidfuzz `fuzz.ratio(p, g) / 100`, unrounded (what published CrossCodeEval
  numbers use; it is 1 - InDel distance / (len(p) + len(g)), so it is >= es);
- em: 1.0 when p and g have the same non-empty lines, each equal after its runs of ASCII
  spaces and tabs are normalised (whitespace-normalised exact match, line for line);
- em_es: the FIM design's "pass" (es >= 0.7 and em). An exact match has es = 1, so this always
  equals em: it is reported under this honest name, never as pass@1;
- id_em, id_f1: the identifiers of p and g (keywords excluded) equal / their multiset F1;
- balanced: the FIM design's balanced score of this one task, (es/0.7 + em/0.25 + em_es/0.55)/3,
  divided by its maximum (BALANCED_MAX) so that it lies in [0, 1]. The balanced score is
  linear in the three means, so the mean of `balanced` times BALANCED_MAX is exactly the
  seed's balanced score of a run.

`mode = "cceval"` reproduces CrossCodeEval's own scripts instead: es_fuzz is the per-sample
fuzz ratio rounded to an integer, and em compares the stripped non-empty lines after its
comment removal (which strips `#...` and `//...` in every language; see docs/fim.md).
"""

from __future__ import annotations

import keyword
import re
from collections import Counter
from typing import Any, Iterable, Sequence


BALANCED_WEIGHTS = {"es": 1 / 0.7, "em": 1 / 0.25, "em_es": 1 / 0.55}
BALANCED_MAX = sum(BALANCED_WEIGHTS.values()) / 3
OBJECTIVES = ("es", "es_fuzz", "em", "em_es", "id_em", "id_f1", "balanced")

JAVA_KEYWORDS = frozenset("""abstract assert boolean break byte case catch char class const
continue default do double else enum extends final finally float for goto if implements import
instanceof int interface long native new package private protected public return short static
strictfp super switch synchronized this throw throws transient try void volatile while var
record yield sealed permits true false null""".split())
PYTHON_KEYWORDS = frozenset(keyword.kwlist) | frozenset(keyword.softkwlist)
# An unclosed block comment or triple-quoted string runs to the end of the text, an unclosed
# one-line string to the end of its line or of the text (a lone backslash ending the text
# included). So every pattern succeeds once it starts: a string that needed a character after
# a final backslash failed there and was retried from every later quote, a quadratic scan
# (`"a\` repeated, 60 KB: 26 s). A one-line string is a lazy scan to the first quote or line
# end not escaped, on the text with its backslash pairs made inert (`_unpair`), where a
# one-character look-behind tells whether a character is escaped: no group repeats per
# character, so there is nothing to backtrack into and no memory kept per escape.
_STRING = (r"\"\"\"[\s\S]*?(?:\"\"\"|\Z)|'''[\s\S]*?(?:'''|\Z)"
           r"|\"[\s\S]*?(?:(?<!\\)\"|(?<!\\)(?=\n)|\Z)"
           r"|'[\s\S]*?(?:(?<!\\)'|(?<!\\)(?=\n)|\Z)")
_COMMENT = {"python": r"#[^\n]*", "java": r"//[^\n]*|/\*[\s\S]*?(?:\*/|\Z)"}
# One left-to-right scan: a string or a comment is skipped whole, an identifier captured.
_TOKENS = {language: re.compile(f"{_STRING}|{comment}|([A-Za-z_][A-Za-z0-9_]*)")
           for language, comment in _COMMENT.items()}


def _unpair(code: str) -> str:
    """`code` with each pair of backslashes (read left to right) made two NULs. In a string
    an odd run of backslashes escapes the character after it, an even one does not: now
    the odd run ends in the one backslash left, so a character is escaped exactly when a
    backslash precedes it. Outside strings a NUL is as inert as a backslash (no identifier,
    quote, comment marker or newline), so every token stays where it was."""
    return code.replace("\\\\", "\0\0")


def _lev():
    from rapidfuzz.distance import Levenshtein
    return Levenshtein


def edit_similarity(prediction: str, groundtruth: str) -> float:
    """Seed 003's ES: 1 - Levenshtein distance / the longer length (1.0 for two empties)."""
    p, g = prediction.strip(), groundtruth.strip()
    if not p and not g:
        return 1.0
    return 1.0 - _lev().distance(p, g) / max(len(p), len(g))


def edit_similarity_fuzz(prediction: str, groundtruth: str, rounded: bool = False) -> float:
    """rapidfuzz fuzz.ratio / 100 (CrossCodeEval's figure; rounded to an integer percent
    by its scripts, `rounded=True`)."""
    from rapidfuzz import fuzz
    ratio = fuzz.ratio(prediction.strip(), groundtruth.strip())
    return (round(ratio) if rounded else ratio) / 100.0


_ASCII_SPACE = re.compile(r"[ \t\f\v\r]+")


def _lines_of_tokens(text: str) -> list[list[str]]:
    """The non-empty lines, each split at runs of ASCII spaces and tabs."""
    lines = (_ASCII_SPACE.split(line.strip(" \t\f\v\r")) for line in text.split("\n"))
    return [line for line in lines if line != [""]]


def exact_match(prediction: str, groundtruth: str) -> bool:
    """Equal line for line after whitespace normalisation: the same non-empty lines, each
    the same runs of text between ASCII spaces and tabs. (`p.split() == g.split()` took a
    line break for a space, and a non-breaking space, which Python refuses, for one:
    `return\nx * 2` matched `return x * 2`.)"""
    return _lines_of_tokens(prediction) == _lines_of_tokens(groundtruth)


def cceval_comment_strip(code: str) -> str:
    """CrossCodeEval's comment removal: `#...` and `//...` to the end of the line, in every
    language (so `(lo + hi) // 2` loses `// 2`: reproduced on purpose, documented)."""
    return re.sub(r"(#|//)[^\n]*", "", code)


def cceval_exact_match(prediction: str, groundtruth: str) -> bool:
    """CrossCodeEval's EM: stripped non-empty lines equal after its comment removal."""
    def lines(text: str) -> list[str]:
        return [ln.strip() for ln in cceval_comment_strip(text).splitlines() if ln.strip()]
    return lines(prediction) == lines(groundtruth)


def identifiers(code: str, language: str = "python") -> list[str]:
    """Identifiers in order, strings and comments removed, the language's keywords excluded."""
    keywords = JAVA_KEYWORDS if language == "java" else PYTHON_KEYWORDS
    tokens = _TOKENS.get(language, _TOKENS["python"])
    return [word for word in tokens.findall(_unpair(code))
            if word and word not in keywords]


def identifier_match(prediction: str, groundtruth: str,
                     language: str = "python") -> tuple[float, float]:
    """(identifier exact match, identifier F1 over multisets); (1, 1) when both have none."""
    if prediction.strip() == groundtruth.strip():  # the common exact match: nothing to scan
        return 1.0, 1.0
    p, g = identifiers(prediction, language), identifiers(groundtruth, language)
    if p == g:  # both empty, or equal
        return 1.0, 1.0
    em = 0.0
    common = sum((Counter(p) & Counter(g)).values()) if p and g else 0
    if not common:
        return em, 0.0
    precision, recall = common / len(p), common / len(g)
    return em, 2 * precision * recall / (precision + recall)


def balanced_score(es: float, em: float, em_es: float) -> float:
    """Seed 003's balanced score of means: (ES/0.7 + EM/0.25 + pass/0.55) / 3."""
    return (es / 0.7 + em / 0.25 + em_es / 0.55) / 3


def _row(prediction: str, groundtruth: str, language: str, mode: str, es: float,
         ratio: float) -> dict[str, float]:
    """Every objective of one prediction, given its ES and rapidfuzz ratio (0-100)."""
    if mode == "cceval":
        fuzz_es = round(ratio) / 100.0
        em = 1.0 if cceval_exact_match(prediction, groundtruth) else 0.0
    else:
        fuzz_es = ratio / 100.0
        em = 1.0 if exact_match(prediction, groundtruth) else 0.0
    em_es = 1.0 if (es >= 0.7 and em) else 0.0
    id_em, id_f1 = identifier_match(prediction, groundtruth, language)
    balanced = balanced_score(es, em, em_es) / BALANCED_MAX
    return {"es": es, "es_fuzz": fuzz_es, "em": em, "em_es": em_es, "id_em": id_em,
            "id_f1": id_f1, "balanced": min(1.0, balanced)}


def score(prediction: str, groundtruth: str, language: str = "python",
          mode: str = "coral") -> dict[str, float]:
    """Every objective of one prediction (see the module docstring)."""
    from rapidfuzz import fuzz

    ratio = fuzz.ratio(prediction.strip(), groundtruth.strip())
    return _row(prediction, groundtruth, language, mode,
                edit_similarity(prediction, groundtruth), ratio)


def score_many(predictions: Sequence[str], groundtruths: Sequence[str],
               languages: Iterable[str] | None = None, mode: str = "coral") -> dict[str, Any]:
    """Per-task objectives and the overall figures (means, and the seed-scale balanced
    score), as `coral evaluate --plugin fim --json` prints them. The same numbers as
    `score` per pair: ES and the fuzz ratio come from rapidfuzz's pairwise C loop
    (`process.cpdist`, float64, all cores) instead of one Python call per pair."""
    if len(predictions) != len(groundtruths):
        raise ValueError("as many predictions as ground truths are needed")
    import numpy as np
    from rapidfuzz import fuzz, process

    langs = list(languages) if languages is not None else ["python"] * len(predictions)
    ps = [p.strip() for p in predictions]
    gs = [g.strip() for g in groundtruths]
    if not ps:
        return {"tasks": [], "overall": overall([])}
    es_all = process.cpdist(ps, gs, scorer=_lev().normalized_similarity, workers=-1,
                            dtype=np.float64).tolist()
    ratios = process.cpdist(ps, gs, scorer=fuzz.ratio, workers=-1, dtype=np.float64).tolist()
    rows = [_row(p, g, lang, mode, es, ratio) for p, g, lang, es, ratio
            in zip(predictions, groundtruths, langs, es_all, ratios)]
    return {"tasks": rows, "overall": overall(rows)}


def overall(rows: Sequence[dict[str, float]]) -> dict[str, float]:
    """The means, under the per-task names' meanings: `balanced` in [0, 1] as everywhere
    else in Coral, and the seed's unnormalised figure under its own name,
    `balanced_seed_scale` (= balanced x BALANCED_MAX)."""
    n = max(1, len(rows))

    def mean(key: str) -> float:
        return sum(row[key] for row in rows) / n
    es, em, em_es = mean("es"), mean("em"), mean("em_es")
    return {"edit_similarity": es, "edit_similarity_fuzz": mean("es_fuzz"), "exact_match": em,
            "em_and_es70": em_es, "identifier_em": mean("id_em"),
            "identifier_f1": mean("id_f1"),
            "balanced": min(1.0, balanced_score(es, em, em_es) / BALANCED_MAX),
            "balanced_seed_scale": balanced_score(es, em, em_es), "tasks": len(rows)}
