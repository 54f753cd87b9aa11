"""The baseline as a test writer (the testgen data set): snapshot tests, no weights.

It reads the program and the function to test out of the prompt, guesses each parameter's
kind from its default value, its name and its uses (`len(p)`, `p[i]`, `for a, b in p`,
`p - 1`, `p.split()`), draws inputs of those kinds with the sample's seed, calls the
program on them inside Coral's sandbox (the program is code like any other), and asserts the
outputs it observed. Calls that raise, loop or return something that is not plain data are
dropped. So it catches a bug exactly when one of its inputs makes the buggy program answer
differently; with inputs it cannot build (objects such as the graph problems' nodes) it
writes one test that only imports the function.
"""

from __future__ import annotations

import ast
import math
import random
import re
import threading
import time
from typing import Any, Sequence

from coral_core import parsing
from coral_core.errors import UserError
from coral_core.scoring.program_tests import Case, ExecutionSpec, Step
from coral_core.sandbox import JobTemplate, Sandbox, SandboxPolicy
from coral_core.seeds import sample_seed
from coral_core.stops import cut_at_stop
from coral_core.types import Generation, GenerationRequest

from .prompt import program_in

CLOSING_FENCE = "\n```\n"
TRIES = 16  # inputs drawn per sample
KEEP = 6  # tests written per sample
MAX_REPR = 300
CALL_SECONDS = 0.25  # CPU time per observed call: a call that loops is dropped
# Memory per observed call, deliberately not `execution.memory_mb` (the limit a scored
# candidate runs under, which a model is not given): these are quick probes of the program
# under test, and a call that needs more is dropped like one that loops.
CALL_MEMORY_MB = 512
_IMPORT = re.compile(r"Import the function with `from (\w+) import (\w+)`")

LIST_NAMES = {"arr", "array", "nums", "numbers", "lst", "xs", "items", "values", "vals",
              "tokens", "seq", "sequence", "a_list", "data", "ops", "coins"}
STR_NAMES = {"s", "t", "string", "text", "word", "parens", "chars"}
FLOAT_NAMES = {"epsilon", "eps", "tolerance", "tol"}
INTS = (0, 1, 2, 3, 4, 5, 7, 8, 10, 12, 15, 16, 20, 31, 64, 100, 127, 255)
FLOATS = (0.01, 0.001, 0.5, 1.0, 2.0, 4.0, 9.0, 10.0)


def _evidence(function: ast.FunctionDef, name: str) -> dict[str, int]:
    """Votes for each kind from how `name` is used in the function body."""
    votes = {"int": 0, "list": 0, "str": 0, "pairs": 0, "float": 0}

    def named(node: ast.AST) -> bool:
        return isinstance(node, ast.Name) and node.id == name

    for node in ast.walk(function):
        if isinstance(node, ast.Assign) and named(node.value) \
                and isinstance(node.targets[0], ast.Tuple):  # first, *rest = p
            votes["list"] += 2
        elif isinstance(node, ast.For) and named(node.iter):
            votes["pairs" if isinstance(node.target, ast.Tuple) else "list"] += 2
        elif isinstance(node, ast.Subscript) and named(node.value):
            votes["list"] += 1
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id in ("len", "sorted", "max", "min", "sum") \
                and any(named(a) for a in node.args):
            votes["list"] += 1
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id == "range" and any(named(a) for a in node.args):
            votes["int"] += 2
        elif isinstance(node, ast.Attribute) and named(node.value):
            kind = "str" if node.attr in ("split", "lower", "upper", "strip", "isalpha",
                                          "isdigit", "find", "rfind", "startswith") else "list"
            votes[kind] += 2
        elif isinstance(node, (ast.BinOp, ast.AugAssign)):
            left = node.left if isinstance(node, ast.BinOp) else node.target
            right = node.right if isinstance(node, ast.BinOp) else node.value
            if named(left) or named(right):
                other = right if named(left) else left
                if isinstance(other, ast.Constant) and isinstance(other.value, str):
                    votes["str"] += 2
                elif isinstance(other, ast.Constant) and isinstance(other.value, float):
                    votes["float"] += 1
                elif not isinstance(node.op, ast.Add):
                    votes["int"] += 1
        elif isinstance(node, ast.Compare) and any(
                named(side) for side in (node.left, *node.comparators)):
            for other in (node.left, *node.comparators):
                if isinstance(other, ast.Constant) and isinstance(other.value, str):
                    votes["str"] += 2
                elif isinstance(other, ast.Constant) and isinstance(other.value, int):
                    votes["int"] += 1
    return votes


def entry_function(program: str, entry: str) -> ast.FunctionDef:
    function = next((n for n in parsing.parse(program).body if isinstance(n, ast.FunctionDef)
                     and n.name == entry), None)
    if function is None:
        raise LookupError(f"the program defines no function {entry}")
    return function


def is_generator(function: ast.FunctionDef) -> bool:
    """Whether the function itself yields (not a function nested in it)."""
    def walk(node: ast.AST):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda,
                                  ast.ClassDef)):
                continue
            yield child
            yield from walk(child)

    return any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in walk(function))


def parameter_kinds(function: ast.FunctionDef) -> list[tuple[str, str]]:
    """(parameter, kind) for the function's positional parameters."""
    arguments = [*function.args.posonlyargs, *function.args.args]
    defaults = [None] * (len(arguments) - len(function.args.defaults)) + function.args.defaults
    kinds = []
    for argument, default in zip(arguments, defaults):
        name = argument.arg
        if isinstance(default, ast.Constant) and type(default.value) in (int, float, str):
            kinds.append((name, type(default.value).__name__))
            continue
        votes = _evidence(function, name)
        votes["list"] += 2 * (name in LIST_NAMES)
        votes["str"] += 3 * (name in STR_NAMES)
        votes["float"] += 5 * (name in FLOAT_NAMES)
        best = max(votes, key=lambda kind: (votes[kind], kind == "int"))
        kinds.append((name, best if votes[best] else "int"))
    return kinds


def draw(kind: str, rng: random.Random, name: str) -> Any:
    if kind == "int":
        return rng.choice(INTS)
    if kind == "float":
        return rng.choice(FLOATS)
    if kind == "str":
        alphabet = "()" if "paren" in name else "abcde "
        return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 8)))
    if kind == "pairs":
        return [[rng.randint(1, 10), rng.randint(1, 10)] for _ in range(rng.randint(0, 5))]
    return [rng.randint(0, 20) for _ in range(rng.randint(0, 7))]


def _plain(value: Any, depth: int = 0) -> bool:
    """Data a test can write as a literal and compare exactly."""
    if depth > 6:
        return False
    if value is None or type(value) in (bool, int, str):
        return True
    if type(value) is float:
        return math.isfinite(value)
    if type(value) in (list, tuple, set):
        return all(_plain(v, depth + 1) for v in value)
    if type(value) is dict:
        return all(_plain(k, depth + 1) and _plain(v, depth + 1) for k, v in value.items())
    return False


def render(module: str, entry: str, observed: Sequence[tuple[tuple, Any]],
           generator: bool) -> str:
    tests = []
    if not observed:
        tests.append(f"def test_{entry}_is_callable():\n    assert callable({entry})\n")
    for index, (args, value) in enumerate(observed):
        call = f"{entry}({', '.join(repr(a) for a in args)})"
        if generator:
            call = f"list({call})"
        tests.append(f"def test_{entry}_{index}():\n    assert {call} == {value!r}\n")
    return "\n\n".join([f"from {module} import {entry}\n", *tests])


class BaselineTestWriter:
    """The baseline model for data sets whose candidates are test files."""

    name = "baseline"
    supports_adapters = False

    def __init__(self, dataset: Any = None):
        self.dataset = dataset
        self._sandbox: Sandbox | None = None
        self._lock = threading.Lock()

    def sandbox(self) -> Sandbox:
        with self._lock:
            if self._sandbox is None:
                policy = SandboxPolicy(timeout=CALL_SECONDS, memory_mb=CALL_MEMORY_MB)
                self._sandbox = Sandbox(policy, workers=1)
            return self._sandbox

    def close(self) -> None:
        with self._lock:
            sandbox, self._sandbox = self._sandbox, None
        if sandbox is not None:
            sandbox.close()

    def generate(self, requests: Sequence[GenerationRequest]) -> list[list[Generation]]:
        return [self._complete(request) for request in requests]

    def _complete(self, request: GenerationRequest) -> list[Generation]:
        if request.adapter:
            raise UserError("baseline: adapters are not supported (it has no weights)")
        program = program_in(request.prompt)
        found = _IMPORT.search(request.prompt.instruction
                               or "\n".join(m.content for m in request.prompt.messages))
        if found is None:
            raise UserError("baseline: the prompt does not say which function to test "
                            "('Import the function with `from MODULE import FUNCTION`')")
        module, entry = found.groups()
        try:
            function = entry_function(program, entry)
            kinds, generator = parameter_kinds(function), is_generator(function)
        except (SyntaxError, ValueError, LookupError) as error:
            raise UserError(f"baseline: cannot read the program to test: {error}") from None
        generations = []
        for index in range(request.params.n):
            started = time.perf_counter()
            rng = random.Random(sample_seed(request.params.seed, index))
            observed = self._observe(module, entry, program, kinds, generator, rng)
            text, _ = cut_at_stop(render(module, entry, observed, generator).rstrip("\n")
                                  + CLOSING_FENCE, request.params.stop)
            generations.append(Generation(text=text, seconds=time.perf_counter() - started,
                                          finish_reason="stop"))
        return generations

    def _observe(self, module: str, entry: str, program: str, kinds: list[tuple[str, str]],
                 generator: bool, rng: random.Random) -> list[tuple[tuple, Any]]:
        calls, seen = [], set()
        for _ in range(TRIES):
            args = tuple(draw(kind, rng, name) for name, kind in kinds)
            if repr(args) not in seen:
                seen.add(repr(args))
                calls.append(args)
        project = "list" if generator else "value"
        spec = ExecutionSpec(module=module, cases=tuple(
            Case(f"call{i}", Step(call=entry, args=args, project=project), ())
            for i, args in enumerate(calls)))
        sandbox = self.sandbox()
        result = sandbox.run(JobTemplate(spec, sandbox.policy).job(program))
        observed = []
        for args, step in zip(calls, result.steps):
            if step.status != "ok" or len(step.records) != 1:
                continue
            value = step.records[0]
            if _plain(value) and len(repr(value)) <= MAX_REPR:
                observed.append((args, value))
            if len(observed) == KEEP:
                break
        return observed
