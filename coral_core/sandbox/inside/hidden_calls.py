"""What bandit cannot see: calls whose target is named only when the program runs.

bandit matches calls by the names written in the source (`subprocess.call(..., shell=True)`,
`eval(...)`, `pickle.loads`). A program that builds the names at run time
(`__import__("sub" + "process")`, `getattr(builtins, "ev" + "al")`) runs the same calls
unseen: a red-team pass took a program that bandit scored 0.5 to 1.0 that way, and laundered
unstyled code through `exec` of a string. Honest programs name what they call; each of
these is a finding of medium severity, counted with bandit's:

- CORAL1 `__import__(...)`, or `importlib.import_module` of a name that is not a literal
- CORAL2 `getattr` / `setattr` / `delattr` of a name that is not a literal, on a module, on
  `builtins` or on `__builtins__`
- CORAL3 `exec`, `eval`, `compile` or `__import__` taken as a value (aliased, passed on,
  looked up) rather than called by its name, which bandit checks
- CORAL4 `sys.modules`, `globals()`, `vars(...)` or `__builtins__` indexed by a name that is
  not a literal

This file runs in the analysis worker (inside/lint.py): standard library only.
"""

import ast

DYNAMIC = frozenset(("exec", "eval", "compile", "__import__"))
ATTRIBUTE_CALLS = frozenset(("getattr", "setattr", "delattr"))
BUILTIN_MODULES = frozenset(("builtins", "__builtins__"))


def _literal(node):
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def _called_name(node):
    """The name a call's target is written as (`f` of `f(...)`, `g` of `m.g(...)`)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _modules(tree):
    """Names the program binds to modules with import statements."""
    names = set(BUILTIN_MODULES)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return names


def _is_module(node, modules):
    if isinstance(node, ast.Name):
        return node.id in modules
    if isinstance(node, ast.Call):
        return _called_name(node.func) in ("__import__", "import_module")
    if isinstance(node, ast.Subscript):  # sys.modules[...]
        return isinstance(node.value, ast.Attribute) and node.value.attr == "modules"
    return False


def _indexes_a_namespace(node):
    target = node.value
    if isinstance(target, ast.Attribute) and target.attr == "modules":
        return True
    if isinstance(target, ast.Name) and target.id == "__builtins__":
        return True
    return isinstance(target, ast.Call) and _called_name(target.func) in ("globals", "vars")


def findings(tree):
    """[(line, code, message)] for `tree`, a parsed program, in source order."""
    modules, found, called = _modules(tree), [], set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            called.add(id(node.func))
            name = _called_name(node.func)
            if name == "__import__" or (name == "import_module" and not (
                    node.args and _literal(node.args[0]))):
                found.append((node.lineno, "CORAL1", "a module imported by a name built at "
                              "run time"))
            elif name in ATTRIBUTE_CALLS and len(node.args) >= 2 and not _literal(
                    node.args[1]) and _is_module(node.args[0], modules):
                found.append((node.lineno, "CORAL2", "an attribute of a module named at run "
                              "time"))
        elif isinstance(node, ast.Subscript) and not _literal(node.slice) \
                and _indexes_a_namespace(node):
            found.append((node.lineno, "CORAL4", "a namespace indexed by a name built at "
                          "run time"))
    for node in ast.walk(tree):
        if id(node) in called:
            continue
        if (isinstance(node, ast.Name) and node.id in DYNAMIC
                and isinstance(node.ctx, ast.Load)) or (
                isinstance(node, ast.Attribute) and node.attr in DYNAMIC):
            found.append((node.lineno, "CORAL3", "%s taken as a value, not called by its "
                          "name" % (node.id if isinstance(node, ast.Name) else node.attr)))
    return sorted(found)
