"""Coral's test-generation harness: which tests a model-written pytest file holds, and how
pytest's marks say to run each, by pytest's own rules.

This file is not imported by Coral: its text is a support module of the sandbox child
(`coral_testgen_collection`), used by tests_side.py in the tests' process. Red-team passes
compared files with pytest 9 and found every place where reading the rules otherwise
favoured the file (a test that fails on the correct program left uncollected, skipped or
passed scores bug_revealed 1.0); docs/testgen.md lists what is followed.

Collected: functions named test* (and what pytest unwraps to one: a bound method in a
class (at module level pytest errors on its `self`, and so does Coral), a
functools.partial, a decorator's `__wrapped__`), classes named Test* without __init__ or
__new__, nested ones too, with their test* methods, static and class methods and those
they inherit (a base class's first); the program's function imported under a test* name
is an error (pytest would ask for its arguments as fixtures).
"""

import collections
import functools
import inspect
import itertools
import sys
import types

import coral_testgen_proxy as proxy

ID_CHARS = 200

# One test. `obj`: what pytest calls (at class level, looked up on an instance by
# `attribute`); `function`: the plain function behind it (its marks, async or generator);
# `state`: "" (run it), "skip", or "error: WHY"; `marks`: the test's own first, then its
# parameter set's, its classes' (with their bases') and the module's; `scopes`: the
# (path, class) pairs it lies in, outermost first, whose xunit setups apply to it (a class
# reached under two names is two scopes, as in pytest).
Item = collections.namedtuple("Item", "test_id function obj owner attribute arguments state "
                                      "marks scopes")


def collect(module):
    """An Item per test, in pytest's order, with ids made unique as pytest makes them."""
    return _unique(_collect(module, module, None, "", ()))


def outlook(marks):
    """(skipped, xfail) as pytest reads the marks (nearest first): skipif, then skip, then
    the first xfail whose condition holds, as (strict, raises, run) or None. A boolean
    condition needs reason= (pytest's error), a string one is Coral's error."""
    for mark in marks:
        if mark.name == "skipif" and any(_holds(mark, c) for c in _conditions(mark)):
            return True, None
    for mark in marks:
        if mark.name == "skip":
            if mark.args:  # pytest's TypeError: skip(False, ...) meant skipif
                raise ValueError("skip() takes no positional arguments; maybe you meant "
                                 "pytest.mark.skipif?")
            return True, None
    for mark in marks:
        if mark.name == "xfail" and any(_holds(mark, c) for c in _conditions(mark)):
            kwargs = mark.kwargs
            return False, (bool(kwargs.get("strict", False)), kwargs.get("raises"),
                           kwargs.get("run", True))
    return False, None


def _conditions(mark):
    if "condition" in mark.kwargs:
        return (mark.kwargs["condition"],)
    return tuple(mark.args) or (True,)


def _holds(mark, condition):
    if isinstance(condition, str):
        raise ValueError("%s with a string condition is not supported" % mark.name)
    if ("condition" in mark.kwargs or mark.args) and mark.kwargs.get("reason") is None:
        raise ValueError("Error evaluating %r: you need to specify reason=STRING when "
                         "using booleans as conditions." % mark.name)
    return bool(condition)


def _marks(*owners):
    """The marks of `owners`, in order; a class's include its bases' (pytest 9 reads them
    along the MRO)."""
    marks = []
    for owner in owners:
        places = owner.__mro__ if isinstance(owner, type) else (owner,)
        for place in places:
            found = vars(place).get("pytestmark", []) if isinstance(place, type) else getattr(
                place, "pytestmark", [])
            marks.extend(found if isinstance(found, list) else [found])
    return marks


def _parameter_sets(mark):
    args, kwargs = list(mark.args), dict(mark.kwargs)
    if kwargs.get("indirect"):
        raise ValueError("parametrize: indirect parameters need fixtures, which are not "
                         "provided")
    names = args[0] if args else kwargs.get("argnames")
    values = args[1] if len(args) > 1 else kwargs.get("argvalues")
    # only names given as one string make each value a parameter of its own (pytest's
    # force_tuple): ("n",) takes (10,) as n=10
    single = isinstance(names, str)
    if single:
        names = [n.strip() for n in names.split(",") if n.strip()]
    names, sets = list(names), []
    single = single and len(names) == 1
    ids = kwargs.get("ids")
    ids = list(ids) if isinstance(ids, (list, tuple)) else []
    for index, value in enumerate(list(values)):
        marks = ()
        given = ids[index] if index < len(ids) else None
        label = given if isinstance(given, str) else str(index)
        if type(value).__name__ == "ParameterSet":  # pytest.param(...)
            marks, label = tuple(value.marks), value.id or str(index)
            row = tuple(value.values)
        elif single:
            row = (value,)
        else:
            row = tuple(value)
        if len(row) != len(names):
            raise ValueError("parametrize: %d names but %d values" % (len(names), len(row)))
        sets.append((dict(zip(names, row)), label, marks))
    return sets


def _expand(name, obj, function, owner, attribute, module, scopes):
    """collect's Items for one test function (one per parameter set)."""
    own = _marks(function)
    rest = _marks(*(cls for _, cls in reversed(scopes)), module)

    def item(test_id, arguments, state, marks):
        return Item(test_id, function, obj, owner, attribute, arguments, state, marks, scopes)

    if inspect.isgeneratorfunction(function):  # pytest refuses it (it passed here: the
        return [item(name, {}, "error: 'yield' keyword is allowed in fixtures, but not in "
                               "tests", own + rest)]  # call only made the generator)
    try:
        groups = [_parameter_sets(m) for m in own + rest if m.name == "parametrize"]
        names = [n for group in groups for n in (group[0][0] if group else {})]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError("parametrize: duplicate argument %r" % twice[0])
        outlook(own + rest)
    except Exception as error:  # a malformed mark: the test errors
        return [item(name, {}, "error: %s" % describe(error), own + rest)]
    items = []
    for combination in itertools.product(*groups):
        arguments, labels, extra = {}, [], []
        for values, label, its_marks in combination:
            arguments.update(values)
            labels.append(label)
            extra.extend(its_marks)
        case = [*own, *extra, *rest]  # pytest: the function's marks, then the parameters'
        try:
            skipped, xfail = outlook(case)
            # xfail(run=False) is decided before any setup, as in pytest
            state = "skip" if skipped or (xfail is not None and not xfail[2]) else ""
        except Exception as error:
            state = "error: %s" % describe(error)
        test_id = (name + ("[%s]" % "-".join(labels) if labels else ""))[:ID_CHARS]
        items.append(item(test_id, arguments, state, case))
    return items


def _unique(items):
    """Repeated ids get a suffix each, as pytest gives them ([a] twice is [a0] and [a1])."""
    ids = [item.test_id for item in items]
    counts, seen, unique = collections.Counter(ids), {}, []
    for item in items:
        test_id = item.test_id
        if counts[test_id] > 1:
            k = seen[test_id] = seen.get(test_id, -1) + 1
            test_id = test_id[:-1] + "%d]" % k if test_id.endswith("]") else test_id + str(k)
        unique.append(item._replace(test_id=test_id))
    return unique


def _members(container):
    """(name, value) as pytest walks them: a class's attributes with those it inherits,
    each name once (the nearest), a base class's before its subclass's."""
    if not isinstance(container, type):
        return list(vars(container).items())
    seen, groups = set(), []
    for klass in container.__mro__:
        group = []
        for name, value in list(vars(klass).items()):
            if name not in seen:
                seen.add(name)
                group.append((name, value))
        groups.append(group)
    return [pair for group in reversed(groups) for pair in group]


def _is_test_class(name, value):
    return name.startswith("Test") and not inspect.isabstract(value) \
        and value.__init__ is object.__init__ and value.__new__ is object.__new__


def _real_function(value):
    """The plain function behind what pytest would call (a bound, static or class method,
    a partial, a decorator's __wrapped__), or None."""
    for _ in range(20):
        if isinstance(value, types.FunctionType):
            return value
        if isinstance(value, (staticmethod, classmethod, types.MethodType)):
            value = value.__func__
        elif isinstance(value, functools.partial):
            value = value.func
        elif callable(value) and hasattr(value, "__wrapped__"):
            value = value.__wrapped__
        else:
            return None
    return None


def _collect(module, container, owner, prefix, scopes):
    items = []
    for name, value in _members(container):
        if isinstance(value, type):
            if _is_test_class(name, value) and value not in [c for _, c in scopes]:
                path = prefix + name
                items.extend(_collect(module, value, value, path + "::",
                                      scopes + ((path, value),)))
            continue
        if not name.startswith("test"):
            continue
        if isinstance(value, proxy.ProgramFunction):
            items.append(Item(prefix + name, None, value, owner, None, {},
                              "error: the program's function %s is collected as a test, and "
                              "its arguments would be fixtures" % value.name, [], scopes))
            continue
        if owner is None and isinstance(value, types.MethodType):
            # pytest 9 calls a bound method's function at module level, its `self` (a
            # classmethod's `cls`) a fixture it lacks; in a class it calls the method
            value = value.__func__  # (a red-team pass saw it pass and earn kills)
        function = _real_function(value)
        if function is not None:
            items.extend(_expand(prefix + name, value, function, owner,
                                 None if owner is None else name, module, scopes))
    return items


def describe(error):
    """The sandbox's own one-line description of `error`, as a test's detail."""
    return sys.modules["coral_inside.child"].describe(error)[:200]
