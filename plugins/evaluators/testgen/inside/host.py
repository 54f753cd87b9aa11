"""Coral's test-generation harness, the program's side: holds the program under test.

Loaded as the support module `coral_testgen_host` in both processes of a run, it acts only
in the program's process (the sandbox child), which `serve` turns into the tests' server:
it loads the program (after starting coverage.py), tells the tests' process the program's
public names, runs every call the tests make, and reports to the sandbox worker. It alone
knows which version of the program it holds and the run's private settings (whether it
reports coverage, each test's CPU budget, where to stop), so the tests' process sees the
same thing in every run of a file but the program's answers. It does the same work in
every run (coverage is measured in all of them), so that even the time a call takes or
this process's memory differ only by what the program does.

Budgets are CPU time of both processes together (the tests' from /proc/PID/stat): a test
over its budget in the correct run is interrupted in its next call to the program (or by
its own process's timer) and counts as timed out; in any other run the tests' process is
killed at once and the run ends there (it cannot be told to go on without learning which
run it is in). A test that does not pass, where the correct run passed it (`stop_on`),
ends the run too, as cosmic-ray's `pytest -x` does.

A test that uses no CPU (it sleeps, waits, or stops its own process) never reaches a CPU
budget, so the tests' process is also given `idle` seconds of idleness per run: the time
it is neither running nor waiting for a CPU, less the time this process is (the tests'
process waits for the program's answers then). The kernel's scheduler statistics give
both, and load moves time only between running and waiting for a CPU, so this is the same
on a busy machine, and never more than the tests' own sleeping; past it, the run ends as
a budget's end would (in the correct run, with an error: no honest test sleeps, and the
screen refuses `time`).
"""

import json
import os
import select
import signal
import sys
import time
import types

import coral_testgen_codec as codec

TICK = 0.05  # seconds between budget checks while the tests run: the same in every run (a
# cadence that followed the budget left would show the budget in /proc/PPID/status)
STATUSES = ("pass", "fail", "timeout", "error", "skip")
AGAIN = 0.01  # CPU seconds between expiry signals, until one lands in the program's code
# The timer counts the kernel's tick-sampled CPU time, which on a busy machine can run
# ahead of the exact clock the budget is kept by (a CI run beside CPU hogs saw a 0.3 s
# budget end at 0.22 s): fired early, it is set again for the rest (see _expire).


class _Expired(BaseException):
    """The program's CPU budget for this call ran out."""


def _remember_sysconfig_paths():
    """Starting coverage.py asks sysconfig for every scheme's paths 27 times, each a copy
    of the interpreter's 1,000 config variables: 7 ms of every run. Remembered here, once
    per worker (this module is loaded before the worker's first job), and the same in
    every run's two processes."""
    import functools
    import sysconfig

    if not hasattr(sysconfig.get_paths, "cache_info"):
        sysconfig.get_paths = functools.lru_cache(maxsize=64)(sysconfig.get_paths)
        for scheme in sysconfig.get_scheme_names():
            sysconfig.get_paths(scheme)


_remember_sysconfig_paths()


class Over(Exception):
    """A budget ran out: `what` is "test" or "run"."""

    def __init__(self, what):
        super().__init__(what)
        self.what = what


class Host:
    def __init__(self, send, record, config, fds, tests_pid, clock):
        self.send, self.record, self.config = send, record, config
        self.channel, self.pid, self.clock = codec.Channel(*fds), tests_pid, clock
        self.budgets = [float(b) for b in config.get("budgets") or []]
        self.stop_on = list(config.get("stop_on") or [])
        self.variant = bool(config.get("variant"))  # judged against the correct run's
        self.default = float(config.get("budget", 2.0))
        self.run_budget = float(config.get("timeout", 30.0))
        self.program, self.names, self.iterators, self.callables = None, (), {}, {}
        self.modules = frozenset()  # the program's own modules (see _expire)
        self.rows, self.test, self.loaded = 0, None, False
        self.expired, self.tests_cpu, self.until = False, 0.0, 0.0
        self.idle, self.idle_limit = 0.0, float(config.get("idle", 2.0))
        self.idle_mark = None  # (wall, the two processes' busy nanoseconds) at the last count
        self.own_start = self._own()

    # CPU time ---------------------------------------------------------------------------

    def _own(self):
        return time.process_time()

    def _tests(self):
        """The tests' CPU time: their process and every process they started."""
        self.tests_cpu = self.clock.read()
        return self.tests_cpu

    def used(self, tests=None, own=None):
        """This test's CPU time so far (from readings just taken, if given)."""
        if self.test is None:
            return 0.0
        tests = self._tests() if tests is None else tests
        own = self._own() if own is None else own
        return tests - self.test[1] + own - self.test[2]

    def budget(self, index):
        return self.budgets[index] if index < len(self.budgets) else self.default

    def remaining(self):
        """CPU seconds left before a budget runs out; raises Over when one has."""
        return self._limit()[0]

    def _limit(self):
        """(seconds left, which budget that is: "test" or "run"); raises Over when one
        has run out."""
        tests, own = self._tests(), self._own()  # one reading of /proc per check
        left = self.run_budget - (tests + own - self.own_start)
        if left <= 0:
            raise Over("run")
        if self.test is not None:
            test_left = self.budget(self.rows) - self.used(tests, own)
            if self.variant and test_left <= 0:
                raise Over("test")
            if test_left < left:
                return max(test_left, 0.0), "test"
        return left, "run"

    # the program ------------------------------------------------------------------------

    def load(self, private, load_module):
        import coverage  # in every run (only the correct one reports it): see suite.py
        import coverage.collector

        # A debugging aid: the collector notes who made it by inspecting the whole stack,
        # which with pytest loaded costs 30 ms of every run's CPU time.
        coverage.collector.short_stack = lambda *args, **kwargs: ""
        self.coverage = coverage.Coverage(data_file=None, config_file=False)
        self.coverage.start()
        self.modules = frozenset(name for name, _ in private["support"])
        try:
            for name, source in private["support"]:
                self.program = load_module(name, source)
        except BaseException as error:  # noqa: B902 - the tests' import fails as this did
            self._say({"error": _describe(error)})
            return
        names, values, encoder = [], [], codec.Encoder("n")
        for name, value in list(vars(self.program).items()):
            if name.startswith("_") or isinstance(value, types.ModuleType):
                continue
            if callable(value):
                names.append(name)
                continue
            try:
                values.append([name, encoder.value(value)])
            except (codec.Unsendable, RecursionError):
                continue
        self.names = tuple(names)
        self._say({"names": names, "values": values, "t": encoder.drain()})

    def _say(self, payload):
        self.channel.send("", payload)

    def _expire(self, signum, frame):
        """Raise only in the program's own code: raised in coverage's tracer between its
        lock and unlock (or in any library holding a lock) it would leave the lock held and
        this process hung. The timer repeats every AGAIN until it lands there."""
        if not self.expired:
            left = self.until - self._own()  # the tests' process waits meanwhile
            if left > 0.001:  # early: the exact clock has not used the budget up
                signal.setitimer(signal.ITIMER_PROF, left, AGAIN)
                return
        self.expired = True
        if frame is not None and frame.f_globals.get("__name__") in self.modules:
            raise _Expired()

    def _run(self, target):
        """(value, exception) of one call, under the CPU left; Over when a budget ran out
        (in the correct run a test's own budget is reported to the tests instead)."""
        left, which = self._limit()
        if left <= 0:  # the correct run: this test is out of time
            return None, _Expired()
        self.expired, self.until = False, self._own() + left
        signal.signal(signal.SIGPROF, self._expire)
        signal.setitimer(signal.ITIMER_PROF, left, AGAIN)
        value = error = None
        try:
            value = target()
        except _Expired as expired:
            error = expired
        except BaseException as raised:  # noqa: B902 - the program's, for the tests
            error = raised
        finally:
            signal.setitimer(signal.ITIMER_PROF, 0)
        if self.expired:
            self.remaining()  # raises Over unless it is the correct run's test budget
            if self.variant or which == "run":
                # The timer ran out, so the budget did, whatever the clocks now say: they
                # tick (10 ms in /proc) and may read a few ms short. Told to go on
                # instead, a variant would run like the correct run (a CI run saw it).
                raise Over(which)
            return None, _Expired()
        return value, error

    def call(self, kind, body):
        try:
            request = json.loads(body)
            if kind == "C":
                incoming = request["t"]
                decoder = codec.Decoder(incoming)
                if type(request["f"]) is int:  # a callable it returned earlier
                    function = self.callables[request["f"]]
                elif request["f"] in self.names:
                    function = getattr(self.program, request["f"])
                else:
                    raise codec.Unsendable("no function %r" % (request["f"],))
                args = [decoder.value(a) for a in request["a"]]
                named = {k: decoder.value(v) for k, v in request["k"] if type(k) is str}
                origin = decoder.objects

                def target():
                    return function(*args, **named)
            else:
                iterator, origin, incoming = self.iterators[request["g"]]

                def target():
                    return next(iterator)
        except Over:
            raise
        except Exception as error:  # noqa: B902 - a malformed request: a TypeError back
            self._say({"x": ["TypeError", None, "coral: %s" % _describe(error)]})
            return
        value, error = self._run(target)
        if isinstance(error, _Expired):
            self._say({"expired": True})
            return
        self._say(self._reply(value, error, origin, incoming))

    def _reply(self, value, error, origin, incoming):
        def other(x):
            if hasattr(type(x), "__next__") and hasattr(type(x), "__iter__"):
                handle = len(self.iterators)
                self.iterators[handle] = (x, origin, incoming)
                return ["g", handle]
            if callable(x):
                handle = len(self.callables)
                self.callables[handle] = x
                return ["k", handle]
            raise codec.Unsendable("a %s" % type(x).__name__)

        try:
            return codec.Encoder("n", other).reply(
                value, error, origin, incoming, lambda e: _describe(e, False))
        except (codec.Unsendable, RecursionError) as unsendable:
            return {"x": ["TypeError", None, "coral: the program returned %s, which cannot "
                          "be passed to the tests" % _describe(unsendable, False)]}

    # the tests' messages ----------------------------------------------------------------

    def next_line(self):
        """The tests' next message, or None when their process has gone."""
        channel = self.channel
        while True:
            line = channel.line()
            if line is not None:
                return line
            left = self.remaining()  # raises Over when a budget has run out
            self._count_idle()
            # within a TICK of a budget, wake at it: the tests stop at it, not a TICK past
            wait = min(TICK, max(0.002, left))
            if select.select([channel.read], [], [], wait)[0] and not channel.fill():
                return None

    def _count_idle(self):
        """At most once a TICK: the wall time since the last count less the time either
        process ran or waited for a CPU (see the module's docstring); Over("idle") past
        the limit."""
        now = time.monotonic()
        if self.idle_mark is not None and now - self.idle_mark[0] < TICK:
            return
        busy_ns = sys.modules["coral_inside.processes"].busy_ns  # the sandbox's own
        busy = busy_ns(self.pid)
        if busy is None:
            return
        busy += busy_ns("self") or 0
        if self.idle_mark is not None:
            then, was = self.idle_mark
            self.idle += max(0.0, (now - then) - (busy - was) / 1e9)
        self.idle_mark = (now, busy)
        if self.idle > self.idle_limit:
            raise Over("idle")

    def serve(self):
        try:
            while True:
                line = self.next_line()
                if line is None:
                    return self.finish("the tests' process exited")
                kind, body = line[:1].decode("latin-1"), line[1:]
                if kind in ("C", "G"):
                    self.call(kind, body)
                elif kind == "T":
                    self.begin(json.loads(body))
                elif kind == "W":
                    if self.row(json.loads(body)):
                        return self.finish(None, stopped=True)
                elif kind == "D":
                    self.record({"collected": json.loads(body)})
                elif kind == "L" and not self.loaded:
                    self.loaded = True
                    self.send("L %.6f -1" % self._own())
                elif kind == "X" and not self.loaded:
                    return self.finish(line[1:].decode("utf-8", "replace"), loading=True)
                elif kind == "E" and self.loaded:
                    detail = line.split(b" ", 3)[3:] or [b""]
                    return self.finish(detail[0].decode("utf-8", "replace") or None,
                                       done=True)
                elif kind != "R":
                    return self.finish("the tests' process broke the protocol")
        except Over as over:
            if self.test is not None and (over.what == "test"
                                          or over.what == "idle" and self.variant):
                self.record([self.test[0], "timeout", round(self.used(), 6), ""])
                return self.finish(None, stopped=True)
            if over.what == "idle":
                return self.finish("the tests' process was idle (asleep or stopped) for "
                                   "over %g s" % self.idle_limit, loading=not self.loaded)
            return self.finish("the run ran out of CPU time (%.3g s)" % self.run_budget,
                               loading=not self.loaded)
        except (ValueError, TypeError, KeyError, UnicodeDecodeError):
            return self.finish("the tests' process broke the protocol")

    def begin(self, test_id):
        if type(test_id) is not str:
            raise ValueError("test id")
        self.coverage.switch_context(test_id)
        self.test = (test_id, self._tests(), self._own())

    def row(self, row):
        """Record one test's result with its CPU time measured here; True when the run
        stops (a test the correct run passed did not pass)."""
        if not (type(row) is list and len(row) == 4 and type(row[0]) is str
                and row[1] in STATUSES and type(row[3]) is str):
            raise ValueError("row")
        index, status = self.rows, row[1]
        used = self.used() if self.test is not None and self.test[0] == row[0] else 0.0
        if status != "skip" and used > self.budget(index):
            status = "timeout"
        self.record([row[0], status, round(used, 6), row[3][:300]])
        self.rows, self.test = index + 1, None
        return (self.variant and index < len(self.stop_on) and bool(self.stop_on[index])
                and status in ("fail", "timeout", "error"))

    def finish(self, error, stopped=False, loading=False, done=False):
        """End the run: stop the tests' process, then report (and exit)."""
        self._stop_tests()
        if loading:
            self.send("X" + (error or "the test file did not load"))
            return
        if stopped or done:
            self.record({"done": self.rows, "stopped": stopped, "lines": self._lines()})
        if not self.loaded:
            self.send("X" + (error or "the tests' process exited while loading"))
            return
        detail = "" if error is None else " " + " ".join(error.split())[:300]
        self.send("E0 %.6f -1%s" % (self._own_with_tests(), detail))

    def _stop_tests(self):
        try:
            os.kill(self.pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            os.waitpid(self.pid, 0)
        except OSError:
            pass

    def _own_with_tests(self):
        times = os.times()
        return times.user + times.system + times.children_user + times.children_system

    def _lines(self):
        self.coverage.stop()
        if not self.config.get("report_lines"):
            return None
        data = self.coverage.get_data()
        target, lines = self.config.get("program_file", ""), {}
        for path in data.measured_files():
            if path.rsplit("/", 1)[-1] == target:
                contexts = data.contexts_by_lineno(path)
                lines = {str(line): sorted(names) for line, names in contexts.items()}
        return lines


def _describe(error, with_type=True):
    try:
        text = ("%s: %s" % (type(error).__name__, error)) if with_type else str(error)
    except BaseException:  # noqa: B902 - a message that cannot be made
        text = type(error).__name__
    return " ".join(text.split())[:300]


def _mute(child):
    """Nothing this process prints reaches the run's output files, which the tests'
    process can read: a mutant's own SyntaxWarning (`x is 'literal'`) written there told
    the mutant apart (a seventh red-team pass)."""
    child._flush_output()  # what the fork inherited unwritten
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    os.close(null)


def serve(send, record, private, load_module):
    """The program's process, from the moment its modules are loaded; never returns."""
    child = sys.modules["coral_inside.child"]  # the sandbox's own (sandbox/inside/child.py)

    _mute(child)
    processes = sys.modules["coral_inside.processes"]
    pid = child.SPLIT["pid"]
    host = Host(send, record, private.get("config", {}), child.SPLIT["fd"], pid,
                processes.JobClock(os.getppid(), exclude=(os.getpid(),), root=pid))
    host.load(private, load_module)
    host.serve()
    sys.stdout.flush()
