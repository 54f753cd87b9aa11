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
  a module's name (the program's too) is used only as `module.NAME`: never passed,
  stored, listed or returned, and never bound to anything else anywhere in the file (the
  check does not follow control flow, so a name is a module everywhere or nowhere);
- no private or dunder attribute, keyword, parameter, function or class name (`_sys`,
  `__code__`, `def __getattr__`; helper classes may define the usual operators), none in a
  `match` class pattern; no `co_*`, frame or traceback attribute; no string holding a
  double underscore; no assignment to a dunder name;
- no dynamic attribute access or code execution (`getattr`, `eval`, `.format` but on a
  string literal whose fields name no attribute or item (`"got {!r}".format(x)`),
  `functools.update_wrapper`, `functools.singledispatch`, `typing.get_type_hints`,
  three-argument `type()`: each resolves names or code given as strings; dataclasses and
  enum are not importable for the same reason); annotations compute nothing; `type(x)`
  only inside a comparison (it may be the metaclass itself); `super()` only without
  arguments (`super(C, x)` reaches what a class overrides); no class pattern with
  positional sub-patterns (they read the attributes `__match_args__` names, which can be
  computed); no string that names an interpreter attribute (`co_code`, `tb_frame`);
- of pytest only its assertion helpers; an `if __name__ == "__main__":` block is not run
  here, so it is not read.

A suite that steps outside is not run; `screen` says why, once per rule, with the line.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import string
import types

# Not dataclasses (it builds code from field names and execs it) nor enum (its functional
# API writes into any module named by a string): each turns a string built at run time
# into code or a name, which no static rule can follow.
ALLOWED_IMPORTS = frozenset({
    "pytest", "math", "cmath", "itertools", "collections", "functools", "random", "string",
    "heapq", "bisect", "copy", "fractions", "decimal", "typing", "re", "statistics",
    "numbers", "array",
})
# `warns` was refused while the program ran in the tests' process (a recorded warning
# carried the program's line number, which a fifth red-team pass read); its warnings now
# stay in its own process.
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
    "make_dataclass", "PytestPluginManager", "import_plugin", "get_plugin", "pluginmanager",
    "MonkeyPatch", "Pytester",
    "SystemRandom",  # the OS's randomness: every other generator draws the run's seed
})
INTERNAL_PREFIXES = ("co_", "tb_", "gi_", "cr_", "ag_", "f_back", "f_globals", "f_locals",
                     "f_code", "f_builtins", "f_trace", "f_lasti", "f_lineno", "lineno")
SUBMODULES = ("collections.abc",)  # importable on their own, each with its API
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
    for name in sorted((ALLOWED_IMPORTS - {"pytest"}) | set(SUBMODULES)):
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


def _plain_template(text: str) -> bool:
    """A format string whose fields name no attribute or item (`"{} != {0!r:>8}"`): its
    `.format` reads nothing by a name written in a string."""
    try:
        fields = list(string.Formatter().parse(text))
    except ValueError:
        return False
    for _, field, spec, _ in fields:
        if field is not None and ("." in field or "[" in field):
            return False
        if spec and "{" in spec and not _plain_template(spec):
            return False
    return True


def _private(name: str) -> bool:
    return name.startswith("_") and name not in ALLOWED_DUNDERS


def _main_block(node: ast.AST) -> bool:
    """`if __name__ == "__main__":`, which never runs here."""
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and isinstance(test, ast.Compare) \
        and isinstance(test.left, ast.Name) and test.left.id == "__name__" \
        and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq) \
        and isinstance(test.comparators[0], ast.Constant) \
        and test.comparators[0].value == "__main__"


def _module_names(tree: ast.AST) -> dict[str, set[str]]:
    """Every name an import binds to a module (a main block's aside), whatever the order."""
    names: dict[str, set[str]] = {}
    todo = [tree]
    while todo:
        node = todo.pop()
        if _main_block(node):
            todo.extend(node.orelse)  # type: ignore[attr-defined]
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                name = alias.asname or alias.name.split(".")[0]
                names.setdefault(name, set()).add(alias.name if alias.asname
                                                  else alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            for alias in node.names:
                if f"{node.module}.{alias.name}" in MODULE_API:
                    names.setdefault(alias.asname or alias.name, set()).add(
                        f"{node.module}.{alias.name}")
        todo.extend(ast.iter_child_nodes(node))
    return names


class _Screen(ast.NodeVisitor):
    def __init__(self, program_modules: frozenset[str], modules: dict[str, set[str]]):
        self.programs = program_modules
        self.modules = ALLOWED_IMPORTS | program_modules
        # local name -> the module it is bound to (one per name, everywhere in the file)
        self.aliases: dict[str, str] = {n: next(iter(m)) for n, m in modules.items()}
        self.ambiguous = {n for n, m in modules.items() if len(m) > 1}
        self._module_ok: set[int] = set()  # module-valued nodes that are `.value` of `.NAME`
        self._type_ok: set[int] = set()  # `type` names called once inside a comparison
        self._super_ok: set[int] = set()  # `super` names called without arguments
        self.reasons: list[str] = []
        self._seen: set[str] = set()

    def refuse(self, node: ast.AST, why: str) -> None:
        if why not in self._seen and len(self.reasons) < MAX_REASONS:
            self._seen.add(why)
            self.reasons.append(f"line {getattr(node, 'lineno', 0)}: {why}")

    def _attribute_name(self, node: ast.AST, name: str) -> None:
        if _private(name) or name in REFUSED_ATTRIBUTES or name.startswith(INTERNAL_PREFIXES):
            self.refuse(node, f"uses the attribute {name}")

    def _known_module(self, name: str) -> bool:
        return name in MODULE_API or name in self.programs

    def _module_of(self, node: ast.AST) -> str | None:
        """The module an expression names (`np`, `collections.abc`), or None."""
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            return self.aliases.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self._module_of(node.value)
            if base is not None and f"{base}.{node.attr}" in MODULE_API:
                return f"{base}.{node.attr}"
        return None

    def _binds(self, node: ast.AST, name: str) -> None:
        """`name` is bound to something other than a module here."""
        if name in self.aliases:
            self.refuse(node, f"binds the module name {name} to something else")

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            root = alias.name.split(".")[0]
            if root not in self.modules or not self._known_module(alias.name):
                self.refuse(node, f"imports {alias.name}")
            name = alias.asname or root
            if name in self.ambiguous:
                self.refuse(node, f"binds the name {name} to two modules")

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if node.level or module.split(".")[0] not in self.modules:
            self.refuse(node, f"imports from {'.' * node.level}{module}")
            return
        if not self._known_module(module):
            self.refuse(node, f"imports from {module}")
            return
        api = MODULE_API.get(module)
        for alias in node.names:
            if alias.name == "*" and module not in self.programs:
                self.refuse(node, f"imports * from {module}")
            elif _private(alias.name) or alias.name in REFUSED_ATTRIBUTES \
                    or (api is not None and alias.name != "*" and alias.name not in api):
                self.refuse(node, f"imports {alias.name} from {module}")
            elif f"{module}.{alias.name}" not in MODULE_API:  # a submodule is an alias
                self._binds(node, alias.asname or alias.name)

    def _bare_module(self, node: ast.AST, module: str | None) -> None:
        if module is not None and id(node) not in self._module_ok:
            self.refuse(node, f"uses the module {module} other than as {module}.NAME")

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in RESOLVERS or _dunder(node.id):
            self.refuse(node, f"uses {node.id}")
        if node.id == "type" and id(node) not in self._type_ok:
            # type(x) may be the metaclass itself (x a class): held or called again, it
            # builds classes from names computed at run time
            self.refuse(node, "uses type() other than as `type(x) is ...`")
        if node.id == "super" and id(node) not in self._super_ok:
            # super(Class, obj) reaches the methods a class overrides: the C generator's
            # own seed(), which draws the OS's randomness past the run's seed
            self.refuse(node, "uses super() other than as `super().NAME` in a method")
        self._bare_module(node, self._module_of(node))
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            if node.id.startswith("__"):
                self.refuse(node, f"assigns {node.id}")
            self._binds(node, node.id)

    def visit_If(self, node: ast.If) -> None:
        """`if __name__ == "__main__":` never runs here (the module is test_NAME, and no
        file may assign __name__): its body, often `pytest.main([__file__])`, is skipped."""
        if _main_block(node):
            for statement in node.orelse:
                self.visit(statement)
            return
        self.generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> None:
        for operand in (node.left, *node.comparators):  # `type(x) is int`: a probe, nothing more
            if isinstance(operand, ast.Call) and isinstance(operand.func, ast.Name) \
                    and operand.func.id == "type" and len(operand.args) == 1 \
                    and not operand.keywords:
                self._type_ok.add(id(operand.func))
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        if isinstance(node.func, ast.Name) and node.func.id == "type" \
                and (len(node.args) != 1 or node.keywords):
            self.refuse(node, "builds a class with type()")
        if isinstance(node.func, ast.Name) and node.func.id == "super" \
                and not node.args and not node.keywords:
            self._super_ok.add(id(node.func))
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if not (node.attr == "format" and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str) and _plain_template(node.value.value)):
            self._attribute_name(node, node.attr)
        self._bare_module(node, self._module_of(node))
        module = self._module_of(node.value)
        if module is not None:
            self._module_ok.add(id(node.value))
            api = MODULE_API.get(module)
            if module in self.programs:  # the program's own names, never a module it imported
                if node.attr in ALLOWED_IMPORTS or node.attr in LEADING:
                    self.refuse(node, f"uses {module}.{node.attr}")
            elif api is None or node.attr not in api:
                self.refuse(node, f"uses {module}.{node.attr}")
        self.generic_visit(node)

    def visit_MatchClass(self, node: ast.MatchClass) -> None:
        if node.patterns:  # positional sub-patterns read the attributes that the class's
            # __match_args__ names: strings that can be built at run time
            self.refuse(node, "matches a class pattern by position")
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
        if isinstance(node.value, str) and node.value.startswith(INTERNAL_PREFIXES):
            self.refuse(node, f"has the string {node.value!r}, an interpreter attribute's name")

    def visit_Global(self, node: ast.Global) -> None:
        self.refuse(node, "declares a global")

    def _named(self, node: ast.ExceptHandler | ast.MatchAs | ast.MatchStar) -> None:
        """`except E as NAME`, `case ... as NAME`, `case [*NAME]`: bindings too."""
        if node.name:
            self._binds(node, node.name)
        self.generic_visit(node)

    visit_ExceptHandler = visit_MatchAs = visit_MatchStar = _named

    def visit_MatchMapping(self, node: ast.MatchMapping) -> None:
        if node.rest:
            self._binds(node, node.rest)
        self.generic_visit(node)

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self._arguments(node, node.args)
        self.generic_visit(node)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._binds(node, node.name)
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

    def _arguments(self, node: ast.AST, args: ast.arguments) -> None:
        arguments = (*args.posonlyargs, *args.args, *args.kwonlyargs,
                     *(a for a in (args.vararg, args.kwarg) if a is not None))
        for argument in arguments:
            if _dunder(argument.arg):
                self.refuse(node, f"has a parameter {argument.arg}")
            self._binds(node, argument.arg)
            self._annotation(argument.annotation)

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        if _dunder(node.name):
            self.refuse(node, f"defines {node.name}")
        self._binds(node, node.name)
        self._arguments(node, node.args)
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
    try:
        checker = _Screen(frozenset(program_modules), _module_names(tree))
        checker.visit(tree)
    except RecursionError:
        return {"ok": False, "reasons": ["is nested too deeply"], "tests": 0}
    tests = sum(1 for node in ast.walk(tree)
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                and node.name.startswith("test"))
    return {"ok": not checker.reasons, "reasons": checker.reasons, "tests": tests}
