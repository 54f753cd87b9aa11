"""Turning the upstream QuixBugs pytest files into sandbox steps and parent-held expectations.

JSON-driven problems: each `json_testcases/NAME.json` line becomes a call step; the way the
upstream test compares (plain ==, `list(...)` for generators, `pytest.approx(abs=...)`) and
its slow-case skips are read from `python_testcases/test_NAME.py` itself.

Graph problems: the upstream test module is rewritten with `ast`. Each `assert` becomes one
or two `__coral_record__(value)` calls whose values are compared in the parent; literal
expected values (and local names bound only to literals, such as `expected = {...}`) are
removed from the code that runs in the sandbox, as are docstrings (they state outputs).
What stays visible to the candidate: the inputs, and for `assert a == b` where `b` is an
object built by the test (reverse_linked_list's `result == node1`), the object itself,
compared by identity.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

from coral_core import parsing
from coral_core.files.decoding import json_value
from coral_core.files.fileio import read_text
from coral_core.scoring.program_tests import Case, Expect, Step

RECORD = "__coral_record__"


class UpstreamFormatError(ValueError):
    """The upstream test file has a shape this translator does not know."""


def _constant(node: ast.AST, held: dict[str, Any]) -> Any:
    """Evaluate a literal (plus float('inf') and names held by the parent); else raise."""
    if isinstance(node, ast.Name) and node.id in held:
        return held[node.id]
    if (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "float"
        and len(node.args) == 1 and not node.keywords
        and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
    ):
        return float(node.args[0].value)
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _constant(node.operand, held)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        items = [_constant(item, held) for item in node.elts]
        return {ast.List: list, ast.Tuple: tuple, ast.Set: set}[type(node)](items)
    if isinstance(node, ast.Dict):
        if any(key is None for key in node.keys):
            raise UpstreamFormatError("dict unpacking")
        return {_constant(k, held): _constant(v, held) for k, v in zip(node.keys, node.values)}
    raise UpstreamFormatError(f"not a constant: {ast.dump(node)[:80]}")


def _is_constant(node: ast.AST, held: dict[str, Any]) -> bool:
    try:
        _constant(node, held)
    except (UpstreamFormatError, ValueError, TypeError):
        return False
    return True


def _record(value: ast.expr) -> ast.stmt:
    call = ast.Call(func=ast.Name(RECORD, ast.Load()), args=[value], keywords=[])
    return ast.Expr(call)


def _strip_docstring(body: list[ast.stmt]) -> list[ast.stmt]:
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        return body[1:] or [ast.Pass()]
    return body


def _held_names(function: ast.FunctionDef, held: dict[str, Any]) -> dict[str, Any]:
    """Local names bound once to a literal and used only as the right side of `==` asserts."""
    local = dict(held)
    uses: dict[str, int] = {}
    for node in ast.walk(function):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            uses[node.id] = uses.get(node.id, 0) + 1
    assert_rhs: dict[str, int] = {}
    for node in ast.walk(function):
        if isinstance(node, ast.Assert) and isinstance(node.test, ast.Compare) \
                and len(node.test.ops) == 1 and isinstance(node.test.ops[0], ast.Eq) \
                and isinstance(node.test.comparators[0], ast.Name):
            name = node.test.comparators[0].id
            assert_rhs[name] = assert_rhs.get(name, 0) + 1
    for statement in function.body:
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1 \
                and isinstance(statement.targets[0], ast.Name):
            name = statement.targets[0].id
            if uses.get(name, 0) == assert_rhs.get(name, 0) > 0 \
                    and _is_constant(statement.value, local):
                local[name] = _constant(statement.value, local)
    return local


def _rewrite_asserts(function: ast.FunctionDef, held: dict[str, Any]) -> list[Expect]:
    """Replace each assert in place; return the expectations in execution order."""
    local = _held_names(function, held)
    expects: list[Expect] = []

    def rewrite(statement: ast.stmt) -> list[ast.stmt]:
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1 \
                and isinstance(statement.targets[0], ast.Name) \
                and statement.targets[0].id in local and statement.targets[0].id not in held:
            return []  # the expected value stays in the parent
        if not isinstance(statement, ast.Assert):
            for field in ("body", "orelse"):
                if hasattr(statement, field) and isinstance(getattr(statement, field), list):
                    setattr(statement, field,
                            [new for old in getattr(statement, field) for new in rewrite(old)]
                            or [ast.Pass()])
            return [statement]
        test = statement.test
        if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq):
            left, right = test.left, test.comparators[0]
            if _is_constant(right, local):
                expects.append(Expect("eq", _constant(right, local)))
                return [_record(left)]
            expects.append(Expect("same"))
            return [_record(left), _record(right)]
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            expects.append(Expect("falsy"))
            return [_record(test.operand)]
        expects.append(Expect("truthy"))
        return [_record(test)]

    body = _strip_docstring(function.body)
    function.body = [new for old in body for new in rewrite(old)] or [ast.Pass()]
    return expects


def _is_use_correct_switch(statement: ast.stmt) -> bool:
    return isinstance(statement, ast.If) and "use_correct" in ast.unparse(statement.test)


def script_cases(test_source: str, problem: str) -> tuple[str, tuple[Case, ...]]:
    """Setup code for the sandbox and one case per upstream test function, in file order."""
    tree = _parsed(test_source)
    body: list[ast.stmt] = []
    cases: list[Case] = []
    for statement in tree.body:
        if isinstance(statement, ast.Import) and all(a.name == "pytest" for a in statement.names):
            continue
        if _is_use_correct_switch(statement):
            body.append(ast.ImportFrom(problem, [ast.alias(problem)], 0))
            continue
        if isinstance(statement, ast.FunctionDef) and statement.name.startswith("test"):
            expects = _rewrite_asserts(statement, {})
            cases.append(Case(statement.name, Step(script=statement.name), tuple(expects)))
        body.append(statement)
    module = ast.Module(body=_strip_docstring(body), type_ignores=[])
    return ast.unparse(ast.fix_missing_locations(module)), tuple(cases)


def _test_function(tree: ast.Module) -> ast.FunctionDef:
    functions = [n for n in tree.body
                 if isinstance(n, ast.FunctionDef) and n.name.startswith("test")]
    if len(functions) != 1:
        raise UpstreamFormatError("expected one parametrized test function")
    return functions[0]


def _call_shape(function: ast.FunctionDef, problem: str) -> tuple[str, str, ast.expr | None]:
    """(projection, comparison, tolerance expression) read from the test's assertion."""
    asserts = [n for n in ast.walk(function) if isinstance(n, ast.Assert)]
    if len(asserts) != 1 or not isinstance(asserts[0].test, ast.Compare):
        raise UpstreamFormatError("expected one comparison assert")
    compare = asserts[0].test
    left, right = compare.left, compare.comparators[0]
    project = "value"
    if isinstance(left, ast.Call) and isinstance(left.func, ast.Name) and left.func.id == "list":
        project, left = "list", left.args[0]
    if not (isinstance(left, ast.Call) and ast.unparse(left.func) == problem):
        raise UpstreamFormatError("assert does not call the program")
    if isinstance(right, ast.Name):
        return project, "eq", None
    if isinstance(right, ast.Call) and ast.unparse(right.func) == "pytest.approx":
        tolerance = next((k.value for k in right.keywords if k.arg == "abs"), None)
        if tolerance is None:
            raise UpstreamFormatError("pytest.approx without abs=")
        return project, "approx", tolerance
    raise UpstreamFormatError("unknown comparison")


def _tolerance(expression: ast.expr, args: list[Any]) -> float:
    """Evaluate `input_data[i]` or a constant."""
    if isinstance(expression, ast.Subscript) and ast.unparse(expression.value) == "input_data":
        return float(args[_constant(expression.slice, {})])
    return float(_constant(expression, {}))


def _slow_inputs(function: ast.FunctionDef) -> list[Any]:
    slow = []
    for node in ast.walk(function):
        if isinstance(node, ast.If) and any("skip" in ast.unparse(s) for s in node.body):
            for compare in ast.walk(node.test):
                if isinstance(compare, ast.Compare) and ast.unparse(compare.left) == "input_data":
                    slow.append(_constant(compare.comparators[0], {}))
    return slow


_SAFE_BUILTINS = {"tuple": tuple, "list": list, "set": set, "dict": dict, "sorted": sorted,
                  "float": float, "int": int, "str": str, "len": len, "range": range}


# The largest upstream file is 16 KB: a cap far above it bounds a hostile data folder's.
QUIXBUGS_FILE_BYTES = 4 * 1024 * 1024

# What a rewrite of `testdata` may be made of (hanoi's is a comprehension calling tuple):
# no arithmetic, no range, small constants, so a data folder cannot make the parent compute
# 9**9**9 or allocate "x" * 10**10.
_RESHAPING = (ast.Expression, ast.ListComp, ast.GeneratorExp, ast.comprehension, ast.Name,
              ast.Load, ast.Store, ast.Tuple, ast.List, ast.Call, ast.Subscript, ast.Constant)
_RESHAPING_CALLS = {"tuple", "list", "set", "sorted", "dict", "float", "int", "str"}


def _check_reshaping(node: ast.expr) -> None:
    nodes = list(ast.walk(node))
    if len(nodes) > 200 or sum(isinstance(n, ast.comprehension) for n in nodes) > 3:
        raise UpstreamFormatError("a testdata rewrite larger than any upstream one")
    for each in nodes:
        if not isinstance(each, _RESHAPING):
            raise UpstreamFormatError(f"a testdata rewrite uses {type(each).__name__}")
        if isinstance(each, ast.Call) and not (isinstance(each.func, ast.Name)
                                               and each.func.id in _RESHAPING_CALLS):
            raise UpstreamFormatError("a testdata rewrite calls something else than a "
                                      "constructor")
        if isinstance(each, ast.Constant) and len(repr(each.value)) > 100:
            raise UpstreamFormatError("a testdata rewrite holds a large constant")


def _reshape(tree: ast.Module, rows: list[Any]) -> list[Any]:
    """Apply module-level rewrites of `testdata` (hanoi turns expected pairs into tuples).

    They are upstream test code evaluated in the parent on parsed JSON, with a handful of
    pure builtins and nothing else in scope.
    """
    for statement in tree.body:
        if isinstance(statement, ast.Assign) and [ast.unparse(t) for t in statement.targets] \
                == ["testdata"] and "load_json_testcases" not in ast.unparse(statement.value):
            _check_reshaping(statement.value)
            code = parsing.compile_tree(ast.Expression(statement.value), "<testdata>", "eval")
            # upstream test code, with pure constructors as its only builtins
            rows = eval(code, {"__builtins__": _SAFE_BUILTINS}, {"testdata": rows})  # nosec B307
    return rows


def _parsed(test_source: str) -> ast.Module:
    """Upstream test code parsed; anything that does not parse is a format error."""
    try:
        return parsing.parse(test_source)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as error:
        raise UpstreamFormatError(f"its test file does not parse ({type(error).__name__})"
                                  ) from None


def call_cases(test_source: str, json_lines: list[str], problem: str) -> tuple[Case, ...]:
    tree = _parsed(test_source)
    function = _test_function(tree)
    project, comparison, tolerance = _call_shape(function, problem)
    slow_inputs = _slow_inputs(function)
    rows = _reshape(tree, [json_value(line, f"{problem}.json") for line in json_lines
                           if line.strip()])
    cases = []
    for number, (args, expected) in enumerate(rows):
        if not isinstance(args, list):
            args = [args]
        if comparison == "approx":
            expect = Expect("approx", expected, _tolerance(tolerance, args))
        else:
            expect = Expect("eq", expected)
        cases.append(Case(
            f"{problem}[{number}]", Step(call=problem, args=tuple(args), project=project),
            (expect,), slow=args in slow_inputs,
        ))
    return tuple(cases)


def data_file(root: Path, folder: str, name: str) -> str:
    """A file of the data set: regular, capped, and inside `root` (a link out is refused)."""
    return read_text(root / folder / name, limit=QUIXBUGS_FILE_BYTES, what="QuixBugs file",
                     within=root)


def load_cases(root: Path, problem: str) -> tuple[str, tuple[Case, ...]]:
    """(setup code, cases) for one problem from an upstream-layout folder."""
    test_source = data_file(root, "python_testcases", f"test_{problem}.py")
    json_path = root / "json_testcases" / f"{problem}.json"
    if json_path.exists():
        lines = data_file(root, "json_testcases", f"{problem}.json").split("\n")
        return "", call_cases(test_source, lines, problem)
    return script_cases(test_source, problem)


def standalone_test_file(root: Path, problem: str) -> str:
    """QuixBugs' own pytest file for `problem`, as a model's would be: it imports the
    program as `problem`, its JSON cases written in, slow cases off. For checks and
    benchmarks of test-file scoring; never shown to a model."""
    text = data_file(root, "python_testcases", f"test_{problem}.py")
    text = re.sub(r"if pytest\.use_correct:\n\s+from correct_python_programs\.(\w+) import "
                  r"(\w+)\nelse:\n\s+from python_programs\.\w+ import \w+\n",
                  r"from \1 import \2\n", text)
    text = text.replace("from load_testdata import load_json_testcases\n", "")

    def cases(found: re.Match) -> str:
        name = f"{found.group(1)}.json"
        lines = data_file(root, "json_testcases", name).split("\n")
        return "testdata = " + repr([json_value(line, name) for line in lines if line.strip()])

    text = re.sub(r"testdata = load_json_testcases\((\w+)\.__name__\)", cases, text)
    return text.replace("pytest.run_slow", "False")
