"""Coral's test-generation harness, the tests' side: runs a model-written pytest file.

This file is not imported by Coral: its text is sent with every run as a support module of
the sandbox child, followed by `CONFIG = {...}` and `start()`. In the tests' process (the
one that loads the test file) `start` installs the program under test as a module of call
proxies (proxy.py); the program itself lives in the other process (host.py). CONFIG is the
same for every run of a file, whichever version of the program the other process holds.

It collects tests as pytest does for a plain module: functions named test*, classes named
Test* without __init__ or __new__ (nested ones too) with their test* methods, static and
class methods and those they inherit (a base class's first, as pytest orders them);
`pytest.mark.parametrize` expanded, and marks (a class's along its bases and enclosing
classes) read by pytest's rules: `skip`, boolean `skipif`, `xfail` (an expected failure,
or `pytest.xfail()`, is skipped; a strict xpass or another exception than `raises` fails).
Each test runs under a CPU-time budget.
Fixtures other than parametrize arguments are not provided: a test that needs one (an
argument without a default, or `usefixtures`) errors with a clear detail. A file with more
than `limit` tests fails to load as a whole rather than being cut short. Each test's start
and result go to the program's process, which measures its CPU time and coverage and
reports.
"""

import collections
import contextlib
import itertools
import signal
import sys
import time
import types

import coral_testgen_proxy as proxy

CONFIG = {}
ID_CHARS = 200
HARNESS = ("coral_testgen_", "coral_inside")  # modules whose code an expiry never interrupts
AGAIN = 0.01  # CPU seconds between expiry signals, until one lands outside the harness
_state = {"expired": False}


# One test: `state` is "" (to run), "skip" or "error: WHY"; `outer` the classes it lies in,
# outermost first (its owner last), whose xunit setups and marks apply to it.
Item = collections.namedtuple("Item", "test_id function owner attribute arguments state "
                                      "marks outer")


class _Expired(BaseException):
    """A test's CPU budget ran out (a BaseException: `except Exception` cannot keep it)."""


def start():
    child = sys.modules["coral_inside.child"]  # the sandbox's own (sandbox/inside/child.py)

    if child.SPLIT.get("role") == "tests":
        proxy.install(CONFIG["program"], child.SPLIT["fd"], _Expired)
        _same_chance(CONFIG.get("seed", 0))


def _same_chance(seed):
    """`random` draws the same numbers in every run of a file (the run's seed, in the
    global generator and in every Random() made without one): a test that draws its
    inputs gets the same inputs against every version, so its verdicts, and the scores,
    are reproducible; and a file cannot fail a random share of the runs, which a red-team
    pass used to be credited with kills by chance."""
    import random

    seed_with = random.Random.seed

    def seeded(self, a=None, version=2):
        seed_with(self, seed if a is None else a, version)

    random.Random.seed = seeded
    random.seed = random._inst.seed  # the module's own was bound before the wrapper
    random.seed(seed)


def _marks(*owners):
    """The marks of `owners` (a function, its classes innermost first, the module), the
    nearest first; a class's include its base classes' (pytest 9 reads them along the
    MRO: a red-team base's strict xfail was missed)."""
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
    if isinstance(names, str):
        names = [n.strip() for n in names.split(",") if n.strip()]
    names, sets = list(names), []
    for index, value in enumerate(list(values)):
        marks, label = (), str(index)
        if type(value).__name__ == "ParameterSet":  # pytest.param(...)
            marks, label = tuple(value.marks), value.id or str(index)
            row = tuple(value.values)
        elif len(names) == 1:
            row = (value,)
        else:
            row = tuple(value)
        if len(row) != len(names):
            raise ValueError("parametrize: %d names but %d values" % (len(names), len(row)))
        sets.append((dict(zip(names, row)), label, marks))
    return sets


def _outlook(marks):
    """(skipped, xfail) as pytest reads the marks (nearest first): skipif, then skip, then
    the first xfail whose condition holds, as (strict, raises, run) or None. A boolean
    condition without reason= is pytest's error, as a string condition is Coral's (a
    red-team file had xfail(False) and skipif(False) tests, which pytest runs, skipped)."""
    for mark in marks:
        if mark.name == "skipif" and any(_holds(mark, c) for c in _conditions(mark, True)):
            return True, None
    if any(mark.name == "skip" for mark in marks):
        return True, None
    for mark in marks:
        if mark.name == "xfail" and any(_holds(mark, c) for c in _conditions(mark, True)):
            kwargs = mark.kwargs
            return False, (bool(kwargs.get("strict", False)), kwargs.get("raises"),
                           kwargs.get("run", True))
    return False, None


def _conditions(mark, unconditional):
    if "condition" in mark.kwargs:
        return (mark.kwargs["condition"],)
    return tuple(mark.args) or (unconditional,)


def _holds(mark, condition):
    if isinstance(condition, str):
        raise ValueError("%s with a string condition is not supported" % mark.name)
    if condition is not True or "condition" in mark.kwargs or mark.args:
        if mark.kwargs.get("reason") is None:
            raise ValueError("Error evaluating %r: you need to specify reason=STRING when "
                             "using booleans as conditions." % mark.name)
    return bool(condition)


def _expand(name, function, owner, attribute, module, outer):
    """collect's rows for one test function (one per parameter set); `outer`: the classes
    it lies in, outermost first."""
    import inspect

    marks = _marks(function, *reversed(outer), module)
    if inspect.isgeneratorfunction(function):  # pytest refuses it (it passed here: the
        return [Item(name, function, owner, attribute, {},  # call only made the generator)
                     "error: 'yield' keyword is allowed in fixtures, but not in tests", marks,
                     outer)]
    try:
        groups = [_parameter_sets(m) for m in marks if m.name == "parametrize"]
        names = [n for group in groups for n in (group[0][0] if group else {})]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError("parametrize: duplicate argument %r" % twice[0])
        _outlook([m for m in marks if m.name != "parametrize"])
    except Exception as error:  # a malformed mark: the test errors
        return [Item(name, function, owner, attribute, {}, "error: %s" % _describe(error),
                     marks, outer)]
    items = []
    for combination in itertools.product(*groups):
        arguments, labels, extra = {}, [], []
        for values, label, its_marks in combination:
            arguments.update(values)
            labels.append(label)
            extra.extend(its_marks)
        case = [*extra, *marks]  # a parameter's own marks are the nearest
        try:
            state = "skip" if _outlook(case)[0] else ""
        except Exception as error:
            state = "error: %s" % _describe(error)
        test_id = (name + ("[%s]" % "-".join(labels) if labels else ""))[:ID_CHARS]
        items.append(Item(test_id, function, owner, attribute, arguments, state, case, outer))
    return items


def _unique(items):
    """Test ids made unique as pytest makes them (a suffix per repeat: [a] twice is [a0]
    and [a1]): a file of honest repeated ids was refused whole as tampering."""
    ids = [item[0] for item in items]
    counts, seen = {i: ids.count(i) for i in ids}, {}
    unique = []
    for item in items:
        test_id = item[0]
        if counts[test_id] > 1:
            k = seen[test_id] = seen.get(test_id, -1) + 1
            test_id = test_id[:-1] + "%d]" % k if test_id.endswith("]") else test_id + str(k)
        unique.append(item._replace(test_id=test_id))
    return unique


def collect(module):
    """An Item per test, in pytest's order."""
    return _unique(_collect(module, module, None, "", ()))


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
    import inspect

    return name.startswith("Test") and not inspect.isabstract(value) \
        and value.__init__ is object.__init__ and value.__new__ is object.__new__


def _collect(module, container, owner, prefix, outer):
    items = []
    for name, value in _members(container):
        if isinstance(value, type):
            if _is_test_class(name, value) and value not in outer:  # (a class in itself)
                items.extend(_collect(module, value, value, prefix + name + "::",
                                      outer + (value,)))
            continue
        function = value.__func__ if isinstance(value, (staticmethod, classmethod)) else value
        if name.startswith("test") and isinstance(function, proxy.ProgramFunction):
            # `from sieve import sieve as test_alias`: pytest collects the program's
            # function and asks for its arguments as fixtures (it went uncollected here)
            items.append(Item(prefix + name, function, owner, None, {},
                              "error: the program's function %s is collected as a test, and "
                              "its arguments would be fixtures" % function.name, [], outer))
            continue
        if not name.startswith("test") or not isinstance(function, types.FunctionType):
            continue
        items.extend(_expand(prefix + name, function, owner,
                             None if owner is None else name, module, outer))
    return items


def _describe(error):
    try:
        text = "%s: %s" % (type(error).__name__, error)
    except BaseException:
        text = "exception"
    return " ".join(text.split())[:200]


def _expire(signum, frame):
    """Raise in the test's code, never in the harness's: raised half way through a message
    to the program's process, it would break the protocol and lose the run. The timer
    repeats every AGAIN until it lands outside."""
    _state["expired"] = True
    name = frame.f_globals.get("__name__") if frame is not None else None
    if not (isinstance(name, str) and name.startswith(HARNESS)):
        raise _Expired()


def _call(function, owner, attribute, arguments, marks, outer=()):
    import inspect

    if inspect.iscoroutinefunction(function):
        raise TypeError("async tests are not supported")
    for mark in marks:
        if mark.name == "usefixtures" and mark.args:
            raise _Unrunnable(_NO_FIXTURE % (mark.args[0],))
    instance = owner() if owner is not None else None
    target = getattr(instance, attribute) if owner is not None else function
    parameters = [p for p in inspect.signature(target).parameters.values()
                  if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    wanted = [p.name for p in parameters if p.default is p.empty]
    for name in arguments:  # pytest refuses these at collection (a red-team file's
        if name not in {p.name for p in parameters}:  # values were dropped, and it passed)
            raise _Unrunnable("function uses no argument %r" % name)
        if name not in wanted:
            raise _Unrunnable("function already takes an argument %r with a default value"
                              % name)
    missing = [p for p in wanted if p not in arguments]
    if missing:
        raise _Unrunnable(_NO_FIXTURE % missing[0])
    around = instance if owner is not None else sys.modules[function.__module__]
    suffix = "method" if owner is not None else "function"
    try:
        for enclosing in outer[:-1]:  # an enclosing class's setup_method, as pytest calls
            if callable(getattr(enclosing, "setup_method", None)):  # it: on this instance
                _xunit(instance, ("setup_method",), target, strict=True)
        _xunit(around, ("setup_" + suffix,), target)
    except BaseException as error:  # noqa: B902 - as pytest: the test errors, unrun
        raise _SetupFailed(_describe(error))
    try:
        target(**{k: arguments[k] for k in wanted})
    finally:
        _xunit(around, ("teardown_" + suffix,), target)


def _raised(error, raises):
    """Whether `error` is what an xfail mark's `raises` expects (any, when None)."""
    try:
        return raises is None or isinstance(error, raises)
    except TypeError:  # raises= that is no exception type: pytest's own error
        return False


class _SetupFailed(Exception):
    """A setup function raised: the test errors without running, as in pytest."""


class _Unrunnable(Exception):
    """The test asks for a fixture, or its parameters do not fit it: it errors without
    running, as in pytest."""


_NO_FIXTURE = "fixture '%s' is not available (only parametrize arguments are)"


def _xunit(owner, names, argument, strict=False):
    """Call pytest's xunit-style setup or teardown of `owner` (the first of `names` it
    defines), with `argument` where the function takes one, as pytest does; `strict`: the
    name must be there (AttributeError, as in pytest, when it is not)."""
    import inspect

    for name in names:
        function = getattr(owner, name) if strict else getattr(owner, name, None)
        if callable(function):
            try:
                takes = bool(inspect.signature(function).parameters)
            except (TypeError, ValueError):
                takes = True
            return function(argument) if takes else function()
    return None


@contextlib.contextmanager
def _budgeted(budget):
    """The test budget as a CPU-time timer: its expiry raises _Expired in the test's code
    (a test's own, or a setup's)."""
    _state["expired"] = False
    signal.signal(signal.SIGPROF, _expire)
    signal.setitimer(signal.ITIMER_PROF, budget, AGAIN)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)


def run_one(item, budget, pytest):
    """The test's row. An xfail test runs (unless run=False) and is skipped when it
    fails as expected, as pytest's xfailed never fails a run; it fails when it raises
    another exception than `raises`, or passes under strict=True. `pytest.xfail()` in a
    test is an expected failure too (it was counted a failure: a red-team test that called
    it on the buggy program was credited with the bug)."""
    test_id, marks = item.test_id, item.marks
    xfail = _outlook(marks)[1]
    expected = xfail is not None
    strict, raises, runs = xfail or (False, None, True)
    if expected and not runs:
        return [test_id, "skip", 0.0, ""]
    proxy.CHANNEL[0].send("T", test_id)
    started = time.process_time()
    status, detail = "pass", ""
    try:
        with _budgeted(budget):
            _call(item.function, item.owner, item.attribute, item.arguments, marks,
                  item.outer)
        if expected and strict:
            status, detail = "fail", "[XPASS(strict)]"
    except _Expired:
        status = "timeout"
    except pytest.skip.Exception:
        status = "skip"
    except pytest.xfail.Exception:
        status = "skip"
    except _SetupFailed as error:
        status, detail = "error", "setup failed: %s" % error
    except _Unrunnable as error:
        status, detail = "error", str(error)
    except BaseException as error:  # noqa: B902 - a test's every failure is its verdict
        status, detail = "fail", _describe(error)
        if expected and _raised(error, raises):
            status, detail = "skip", ""
    if _state["expired"]:  # a test that swallowed the expiry still ran out of time
        status, detail = "timeout", ""
    return [test_id, status, round(time.process_time() - started, 6), detail]


def run(module):
    """Run every collected test in order, each reported as it finishes (so a run that is
    stopped still tells how far it got)."""
    import pytest

    channel = proxy.CHANNEL[0]
    budget = float(CONFIG.get("budget", 2.0))
    items, limit = collect(module), CONFIG.get("limit", 500)
    if len(items) > limit:
        raise ValueError("the file has %d tests; Coral runs at most %d (docs/testgen.md)"
                         % (len(items), limit))
    channel.send("D", len(items))
    scope = _Scopes(module, budget)
    last = {cls: index for index, item in enumerate(items) for cls in item.outer}
    for index, item in enumerate(items):
        test_id, state = item.test_id, item.state
        failed = None if state else scope.enter(item.outer)
        if state:
            row = [test_id, "skip" if state == "skip" else "error", 0.0,
                   "" if state == "skip" else state]
        elif failed:
            row = [test_id, "error", 0.0, failed]
        else:
            row = run_one(item, budget, pytest)
        # the teardowns of the scopes this test ends, before its row: one that raises
        # errors it, as pytest reports an error beside it (it was dropped)
        ended = scope.leave([cls for cls in reversed(item.outer) if last[cls] == index],
                            index == len(items) - 1)
        if ended and row[1] in ("pass", "skip"):
            row = [test_id, "error", row[2], ended]
        sys.stdout.flush()
        channel.send("W", row)


class _Scopes:
    """pytest's xunit-style module and class setup (`setUpModule` or `setup_module`,
    `setup_class`) before the first test that needs it and teardown after the last; a
    setup that raises errors every test of its scope, a teardown that raises the test it
    follows. Each runs under the test budget."""

    def __init__(self, module, budget):
        self.module, self.budget = module, budget
        self.module_state = None  # None: not set up; "" set up; else why it failed
        self.classes = {}  # class: "" set up, else why it failed

    def _timed(self, owner, names, argument, what="setup"):
        try:
            with _budgeted(self.budget):
                _xunit(owner, names, argument)
        except BaseException as error:  # noqa: B902 - the scope's tests error
            return "%s failed: %s" % (what, _describe(error))
        return "" if not _state["expired"] else "%s ran out of time" % what

    def enter(self, outer):
        """Why the tests in the classes `outer` (outermost first) cannot run ("" when
        they can): each class's setup runs before its first test, an enclosing class's
        too (a red-team outer setup_class that raised did not stop the nested tests)."""
        if self.module_state is None:
            self.module_state = self._timed(self.module, ("setUpModule", "setup_module"),
                                            self.module)
        for cls in outer:
            if cls not in self.classes:
                self.classes[cls] = self._timed(cls, ("setup_class",), cls)
        return self.module_state or next((self.classes[c] for c in outer if self.classes[c]),
                                         "")

    def leave(self, ended, module_ends):
        """Tear down the classes `ended` (innermost first: their last test ran) and, when
        `module_ends`, the module; why one of them failed, or ""."""
        failed = ""
        for cls in ended:
            if self.classes.get(cls) == "":
                failed = failed or self._timed(cls, ("teardown_class",), cls, "teardown")
        if module_ends and self.module_state == "":
            failed = self._timed(self.module, ("tearDownModule", "teardown_module"),
                                 self.module, "teardown") or failed
        return failed
