"""Deterministic FIM tasks from any directory of source files (`coral fim build`).

Kinds: `line` (the rest of a line, from a random column after its indentation),
`multiline` (2-8 whole lines of one block), `span` (a random character span inside a
function body, as HumanEval-infilling does). A middle never crosses a file and is never
blank or comments only. Files are visited in a seeded order, at most one task per file
while files remain (then a second round), so a set covers many files. The prefix keeps
at most CONTEXT_LINES lines before the middle and the suffix SUFFIX_LINES after it.
"""

from __future__ import annotations

import ast
import json
import os
import random
import re
import stat
import sysconfig
from pathlib import Path

from coral_core import parsing
from coral_core.errors import UserError
from coral_core.files.atomic import write_text_atomic
from coral_core.files.fileio import read_text
from coral_core.files.outputs import write_output

from .extract import extracts_to_itself

KINDS = ("line", "multiline", "span")
EXTENSIONS = {"python": (".py",), "java": (".java",)}
SKIP_DIRS = {"__pycache__", "site-packages", "dist-packages", "test", "tests", ".git",
             "node_modules", "idlelib", "lib2to3", "venv", ".venv"}
CONTEXT_LINES = 120
SUFFIX_LINES = 40
MAX_FILE_BYTES = 400_000
BUILDER_VERSION = 2  # the default set's cache key (2: no site the extraction would cut)


def source_files(root: Path, language: str) -> list[Path]:
    found = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("."))
        for name in sorted(files):
            if name.endswith(EXTENSIONS[language]):
                path = Path(folder) / name
                try:
                    info = path.stat()
                except OSError:
                    continue
                # a FIFO or a link to a device would block or never end
                if stat.S_ISREG(info.st_mode) and info.st_size <= MAX_FILE_BYTES:
                    found.append(path)
    return found


# A line as Python and javac count them: ended by \n, \r\n or \r only. str.splitlines also
# ends one at \f, \x1c-\x1e, U+0085, U+2028 and U+2029, which put a red-team's middles
# off the sites ast chose, cut ground truths short and added a "\n" to the file's text.
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def code_lines(text: str) -> list[str]:
    """`text`'s lines, each with its line break: "".join of them is `text`."""
    return _LINE.findall(text)


def _meaningful(text: str, language: str) -> bool:
    """Not blank and not comments only."""
    comment = "#" if language == "python" else "//"
    for line in text.splitlines():
        s = line.strip()
        if s and not s.startswith(comment) and not (language == "java" and s.startswith(
                ("/*", "*", "*/"))):
            return True
    return False


def _python_sites(source: str, kind: str) -> list[tuple[int, int]]:
    """(first line, last line), 1-based, of candidate middles in a Python file."""
    try:  # a BOM, which Python reads past, on line 1 (it stays in the task's prefix)
        tree = parsing.parse(source[1:] if source.startswith("\ufeff") else source)
    except (SyntaxError, ValueError):
        return []
    sites = []
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        in_function = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        stmts = [s for s in body if isinstance(s, ast.stmt)]
        if kind == "line":
            sites += [(s.lineno, s.lineno) for s in stmts
                      if s.end_lineno == s.lineno and not isinstance(s, ast.Expr)]
        elif kind == "multiline":
            for i, first in enumerate(stmts):
                for last in stmts[i:]:
                    span = (last.end_lineno or last.lineno) - first.lineno + 1
                    if 2 <= span <= 8:
                        sites.append((first.lineno, last.end_lineno or last.lineno))
                    if span >= 8:
                        break
        elif kind == "span" and in_function and stmts:
            first = stmts[0]
            if isinstance(first, ast.Expr) and isinstance(getattr(first, "value", None),
                                                          ast.Constant):
                stmts = stmts[1:]  # the docstring
            if stmts:
                sites.append((stmts[0].lineno, stmts[-1].end_lineno or stmts[-1].lineno))
    return sites


def _java_depths(lines: list[str]) -> list[int]:
    """The brace depth at the start of each line, braces in comments, strings, text blocks
    and character literals not counted."""
    depths, depth, state = [], 0, ""
    for line in lines:
        depths.append(depth)
        i = 0
        while i < len(line):
            two, char = line[i:i + 2], line[i]
            if state == "/*":
                state, i = ("", i + 2) if two == "*/" else (state, i + 1)
                continue
            if state == '"""':
                state, i = ("", i + 3) if line.startswith('"""', i) else (state, i + 1)
                continue
            if state in ('"', "'"):
                if char == "\\":
                    i += 2
                    continue
                state = "" if char == state else state
                i += 1
                continue
            if two == "//":
                break
            if two == "/*":
                state, i = "/*", i + 2
                continue
            if line.startswith('"""', i):
                state, i = '"""', i + 3
                continue
            if char in "\"'":
                state = char
            elif char == "{":
                depth += 1
            elif char == "}":
                depth = max(0, depth - 1)
            i += 1
        if state in ('"', "'"):
            state = ""  # an unterminated literal ends with its line
    return depths


def _java_sites(lines: list[str], kind: str) -> list[tuple[int, int]]:
    """Line ranges inside method bodies: brace depth 2 or more at the line's start (a type's
    body is depth 1), whatever the indentation; comment, annotation and closing lines are
    not middles, and a range never leaves the block it starts in."""
    depths = _java_depths(lines) + [0]
    body = [i + 1 for i, ln in enumerate(lines)
            if ln.strip() and depths[i] >= 2 and not ln.strip().startswith(
                ("//", "/*", "*", "@", "}"))]
    if kind == "line":
        return [(n, n) for n in body if lines[n - 1].rstrip().endswith(";")]
    sites = []
    bodyset = set(body)
    for n in body:
        end = n
        while (end + 1 in bodyset and end - n < 7 and depths[end] >= depths[n - 1]
               and depths[end + 1] >= depths[n - 1]):
            end += 1
            if kind == "multiline":
                sites.append((n, end))
        if kind == "span" and end > n:
            sites.append((n, end))
    return sites


def _unbroken(text: str) -> tuple[str, str]:
    """(`text` without its final line break, that break): prefix + middle + suffix is the
    file's text, whatever its line breaks (a "\n" put after a middle was added to CR-only
    and unterminated files)."""
    for end in ("\r\n", "\r", "\n"):
        if text.endswith(end):
            return text[:-len(end)], end
    return text, ""


def _make(lines: list[str], first: int, last: int, kind: str, rng: random.Random,
          language: str, whole: bool = False) -> tuple[str, str, str] | None:
    """(prefix, middle, suffix) for the site, or None when the middle is not meaningful;
    `whole`: the prefix and suffix are the whole rest of the file (so that prefix + middle
    + suffix is the program, to run)."""
    before = lines[:first - 1] if whole else lines[max(0, first - 1 - CONTEXT_LINES):first - 1]
    after = lines[last:] if whole else lines[last:last + SUFFIX_LINES]
    block = lines[first - 1:last]
    if kind == "line":
        line = block[0]
        indent = len(line) - len(line.lstrip())
        content = line[indent:]
        cuts = [indent] + [indent + m.end() for m in re.finditer(r"[\s(\[{.,=:]+", content)
                           if indent + m.end() < len(line)]
        cut = rng.choice(cuts[: max(1, len(cuts) // 2 + 1)])
        _, end = _unbroken(line)
        prefix = "".join(before) + line[:cut]
        middle = line[cut:len(line) - len(end)]
        suffix = end + "".join(after)
    elif kind == "multiline":
        prefix = "".join(before)
        middle, end = _unbroken("".join(block))
        suffix = end + "".join(after)
    else:
        text, end = _unbroken("".join(block))
        if len(text) < 4:
            return None
        start = rng.randrange(0, len(text) - 1)
        length = rng.randint(1, min(120, len(text) - start))
        prefix = "".join(before) + text[:start]
        middle = text[start:start + length]
        suffix = text[start + length:] + end + "".join(after)
    if not _meaningful(middle, language):
        return None
    if not extracts_to_itself(middle, prefix, suffix, language, kind):
        return None
    return prefix, middle, suffix


def build_tasks(src: str | os.PathLike[str], kind: str = "line", n: int = 100, seed: int = 0,
                language: str = "python") -> list[dict]:
    """Up to `n` tasks (shape b: task_id, prefix, suffix, groundtruth, language, metadata)."""
    if kind not in KINDS:
        raise UserError(f"fim build: --kind {kind} (expected one of {', '.join(KINDS)})")
    if language not in EXTENSIONS:
        raise UserError(f"fim build: --language {language} (expected python or java)")
    root = Path(src)
    if not root.is_dir():
        raise UserError(f"fim build: {root} is not a directory")
    files = source_files(root, language)
    if not files:
        raise UserError(f"fim build: no {language} files under {root}")
    rng = random.Random(f"{seed}:{kind}:{language}")
    order = files[:]
    rng.shuffle(order)
    tasks: list[dict] = []
    used: set[tuple[str, int, int]] = set()
    for _round in range(3):
        for path in order:
            if len(tasks) >= n:
                return tasks
            made = _one(path, root, kind, rng, language, used)
            if made:
                made["task_id"] = f"{kind}/{len(tasks):05d}"
                tasks.append(made)
    if not tasks:  # an empty file of tasks was written, exit status 0 (a bad-input pass)
        raise UserError(f"fim build: none of the {len(files)} {language} files under {root} "
                        f"gave a {kind} task (not UTF-8 text, no site of that kind, or empty; "
                        "see docs/fim.md)")
    return tasks


def _one(path: Path, root: Path, kind: str, rng: random.Random, language: str,
         used: set) -> dict | None:
    try:
        source = read_text(path, limit=MAX_FILE_BYTES, what="source", within=root)
    except UserError:  # replaced since the walk, a link out of the tree, not UTF-8
        return None
    lines = code_lines(source)
    sites = (_python_sites(source, kind) if language == "python" else _java_sites(lines, kind))
    rel = path.relative_to(root).as_posix()
    sites = sorted(set(s for s in sites if (rel, *s) not in used))
    for _ in range(5):
        if not sites:
            return None
        first, last = rng.choice(sites)
        made = _make(lines, first, last, kind, rng, language)
        if made:
            used.add((rel, first, last))
            prefix, middle, suffix = made
            return {"prefix": prefix, "suffix": suffix, "groundtruth": middle,
                    "language": language,
                    "metadata": {"file": rel, "line": first, "kind": kind}}
    return None


def write_jsonl(tasks: list[dict], out: str | os.PathLike[str], users: bool = False) -> None:
    """`users`: `out` is the user's `--out` (a device is written to, a link followed);
    else a file in Coral's cache (replaced, never followed)."""
    out = Path(out)
    text = "".join(json.dumps(task, ensure_ascii=False) + "\n" for task in tasks)
    if users:
        write_output(out, text, "--out")
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out, text)


def stdlib_dir() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])
