"""Single edits of a program's functions, by kind, for the weight-free baseline.

An `Edit` replaces one node of the module's tree (named by its pre-order number, see
`sites.slots`) with one node, or removes one statement. Edits are proposed only
inside function definitions, in a fixed order.

The kinds follow the operators of mutation testing tools such as cosmic-ray (binary,
comparison, boolean, unary and augmented-assignment operator replacement, number and
boolean replacement, break/continue swap, `not` insertion), plus the small fixes that
repair one-line bugs: off-by-one additions and slices, swapped arguments, operands and
tuple elements, names replaced by other names in scope (related builtins such as
any/all and min/max included), unwrapped calls and dropped operands, filled-in empty
results, added guards and deleted statements. Edits that cannot be a fix whatever the
program means (adding 1 to a sequence, slicing a value that is then mutated and thrown
away, swapping a range's bounds) are not proposed at all.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Iterator

from .scope import RELATED_BUILTINS
from .sites import FUNCTIONS, Site, Sites

# kind -> family; the prior backs off from a kind to its family when data are scarce
KINDS: dict[str, str] = {
    "binary_op": "operator", "binary_op_far": "operator", "boolean_op": "operator",
    "compare_boundary": "operator", "compare_flip": "operator", "compare_op": "operator",
    "unary_op": "operator", "augassign_op": "operator", "augassign_op_far": "operator",
    "add_not": "operator", "builtin_dual": "operator",
    "number": "constant", "bool": "constant", "fill_list": "constant",
    "add_one": "off_by_one", "drop_one": "off_by_one", "add_slice": "off_by_one",
    "drop_slice": "off_by_one",
    "swap_args": "swap", "swap_library_args": "swap", "swap_operands": "swap",
    "swap_elements": "swap",
    "name": "name", "unlike_name": "name", "callee": "name", "attribute": "name",
    "bool_to_name": "name",
    "drop_operand": "unwrap", "unwrap_call": "unwrap",
    "delete": "statement", "break_continue": "statement", "add_guard": "statement",
}

FAMILIES: tuple[str, ...] = tuple(dict.fromkeys(KINDS.values()))

_BINOPS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow,
           ast.LShift, ast.RShift, ast.BitOr, ast.BitXor, ast.BitAnd)
# operators easily confused with each other: a replacement within a group is "near",
# across groups "far", and the prior tells the two apart
_BINOP_GROUPS = ((ast.Add, ast.Sub), (ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow),
                 (ast.BitOr, ast.BitXor, ast.BitAnd), (ast.LShift, ast.RShift))
_COMMUTATIVE = (ast.Mult, ast.BitOr, ast.BitXor, ast.BitAnd)
_COMPARE_GROUPS = ((ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE),
                   (ast.Is, ast.IsNot), (ast.In, ast.NotIn))
_ORDERING = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)
# < and <= (> and >=) differ only at the boundary; < and > (<= and >=) point opposite ways
_COMPARE_KINDS = {
    **{(a, b): "compare_boundary" for a, b in ((ast.Lt, ast.LtE), (ast.LtE, ast.Lt),
                                               (ast.Gt, ast.GtE), (ast.GtE, ast.Gt))},
    **{(a, b): "compare_flip" for a, b in ((ast.Lt, ast.Gt), (ast.Gt, ast.Lt),
                                           (ast.LtE, ast.GtE), (ast.GtE, ast.LtE))},
}
_UNARY = {ast.USub: (ast.UAdd,), ast.UAdd: (ast.USub,), ast.Invert: (ast.USub,), ast.Not: ()}
# builtins whose result can stand where their argument stood (unwrapping is plausible)
_VALUE_PRESERVING = frozenset({"abs", "min", "max", "sorted", "reversed", "list", "tuple",
                               "set", "int", "float", "round"})
_CONDITIONS = {(ast.If, "test"), (ast.While, "test"), (ast.Assert, "test"),
               (ast.IfExp, "test"), (ast.comprehension, "ifs")}


@dataclass(frozen=True)
class Edit:
    """One change: `replacement` goes where node number `index` was (empty: removed).

    `loop_exit`: the edit deletes what makes a `while` loop progress or end.
    """

    kind: str
    index: int
    replacement: tuple[ast.AST, ...]
    loop_exit: bool = False


def enumerate_edits(tree: ast.Module) -> list[Edit]:
    """All single edits inside the module's functions, in a deterministic order."""
    edits: list[Edit] = []
    for index, site in Sites(tree):
        if isinstance(site.node, ast.stmt):
            for kind, replacement in _statement_edits(site):
                exits = site.loop_exit and kind in ("delete", "break_continue")
                edits.append(Edit(kind, index, replacement, exits))
        elif isinstance(site.node, ast.expr):
            edits += [Edit(kind, index, (new,)) for kind, new in _expression_edits(site)]
    return edits


def _one() -> ast.Constant:
    return ast.Constant(value=1)


def _number(value: int) -> ast.expr:
    """A literal as the parser builds it (a negative number is a unary minus)."""
    if value < 0:
        return ast.UnaryOp(op=ast.USub(), operand=ast.Constant(value=-value))
    return ast.Constant(value=value)


def _load(name: str) -> ast.Name:
    return ast.Name(id=name, ctx=ast.Load())


def _is_int(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is int


def _plus_minus_one(node: ast.expr) -> Iterator[tuple[str, ast.expr]]:
    for op in (ast.Add, ast.Sub):
        yield "add_one", ast.BinOp(left=node, op=op(), right=_one())


def _binop_kind(current: ast.operator, replacement: type, near: str, far: str) -> str:
    same = any(isinstance(current, g) and replacement in g for g in _BINOP_GROUPS)
    return near if same else far


def _expression_edits(site: Site) -> Iterator[tuple[str, ast.AST]]:
    """Edits of one expression node, in a fixed order."""
    node = site.node
    handler = _BY_TYPE.get(type(node))
    if handler is not None:
        yield from handler(node, site)
    if _index_like(site):
        yield from _plus_minus_one(node)
    if (type(site.parent), site.field) in _CONDITIONS:
        if not (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not)):
            yield "add_not", ast.UnaryOp(op=ast.Not(), operand=node)


def _binop_edits(node: ast.BinOp, site: Site) -> Iterator[tuple[str, ast.AST]]:
    for op in _BINOPS:
        if not isinstance(node.op, op):
            kind = _binop_kind(node.op, op, "binary_op", "binary_op_far")
            yield kind, ast.BinOp(left=node.left, op=op(), right=node.right)
    if not isinstance(node.op, _COMMUTATIVE):
        yield "swap_operands", ast.BinOp(left=node.right, op=node.op, right=node.left)
    off_by_one = isinstance(node.op, (ast.Add, ast.Sub)) and _is_int(node.right)
    if off_by_one and node.right.value == 1:
        yield "drop_one", node.left
    # dropping the variable part of an expression and keeping a literal fixes nothing
    for kept in (node.left, node.right):
        if not isinstance(kept, ast.Constant) and not (off_by_one and kept is node.left):
            yield "drop_operand", kept


def _compare_edits(node: ast.Compare, site: Site) -> Iterator[tuple[str, ast.AST]]:
    for i, current in enumerate(node.ops):
        group = next(g for g in _COMPARE_GROUPS if isinstance(current, g))
        for op in group:
            if not isinstance(current, op):
                ops = list(node.ops)
                ops[i] = op()
                kind = _COMPARE_KINDS.get((type(current), op), "compare_op")
                yield kind, ast.Compare(node.left, ops, node.comparators)
    if len(node.ops) == 1 and isinstance(node.ops[0], _ORDERING):
        yield "swap_operands", ast.Compare(node.comparators[0], node.ops, [node.left])


def _boolop_edits(node: ast.BoolOp, site: Site) -> Iterator[tuple[str, ast.AST]]:
    other = ast.Or() if isinstance(node.op, ast.And) else ast.And()
    yield "boolean_op", ast.BoolOp(op=other, values=node.values)
    for i in range(len(node.values)):
        rest = node.values[:i] + node.values[i + 1:]
        yield "drop_operand", rest[0] if len(rest) == 1 else ast.BoolOp(node.op, rest)


def _unary_edits(node: ast.UnaryOp, site: Site) -> Iterator[tuple[str, ast.AST]]:
    yield "unary_op", node.operand
    for op in _UNARY.get(type(node.op), ()):
        yield "unary_op", ast.UnaryOp(op=op(), operand=node.operand)


def _constant_edits(node: ast.Constant, site: Site) -> Iterator[tuple[str, ast.AST]]:
    if type(node.value) is int:
        negated = isinstance(site.parent, ast.UnaryOp) and isinstance(site.parent.op, ast.USub)
        for value in (node.value + 1, node.value - 1):
            if value >= 0 or not negated:
                yield "number", _number(value)
    elif type(node.value) is bool:
        yield "bool", ast.Constant(value=not node.value)
        if (type(site.parent), site.field) in _CONDITIONS:
            for name in site.scope.values:
                yield "bool_to_name", _load(name)


def _list_edits(node: ast.List, site: Site) -> Iterator[tuple[str, ast.AST]]:
    # a returned empty list is a base case that may lack its element; an empty list
    # assigned to a name is an accumulator, and starts empty on purpose
    if node.elts or not isinstance(site.parent, (ast.Return, ast.Yield)):
        return
    yield "fill_list", ast.List(elts=[ast.List(elts=[], ctx=ast.Load())], ctx=ast.Load())
    for name in site.scope.params:
        yield "fill_list", ast.List(elts=[_load(name)], ctx=ast.Load())


def _tuple_edits(node: ast.Tuple, site: Site) -> Iterator[tuple[str, ast.AST]]:
    for i in range(len(node.elts)):
        for j in range(i + 1, len(node.elts)):
            elts = list(node.elts)
            elts[i], elts[j] = elts[j], elts[i]
            yield "swap_elements", ast.Tuple(elts=elts, ctx=node.ctx)


def _call_edits(node: ast.Call, site: Site) -> Iterator[tuple[str, ast.AST]]:
    args = node.args
    callee = node.func.id if isinstance(node.func, ast.Name) else ""
    own = callee in site.names.defined
    if not any(isinstance(a, ast.Starred) for a in args):
        kind = "swap_args" if own else "swap_library_args"
        for i in range(0 if callee == "range" else len(args)):  # swapped bounds: empty
            for j in range(i + 1, len(args)):
                swapped = list(args)
                swapped[i], swapped[j] = swapped[j], swapped[i]
                yield kind, ast.Call(node.func, swapped, node.keywords)
        if own or callee in _VALUE_PRESERVING:
            for arg in args:
                yield "unwrap_call", arg
    shifted = (isinstance(site.parent, ast.BinOp) and site.field == "left"
               and isinstance(site.parent.op, (ast.Add, ast.Sub)) and _is_int(site.parent.right))
    if callee == "len" and not shifted:  # in len(x) - k, the number edit covers it
        yield from _plus_minus_one(node)


def _subscript_edits(node: ast.Subscript, site: Site) -> Iterator[tuple[str, ast.AST]]:
    if isinstance(node.slice, ast.Slice) and isinstance(node.ctx, ast.Load):
        yield "drop_slice", node.value


def _attribute_edits(node: ast.Attribute, site: Site) -> Iterator[tuple[str, ast.AST]]:
    if not isinstance(node.ctx, ast.Load):
        return
    method = isinstance(site.parent, ast.Call) and site.field == "func"
    for attr in (site.names.methods if method else site.names.fields):
        if attr != node.attr:
            yield "attribute", ast.Attribute(value=node.value, attr=attr, ctx=node.ctx)


def _name_edits(node: ast.Name, site: Site) -> Iterator[tuple[str, ast.AST]]:
    if not isinstance(node.ctx, ast.Load):
        return
    scope = site.scope
    if isinstance(site.parent, ast.Call) and site.field == "func":
        if node.id in scope.callables:
            duals = RELATED_BUILTINS.get(node.id, ())
            for name in scope.callables:
                if name != node.id:
                    yield ("builtin_dual" if name in duals else "callee"), _load(name)
        return
    if node.id not in scope.values:
        return
    for name in scope.values:
        if name != node.id:
            yield ("name" if scope.alike(name, node.id) else "unlike_name"), _load(name)
    if node.id in scope.sequences and _consumed(site):
        bounds: list[ast.expr] = [_one()] + [_load(n) for n in scope.integers if n != node.id]
        shapes = [ast.Slice(lower=b) for b in bounds] + [ast.Slice(upper=b) for b in bounds[1:]]
        shapes += [ast.Slice(upper=_number(-1)), ast.Slice(step=_number(-1))]
        for shape in shapes:
            yield "add_slice", ast.Subscript(value=node, slice=shape, ctx=ast.Load())


_BY_TYPE = {
    ast.BinOp: _binop_edits, ast.Compare: _compare_edits, ast.BoolOp: _boolop_edits,
    ast.UnaryOp: _unary_edits, ast.Constant: _constant_edits, ast.List: _list_edits,
    ast.Tuple: _tuple_edits, ast.Call: _call_edits, ast.Subscript: _subscript_edits,
    ast.Attribute: _attribute_edits, ast.Name: _name_edits,
}


def _consumed(site: Site) -> bool:
    """Where part of a sequence could have been meant: a loop's source, an argument of a
    call whose result is used, a returned value. A slice is a copy: slicing what a
    method or a statement-level call mutates, or what is indexed, cannot be a fix."""
    parent, field = site.parent, site.field
    if isinstance(parent, ast.Call) and field == "args":
        return not isinstance(site.above.parent, ast.Expr)
    return ((isinstance(parent, (ast.For, ast.comprehension)) and field == "iter")
            or isinstance(parent, (ast.Return, ast.Yield)))


def _index_like(site: Site) -> bool:
    """Subscript indices, slice bounds, range() arguments and arguments of the module's
    own functions, when they are not sequences: where adding or subtracting 1 is a
    plausible fix."""
    node, parent, field, scope = site.node, site.parent, site.field, site.scope
    if not isinstance(node, (ast.Name, ast.Attribute, ast.Subscript, ast.Call, ast.BinOp)):
        return False
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
        if _is_int(node.right):
            return False  # x - k: the number edit covers it
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "len":
        return False  # handled with the call itself
    if isinstance(node, ast.Name) and node.id in scope.sequences and node.id not in scope.integers:
        return False
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
        return False
    if isinstance(parent, ast.Subscript) and field == "slice" or isinstance(parent, ast.Slice):
        return True
    if isinstance(parent, ast.Tuple):
        return isinstance(site.above.parent, ast.Subscript) and site.above.field == "slice"
    if isinstance(parent, ast.Call) and field == "args" and isinstance(parent.func, ast.Name):
        return parent.func.id == "range" or parent.func.id in site.names.defined
    return False


def _statement_edits(site: Site) -> Iterator[tuple[str, tuple[ast.AST, ...]]]:
    node = site.node
    if isinstance(node, ast.AugAssign):
        for op in _BINOPS:
            if not isinstance(node.op, op):
                kind = _binop_kind(node.op, op, "augassign_op", "augassign_op_far")
                yield kind, (ast.AugAssign(node.target, op(), node.value),)
    elif isinstance(node, ast.Break):
        yield "break_continue", (ast.Continue(),)
    elif isinstance(node, ast.Continue):
        yield "break_continue", (ast.Break(),)
    elif isinstance(node, ast.If):
        yield from _guard_edits(node, site)
    docstring = (site.slot.pos == 0 and isinstance(node, ast.Expr)
                 and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str))
    if not isinstance(node, (*FUNCTIONS, ast.ClassDef, ast.Pass)) and not docstring:
        yield "delete", ()


def _guard_edits(node: ast.If, site: Site) -> Iterator[tuple[str, tuple[ast.AST, ...]]]:
    """`base is None or test` guards an attribute access in `test`, so it comes first;
    an emptiness check `test or not seq` reads naturally after the condition."""
    bases = [a.value.id for a in ast.walk(node.test)
             if isinstance(a, ast.Attribute) and isinstance(a.value, ast.Name)]
    tests = [[ast.Compare(_load(b), [ast.Is()], [ast.Constant(None)]), node.test]
             for b in dict.fromkeys(bases)]
    tests += [[node.test, ast.UnaryOp(op=ast.Not(), operand=_load(n))]
              for n in site.scope.sequences]
    for values in tests:
        test = ast.BoolOp(op=ast.Or(), values=values)
        yield "add_guard", (ast.If(test=test, body=node.body, orelse=node.orelse),)
