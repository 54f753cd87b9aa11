"""Coral's test-generation harness, the tests' side: runs a model-written pytest file.

This file is not imported by Coral: its text is a support module of the sandbox child,
and `start(config)` the job's `prepare`, called in the tests' process alone (the one that
loads the test file) before the file loads. It fills CONFIG and installs the program under
test as a module of call proxies (proxy.py); the program itself lives in the other process
(host.py). CONFIG is the same for every run of a file, whichever version of the program
the other process holds.

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

import contextlib
import signal
import sys
import time
import warnings

import coral_testgen_collection as collection
import coral_testgen_proxy as proxy

CONFIG = {}
HARNESS = ("coral_testgen_", "coral_inside")  # modules whose code an expiry never interrupts
AGAIN = 0.01  # CPU seconds between expiry signals, until one lands outside the harness
# A CPU timer counts the kernel's tick-sampled CPU time, which on a busy machine can run
# ahead of the exact clock (a CI run beside CPU hogs saw a 0.3 s budget end at 0.22 s):
# a timer that fires before the exact clock has used the budget up is set again for the
# rest, so a test's verdict does not depend on the load. The clock, taken before any test
# file loads (a file that rebinds it only loses this process's own backstop: the
# program's process keeps the budget too).
_clock = time.process_time
_state = {"expired": False, "until": 0.0}


class _Expired(BaseException):
    """A test's CPU budget ran out (a BaseException: `except Exception` cannot keep it)."""


def start(config):
    """The job's start, in the tests' process alone (its `prepare`): `config` is the run's
    public settings, as [name, value] pairs."""
    child = sys.modules["coral_inside.child"]  # the sandbox's own (sandbox/inside/child.py)
    CONFIG.update(config)
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


def _expire(signum, frame):
    """Raise in the test's code, never in the harness's: raised half way through a message
    to the program's process, it would break the protocol and lose the run. The timer
    repeats every AGAIN until it lands outside."""
    if not _state["expired"]:
        left = _state["until"] - _clock()
        if left > 0.001:  # early: the exact clock has not used the budget up
            signal.setitimer(signal.ITIMER_PROF, left, AGAIN)
            return
    _state["expired"] = True
    name = frame.f_globals.get("__name__") if frame is not None else None
    if not (isinstance(name, str) and name.startswith(HARNESS)):
        raise _Expired()


@contextlib.contextmanager
def _budgeted(budget):
    """The test budget as a CPU-time timer: its expiry raises _Expired in the test's code
    (a test's own, or a setup's)."""
    _state["expired"] = False
    _state["until"] = _clock() + budget
    signal.signal(signal.SIGPROF, _expire)
    signal.setitimer(signal.ITIMER_PROF, budget, AGAIN)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)


def run(module):
    """Run every collected test in order, each reported as it finishes (so a run that is
    stopped still tells how far it got)."""
    import pytest

    channel = proxy.CHANNEL[0]
    budget = float(CONFIG.get("budget", 2.0))
    items, limit = collection.collect(module), CONFIG.get("limit", 500)
    if len(items) > limit:
        raise ValueError("the file has %d tests; Coral runs at most %d (docs/testgen.md)"
                         % (len(items), limit))
    channel.send("D", len(items))
    scopes = _Scopes(module, budget)
    last = {path: index for index, item in enumerate(items) for path, _ in item.scopes}
    for index, item in enumerate(items):
        test = None if item.state else _Test(item, module, budget, pytest)
        if test is None:
            row = [item.test_id, "skip" if item.state == "skip" else "error", 0.0,
                   "" if item.state == "skip" else item.state]
        else:
            row = test.run(scopes.enter(item.scopes))
        # the teardowns of the scopes this test ends, before its row is sent
        ended = scopes.leave([(path, cls) for path, cls in reversed(item.scopes)
                              if last[path] == index], index == len(items) - 1)
        if ended is not None and test is not None:
            row = test.after(row, ended)
        sys.stdout.flush()
        channel.send("W", row)


class _Test:
    """One test's three phases, as pytest reports them: setup (the scopes', then the
    setup_method or setup_function), the call, teardown. An exception in any phase of an
    xfail test that `raises` allows is an expected failure (skipped); a skip in setup
    skips; otherwise a setup or teardown exception errors the test (a passing one too)
    and the call's fails it; a strict xpass fails; KeyboardInterrupt, which stops pytest's
    session, errors it whatever its marks."""

    def __init__(self, item, module, budget, pytest):
        self.item, self.module, self.budget, self.pytest = item, module, budget, pytest
        self.xfail = collection.outlook(item.marks)[1]

    def run(self, scope_error):
        item = self.item
        proxy.CHANNEL[0].send("T", item.test_id)
        started = time.process_time()
        if scope_error is not None:  # a module's or class's setup raised
            status, detail = self._judged(scope_error, "setup")
        else:
            status, detail = self._phases()
        if _state["expired"]:  # a test that swallowed the expiry still ran out of time
            status, detail = "timeout", ""
        return [item.test_id, status, round(time.process_time() - started, 6), detail]

    def after(self, row, error):
        """`row` with the scopes' teardown `error` that followed it."""
        status, detail = self._torn_down((row[1], row[3]), error)
        return [row[0], status, row[2], detail]

    def _torn_down(self, outcome, error):
        """The (status, detail) of a test whose teardown raised `error` after `outcome`: a
        test that passed or was skipped errors (pytest reports an error beside it); a
        failure stays one; a skip raised in teardown changes nothing."""
        status, detail = self._judged(error, "teardown")
        if status in ("error", "fail", "timeout") and outcome[0] in ("pass", "skip"):
            return ("error" if status == "fail" else status), detail
        return outcome

    def _phases(self):
        item = self.item
        suffix = "method" if item.owner is not None else "function"
        enclosing = [cls for _, cls in item.scopes[:-1]]
        try:
            with _budgeted(self.budget):
                try:
                    instance = item.owner() if item.owner is not None else None
                    # a module's setup_function is the test file's, wherever the test's
                    # function was defined (one imported under a test* name)
                    around = instance if item.owner is not None else self.module
                    target = getattr(instance, item.attribute) if item.owner is not None \
                        else item.obj
                    for cls in enclosing:  # an enclosing class's, as pytest calls it: on
                        if getattr(cls, "setup_method", None) is not None:  # this instance
                            _xunit(instance, "setup_method", target, strict=True)
                    _xunit(around, "setup_" + suffix, target)
                except BaseException as error:  # noqa: B902 - the phase's verdict
                    return self._judged(error, "setup")
                try:
                    outcome = self._call(target)
                except BaseException as error:  # noqa: B902 - the phase's verdict
                    outcome = self._judged(error, "call")
                try:
                    _xunit(around, "teardown_" + suffix, target)
                    for cls in reversed(enclosing):
                        if getattr(cls, "teardown_method", None) is not None:
                            _xunit(instance, "teardown_method", target, strict=True)
                except BaseException as error:  # noqa: B902 - the phase's verdict
                    return self._torn_down(outcome, error)
                return outcome
        except _Expired:
            return "timeout", ""

    def _call(self, target):
        """The call phase's (status, detail) when it does not raise."""
        import inspect

        item = self.item
        function = item.function
        if inspect.iscoroutinefunction(function) or inspect.isasyncgenfunction(function):
            raise TypeError("async tests are not supported")
        arguments = _arguments(target, item.arguments, item.marks)
        with warnings.catch_warnings():
            _warning_filters(item.marks)
            result = target(**arguments)
            if inspect.isawaitable(result) or inspect.isasyncgen(result):
                getattr(result, "close", lambda: None)()
                raise TypeError("async tests are not supported")
            if result is not None:  # pytest warns; filterwarnings("error") fails the test
                warnings.warn(self.pytest.PytestReturnNotNoneWarning(
                    "test functions should return None"))
        if self.xfail is not None and self.xfail[0]:
            return "fail", "[XPASS(strict)]"
        return "pass", ""

    def _judged(self, error, phase):
        """(status, detail) of an exception raised in `phase`."""
        pytest = self.pytest
        if isinstance(error, _Expired):
            return "timeout", ""
        if isinstance(error, KeyboardInterrupt):
            return "error", "KeyboardInterrupt (it stops pytest's session)"
        if isinstance(error, (pytest.skip.Exception, pytest.xfail.Exception)):
            return "skip", ""
        if isinstance(error, _Unrunnable):
            return "error", str(error)
        if self.xfail is not None:
            if _raised(error, self.xfail[1]):
                return "skip", ""
            return "fail", collection.describe(error)
        what = {"setup": "setup failed: ", "teardown": "teardown failed: "}.get(phase, "")
        return ("fail" if phase == "call" else "error"), what + collection.describe(error)


def _arguments(target, arguments, marks):
    """The keyword arguments of a call of `target`: its parameters without defaults, each a
    parametrize argument; what pytest refuses (a fixture, an argument parametrized that
    the test does not take or takes with a default) is _Unrunnable."""
    import inspect

    for mark in marks:
        if mark.name == "usefixtures" and mark.args:
            raise _Unrunnable(_NO_FIXTURE % (mark.args[0],))
    parameters = [p for p in inspect.signature(target).parameters.values()
                  if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    wanted = [p.name for p in parameters if p.default is p.empty]
    for name in arguments:
        if name not in {p.name for p in parameters}:
            raise _Unrunnable("function uses no argument %r" % name)
        if name not in wanted:
            raise _Unrunnable("function already takes an argument %r with a default value"
                              % name)
    missing = [p for p in wanted if p not in arguments]
    if missing:
        raise _Unrunnable(_NO_FIXTURE % missing[0])
    return {name: arguments[name] for name in wanted}


def _warning_filters(marks):
    """The test's `filterwarnings` marks, nearest first (pytest applies them so)."""
    from _pytest.config import parse_warning_filter

    for mark in reversed(marks):
        if mark.name == "filterwarnings":
            for arg in mark.args:
                warnings.filterwarnings(*parse_warning_filter(arg, escape=False))


def _raised(error, raises):
    """Whether `error` is what an xfail mark's `raises` expects (any, when None)."""
    try:
        return raises is None or isinstance(error, raises)
    except TypeError:  # raises= that is no exception type: pytest's own error
        return False


class _Unrunnable(Exception):
    """The test asks for a fixture, or its parameters do not fit it: it errors without
    running, as in pytest."""


_NO_FIXTURE = "fixture '%s' is not available (only parametrize arguments are)"


def _xunit(owner, name, argument, strict=False):
    """Call pytest's xunit-style setup or teardown `name` of `owner` as pytest does: any
    value there is called (one that is not a function raises, as in pytest), with
    `argument` when its code takes one; `strict`: it must be there."""
    import inspect

    function = getattr(owner, name) if strict else getattr(owner, name, None)
    if function is None:
        return None
    takes = function.__code__.co_argcount - (1 if inspect.ismethod(function) else 0)
    return function(argument) if takes else function()


class _Scopes:
    """pytest's xunit-style module and class setup (`setUpModule` or `setup_module`,
    `setup_class`, an enclosing class's too) before the first test that needs it and
    teardown after the last. What a setup raised is judged for each of its tests (a skip
    skips them, an xfail test's expected failure is skipped, else they error); each runs
    under the test budget. A class reached under two names is two scopes."""

    def __init__(self, module, budget):
        self.module, self.budget = module, budget
        self.module_error = None  # what setUpModule raised; None: fine
        self.module_done = False
        self.classes = {}  # path: what its setup_class raised, or None

    def _timed(self, owner, names, argument):
        """What the first of `names` that `owner` has raised, or None."""
        try:
            with _budgeted(self.budget):
                for name in names:
                    if getattr(owner, name, None) is not None:
                        _xunit(owner, name, argument)
                        break
        except BaseException as error:  # noqa: B902 - judged for each test
            return error
        return _Expired() if _state["expired"] else None

    def enter(self, scopes):
        """What a setup of these scopes (outermost first) raised, or None."""
        if not self.module_done:
            self.module_done = True
            self.module_error = self._timed(self.module, ("setUpModule", "setup_module"),
                                            self.module)
        for path, cls in scopes:
            if path not in self.classes:
                self.classes[path] = self._timed(cls, ("setup_class",), cls)
        return self.module_error or next(
            (self.classes[path] for path, _ in scopes if self.classes[path]), None)

    def leave(self, ended, module_ends):
        """Tear down the scopes `ended` ((path, class), innermost first: their last test
        ran) and, when `module_ends`, the module; what one of them raised, or None."""
        raised = None
        for path, cls in ended:
            if path in self.classes and self.classes[path] is None:
                raised = raised or self._timed(cls, ("teardown_class",), cls)
        if module_ends and self.module_done and self.module_error is None:
            raised = self._timed(self.module, ("tearDownModule", "teardown_module"),
                                 self.module) or raised
        return raised
