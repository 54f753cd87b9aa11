"""The static screen of a model-written test file (standard library only).

A test suite's verdicts are its own to give: the one thing it must not do is tell the
program under test from a mutant, or the correct program from the buggy one, by anything
but calling it: reading its source or bytecode, walking frames to the harness, or reaching
the interpreter's tracer. Python cannot hide a function's code from code in the same
process, so the suite is held to a small language where every name and attribute it
touches is written out in its text, and none leads to the interpreter's insides:

- imports from an allow-list; an attribute of an imported module must be in that module's
  public API (its `__all__`, else its public names), never a module or a builtin such as
  `getattr` (`enum.bltns` is the builtins module); such names are refused on any object;
- no private or dunder attribute, keyword, parameter, function or class name (`_sys`,
  `__code__`, `def __getattr__`; helper classes may define the usual operators), none in a
  `match` class pattern; no `co_*`, frame or traceback attribute; no string holding a
  double underscore; no assignment to a dunder name;
- no dynamic attribute access or code execution (`getattr`, `eval`, `.format`,
  `functools.update_wrapper`, `functools.singledispatch`, `typing.get_type_hints`,
  three-argument `type()`: each resolves names or code given as strings; dataclasses and
  enum are not importable for the same reason); annotations compute nothing;
- of pytest only its assertion helpers; an `if __name__ == "__main__":` block is not run
  here, so it is not read.

A suite that steps outside is not run; `screen` says why, once per rule, with the line.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import types

# Not dataclasses (it builds code from field names and execs it) nor enum (its functional
# API writes into any module named by a string): each turns a string built at run time
# into code or a name, which no static rule can follow.
ALLOWED_IMPORTS = frozenset({
    "pytest", "math", "cmath", "itertools", "collections", "functools", "random", "string",
    "heapq", "bisect", "copy", "fractions", "decimal", "typing", "re", "statistics",
    "numbers", "array",
})
PYTEST_NAMES = frozenset({"raises", "approx", "mark", "skip", "fail", "xfail", "param",
                          "warns"})
RESOLVERS = frozenset({  # builtins that turn strings into names or code, or read files
    "eval", "exec", "compile", "__import__", "getattr", "setattr", "delattr", "vars",
    "globals", "locals", "open", "breakpoint", "input", "memoryview", "help",
})
BANNED_ATTRIBUTES = frozenset({
    "eval", "exec", "format", "format_map", "vformat", "get_field", "Formatter",
    "get_type_hints", "ForwardRef", "update_wrapper", "wraps", "singledispatch",
    "singledispatchmethod", "attrgetter", "methodcaller", "f_back", "f_globals", "f_locals",
    "f_code", "f_builtins", "f_trace", "tb_frame", "tb_next", "gi_frame", "gi_code",
    "cr_frame", "cr_code", "ag_frame", "ag_code", "traceback", "tb", "frame", "getrepr",
    "getsource", "importorskip", "monkeypatch", "mro", "bltns", "builtins", "global_enum",
    "make_dataclass",
})
ALLOWED_DUNDERS = frozenset({  # what a test's own helper classes define; never __getattr__,
    # __setattr__, __new__, __reduce__, __init_subclass__ or __set_name__
    "__name__", "__main__", "__init__", "__eq__", "__ne__", "__lt__", "__le__", "__gt__",
    "__ge__", "__hash__", "__repr__", "__str__", "__len__", "__iter__", "__next__",
    "__contains__", "__getitem__", "__setitem__", "__delitem__", "__call__", "__bool__",
    "__add__", "__sub__", "__mul__", "__truediv__", "__floordiv__", "__mod__", "__pow__",
    "__divmod__", "__neg__", "__pos__", "__abs__", "__invert__", "__radd__", "__rsub__",
    "__rmul__", "__and__", "__or__", "__xor__", "__lshift__", "__rshift__", "__iadd__",
    "__isub__", "__int__", "__float__", "__index__", "__round__", "__enter__", "__exit__",
    "__reversed__", "__missing__", "__copy__", "__deepcopy__", "__format__",
})
ANNOTATION_REFUSED = (ast.Call, ast.Lambda, ast.NamedExpr, ast.Await, ast.Yield,
                      ast.YieldFrom)
MAX_REASONS = 20


def _dangerous(value: object) -> bool:
    return isinstance(value, types.ModuleType) or any(
        value is getattr(builtins, name, None) for name in RESOLVERS)


def _module_api() -> tuple[dict[str, frozenset[str]], frozenset[str]]:
    """Per allowed module, the attributes a test may use; and every name that, on any of
    them, is a module or a name-resolving builtin (refused on any object)."""
    api: dict[str, frozenset[str]] = {}
    leading: set[str] = set()
    for name in sorted(ALLOWED_IMPORTS - {"pytest"}):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        public = getattr(module, "__all__", None) or [n for n in dir(module)
                                                      if not n.startswith("_")]
        values = vars(module)
        leading.update(n for n, v in values.items() if _dangerous(v))
        api[name] = frozenset(n for n in public if n in values and not _dangerous(values[n]))
    api["pytest"] = PYTEST_NAMES
    if "collections" in api:
        api["collections"] |= {"abc"}
    return api, frozenset(leading)


MODULE_API, LEADING = _module_api()
REFUSED_ATTRIBUTES = BANNED_ATTRIBUTES | (LEADING - ALLOWED_IMPORTS - {"abc"})


def _dunder(name: str) -> bool:
    return name.startswith("__") and name not in ALLOWED_DUNDERS


def _private(name: str) -> bool:
    return name.startswith("_") and name not in ALLOWED_DUNDERS


class _Screen(ast.NodeVisitor):
    def __init__(self, program_modules: frozenset[str]):
        self.programs = program_modules
        self.modules = ALLOWED_IMPORTS | program_modules
        self.aliases: dict[str, str] = {}  # local name -> allowed module it is bound to
        self.reasons: list[str] = []
        self._seen: set[str] = set()

    def refuse(self, node: ast.AST, why: str) -> None:
        if why not in self._seen and len(self.reasons) < MAX_REASONS:
            self._seen.add(why)
            self.reasons.append(f"line {getattr(node, 'lineno', 0)}: {why}")

    def _attribute_name(self, node: ast.AST, name: str) -> None:
        if _private(name) or name in REFUSED_ATTRIBUTES or name.startswith("co_"):
            self.refuse(node, f"uses the attribute {name}")

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            root = alias.name.split(".")[0]
            if root not in self.modules:
                self.refuse(node, f"imports {alias.name}")
            elif alias.asname:
                self.aliases[alias.asname] = alias.name
            else:
                self.aliases[root] = root

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if node.level or module.split(".")[0] not in self.modules:
            self.refuse(node, f"imports from {'.' * node.level}{module}")
            return
        api = MODULE_API.get(module)
        for alias in node.names:
            if alias.name == "*" and module not in self.programs:
                self.refuse(node, f"imports * from {module}")
            elif _private(alias.name) or alias.name in REFUSED_ATTRIBUTES \
                    or (api is not None and alias.name != "*" and alias.name not in api):
                self.refuse(node, f"imports {alias.name} from {module}")

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in RESOLVERS or _dunder(node.id):
            self.refuse(node, f"uses {node.id}")
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            if node.id.startswith("__"):
                self.refuse(node, f"assigns {node.id}")
            self.aliases.pop(node.id, None)  # rebinding a module's name

    def visit_If(self, node: ast.If) -> None:
        """`if __name__ == "__main__":` never runs here (the module is test_NAME, and no
        file may assign __name__): its body, often `pytest.main([__file__])`, is skipped."""
        test = node.test
        if isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) \
                and test.left.id == "__name__" and len(test.ops) == 1 \
                and isinstance(test.ops[0], ast.Eq) \
                and isinstance(test.comparators[0], ast.Constant) \
                and test.comparators[0].value == "__main__":
            for statement in node.orelse:
                self.visit(statement)
            return
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        if isinstance(node.func, ast.Name) and node.func.id == "type" \
                and (len(node.args) != 1 or node.keywords):
            self.refuse(node, "builds a class with type()")
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        self._attribute_name(node, node.attr)
        if isinstance(node.value, ast.Name) and node.value.id in self.aliases:
            module = self.aliases[node.value.id]
            api = MODULE_API.get(module)
            if api is not None and node.attr not in api:
                self.refuse(node, f"uses {module}.{node.attr}")
        self.generic_visit(node)

    def visit_MatchClass(self, node: ast.MatchClass) -> None:
        for name in node.kwd_attrs:
            self._attribute_name(node, name)
        self.generic_visit(node)

    def visit_keyword(self, node: ast.keyword) -> None:
        if node.arg is not None and _dunder(node.arg):
            self.refuse(node, f"passes a keyword {node.arg}")
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and "__" in node.value and node.value != "__main__":
            self.refuse(node, "has a string with a double underscore")

    def visit_Global(self, node: ast.Global) -> None:
        self.refuse(node, "declares a global")

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        if node.keywords:
            self.refuse(node, "gives a class keywords (a metaclass)")
        if _dunder(node.name):
            self.refuse(node, f"defines a class {node.name}")
        self.generic_visit(node)

    def _annotation(self, node: ast.AST | None) -> None:
        if node is not None and any(isinstance(part, ANNOTATION_REFUSED)
                                    for part in ast.walk(node)):
            self.refuse(node, "has an annotation that computes something")

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._annotation(node.annotation)
        self.generic_visit(node)

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        if _dunder(node.name):
            self.refuse(node, f"defines {node.name}")
        arguments = (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs,
                     *(a for a in (node.args.vararg, node.args.kwarg) if a is not None))
        for argument in arguments:
            if _dunder(argument.arg):
                self.refuse(node, f"has a parameter {argument.arg}")
            self._annotation(argument.annotation)
        self._annotation(node.returns)
        self.generic_visit(node)

    visit_FunctionDef = visit_AsyncFunctionDef = _function


def screen(code: str, program_modules: list[str]) -> dict:
    """{"ok": bool, "reasons": [...], "tests": number of test functions at a glance}."""
    try:
        tree = ast.parse(code)
    except Exception as error:  # SyntaxError, ValueError, RecursionError, MemoryError
        return {"ok": False, "reasons": [f"does not parse ({type(error).__name__})"],
                "tests": 0}
    checker = _Screen(frozenset(program_modules))
    try:
        checker.visit(tree)
    except RecursionError:
        return {"ok": False, "reasons": ["is nested too deeply"], "tests": 0}
    tests = sum(1 for node in ast.walk(tree)
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                and node.name.startswith("test"))
    return {"ok": not checker.reasons, "reasons": checker.reasons, "tests": tests}
