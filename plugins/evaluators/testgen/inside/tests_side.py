"""Coral's test-generation harness, the tests' side: runs a model-written pytest file.

This file is not imported by Coral: its text is sent with every run as a support module of
the sandbox child, followed by `CONFIG = {...}` and `start()`. In the tests' process (the
one that loads the test file) `start` installs the program under test as a module of call
proxies (proxy.py); the program itself lives in the other process (host.py). CONFIG is the
same for every run of a file, whichever version of the program the other process holds.

It collects tests as pytest does for a plain module: functions named test*, classes named
Test* without __init__ or __new__ (nested ones too) with their test* methods, static and
class methods and those they inherit (a base class's first, as pytest orders them);
`pytest.mark.parametrize` expanded, `skip`, boolean `skipif` and `xfail` honoured (an
xfail test can never fail a run, so it is skipped). Each test runs under a CPU-time budget.
Fixtures other than parametrize arguments are not provided: a test that needs one (an
argument without a default, or `usefixtures`) errors with a clear detail. A file with more
than `limit` tests fails to load as a whole rather than being cut short. Each test's start
and result go to the program's process, which measures its CPU time and coverage and
reports.
"""

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
    marks = []
    for owner in owners:
        found = getattr(owner, "pytestmark", [])
        marks.extend(found if isinstance(found, list) else [found])
    return marks


def _parameter_sets(mark):
    args, kwargs = list(mark.args), dict(mark.kwargs)
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


def _skipped(marks):
    for mark in marks:
        if mark.name in ("skip", "xfail"):
            return True
        if mark.name == "skipif":
            conditions = list(mark.args) or [mark.kwargs.get("condition", True)]
            if any(isinstance(c, str) for c in conditions):
                raise ValueError("skipif with a string condition is not supported")
            if any(conditions):
                return True
    return False


def _expand(name, function, owner, attribute, module):
    """collect's rows for one test function (one per parameter set)."""
    import inspect

    if inspect.isgeneratorfunction(function):  # pytest refuses it (it passed here: the
        return [(name, function, owner, attribute, {},  # call only made the generator)
                 "error: 'yield' keyword is allowed in fixtures, but not in tests")]
    owners = (function, owner, module) if owner is not None else (function, module)
    marks = _marks(*owners)
    try:
        groups = [_parameter_sets(m) for m in marks if m.name == "parametrize"]
        base_skip = _skipped([m for m in marks if m.name != "parametrize"])
    except Exception as error:  # a malformed mark: the test errors
        return [(name, function, owner, attribute, {}, "error: %s" % _describe(error))]
    items = []
    for combination in itertools.product(*groups):
        arguments, labels, skip = {}, [], base_skip
        for values, label, extra in combination:
            arguments.update(values)
            labels.append(label)
            try:
                skip = skip or _skipped(list(extra))
            except Exception as error:
                skip = "error: %s" % _describe(error)
        test_id = (name + ("[%s]" % "-".join(labels) if labels else ""))[:ID_CHARS]
        items.append((test_id, function, owner, attribute, arguments,
                      "skip" if skip is True else skip))
    return items


def collect(module):
    """(test id, function, owner class, its attribute name, arguments, skipped or error
    text) per test, in pytest's order."""
    return _collect(module, module, None, "", ())


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
        if not name.startswith("test") or not isinstance(function, types.FunctionType):
            continue
        items.extend(_expand(prefix + name, function, owner,
                             None if owner is None else name, module))
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


def _call(function, owner, attribute, arguments, marks):
    import inspect

    if inspect.iscoroutinefunction(function):
        raise TypeError("async tests are not supported")
    for mark in marks:
        if mark.name == "usefixtures" and mark.args:
            raise _NoFixture(mark.args[0])
    instance = owner() if owner is not None else None
    target = getattr(instance, attribute) if owner is not None else function
    parameters = inspect.signature(target).parameters.values()
    wanted = [p.name for p in parameters if p.default is p.empty
              and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    missing = [p for p in wanted if p not in arguments]
    if missing:
        raise _NoFixture(missing[0])
    around = instance if owner is not None else sys.modules[function.__module__]
    suffix = "method" if owner is not None else "function"
    try:
        _xunit(around, ("setup_" + suffix,), target)
    except BaseException as error:  # noqa: B902 - as pytest: the test errors, unrun
        raise _SetupFailed(_describe(error))
    try:
        target(**{k: arguments[k] for k in wanted})
    finally:
        _xunit(around, ("teardown_" + suffix,), target)


class _SetupFailed(Exception):
    """A setup function raised: the test errors without running, as in pytest."""


class _NoFixture(Exception):
    """The test asks for a fixture: it errors without running, as in pytest."""

    def __str__(self):
        return "fixture '%s' is not available (only parametrize arguments are)" % (
            self.args[0],)


def _xunit(owner, names, argument):
    """Call pytest's xunit-style setup or teardown of `owner` (the first of `names` it
    defines), with `argument` where the function takes one, as pytest does."""
    import inspect

    for name in names:
        function = getattr(owner, name, None)
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


def run_one(test_id, function, owner, attribute, arguments, budget, pytest):
    proxy.CHANNEL[0].send("T", test_id)
    started = time.process_time()
    status, detail = "pass", ""
    try:
        with _budgeted(budget):
            owners = (function, owner, sys.modules[function.__module__]) if owner else (
                function, sys.modules[function.__module__])
            _call(function, owner, attribute, arguments, _marks(*owners))
    except _Expired:
        status = "timeout"
    except pytest.skip.Exception:
        status = "skip"
    except _SetupFailed as error:
        status, detail = "error", "setup failed: %s" % error
    except _NoFixture as error:
        status, detail = "error", str(error)
    except BaseException as error:  # noqa: B902 - a test's every failure is its verdict
        status, detail = "fail", _describe(error)
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
    for test_id, function, owner, attribute, arguments, state in items:
        failed = None if state else scope.enter(owner)
        if state:
            row = [test_id, "skip" if state == "skip" else "error", 0.0,
                   "" if state == "skip" else state]
        elif failed:
            row = [test_id, "error", 0.0, failed]
        else:
            row = run_one(test_id, function, owner, attribute, arguments, budget, pytest)
        sys.stdout.flush()
        channel.send("W", row)
    scope.enter(None, last=True)


class _Scopes:
    """pytest's xunit-style module and class setup (`setup_module` or `setUpModule`,
    `setup_class`) before the first test that needs it and teardown after the last; a
    setup that raises errors every test of its scope. Each runs under the test budget."""

    def __init__(self, module, budget):
        self.module, self.budget = module, budget
        self.module_state = None  # None: not set up; "" set up; else why it failed
        self.owner, self.owner_state = None, ""

    def _timed(self, owner, names, argument):
        try:
            with _budgeted(self.budget):
                _xunit(owner, names, argument)
        except BaseException as error:  # noqa: B902 - the scope's tests error
            return "setup failed: %s" % _describe(error)
        return "" if not _state["expired"] else "setup ran out of time"

    def enter(self, owner, last=False):
        """Why the tests of `owner`'s scope cannot run ("" when they can)."""
        if owner is not self.owner and self.owner is not None:
            self._timed(self.owner, ("teardown_class",), self.owner)
            self.owner = None
        if last:
            if self.module_state is not None:
                self._timed(self.module, ("teardown_module", "tearDownModule"), self.module)
            return ""
        if self.module_state is None:
            self.module_state = self._timed(self.module, ("setup_module", "setUpModule"),
                                            self.module)
        if owner is not None and owner is not self.owner:
            self.owner = owner
            self.owner_state = self._timed(owner, ("setup_class",), owner)
        return self.module_state or (self.owner_state if owner is not None else "")
