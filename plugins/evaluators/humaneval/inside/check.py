"""HumanEval's check, the test's side: the process that runs `test` and `check(...)`.

This file is not imported by Coral: its text is a sandbox support module
(`coral_humaneval_check`), the host of a hosted job (sandbox/inside/child.py). Its `serve`
runs in the process that alone reads the job's private part: the benchmark's test, the
entry point, which names the test takes from the program, and the budgets. The candidate's
program runs in the other process (program.py); this one never runs a line of it.

The test runs in a namespace of its own. The entry point, and every other name the test
uses whose definition the candidate wrote, are proxies: calling one sends plain data to the
program's process and returns the plain data it answers (codec.py), so no object of the
program's, no frame, no builtin it rebinds and no module it patches is in this process.
Names the test uses that the benchmark itself defines (`poly` in HumanEval/32) come from
the benchmark's own text, run here. The verdict is this process's alone, sent to the
sandbox worker (which the program's process has no way to reach): "passed" when `check`
returns, "failed" when it raises or the program's process ends, "timed out" when the
program's process has used the CPU budget or sat idle (asleep, blocked) for the idle
budget, counted from the kernel's accounting rather than signals it could catch.
"""

import json
import os
import random
import select
import signal
import sys
import time

import coral_hosted_codec as codec

TICK = 0.05  # seconds between readings of the program's CPU time while waiting for it
MAX_LINE = 64 << 20  # bytes of one answer from the program's process


class ProgramError(Exception):
    """The program raised an exception of a type of its own (its name and message)."""


class ProgramIterator:
    """A generator or iterator the program returned: each step runs in its process."""

    def __init__(self, checker, handle):
        self._checker, self._handle = checker, handle

    def __iter__(self):
        return self

    def __next__(self):
        return self._checker.request("G", {"g": self._handle}, {})


class ProgramObject:
    """An object of the program's that is not data, which a call left in the test's own
    argument (a sentinel appended to a list): it equals only itself, and a later call hands
    it back to the program as the object it stands for."""

    __slots__ = ("_handle",)

    def __init__(self, handle):
        self._handle = handle

    def __repr__(self):
        return "<an object of the program under test, which is not plain data>"


class ProgramFunction:
    """A function of the program (by name) or a callable it returned (by handle)."""

    def __init__(self, checker, target, name=None):
        self._checker, self._target = checker, target
        # what a test may read of the function it was handed (`candidate.__name__`)
        self.__name__ = self.__qualname__ = name or "<lambda>"

    def __call__(self, *args, **kwargs):
        return self._checker.call(self._target, args, kwargs)

    def __repr__(self):
        return "<function %s of the program under test>" % (self._target,)


class Checker:
    def __init__(self, send, record, private, fds, pid, clock):
        self.send, self.record, self.private = send, record, private
        self.channel, self.pid, self.clock = codec.Channel(*fds), pid, clock
        self.budget = float(private["cpu"])
        self.idle_limit = float(private["idle"])
        self.idle, self.cpu, self.checked = 0.0, 0.0, 0.0
        self.mark = None  # (wall, both processes' busy nanoseconds) when the check began
        self.known = {}  # the benchmark's definitions the test uses, by name
        self.held = {}  # ProgramObjects by handle: the same object is the same stand-in

    # the program's time --------------------------------------------------------------

    def _cpu(self):
        """The program's CPU time: its process and every process it started (processes.py)."""
        self.cpu = self.clock.read()
        return self.cpu

    def interval(self):
        """Seconds to the next reading: a TICK, less once the program is within a TICK of
        its CPU budget, so that a program that loops is stopped at its budget, not up to a
        TICK past it (its CPU time grows at most as fast as the wall clock per CPU)."""
        return min(TICK, max(0.002, self.budget - self.cpu))

    def account(self, force=False):
        """Read the program's CPU time and idleness (at most once a TICK unless `force`);
        end the check as timed out past either budget.

        Idleness is the wall time since the check began that neither process spent
        running or waiting for a CPU (the kernel's schedstat): the two take turns, so
        that is time the program slept or blocked. Load moves time only between running
        and waiting, so a busy machine adds none; sleeps shorter than a TICK add up."""
        now = time.monotonic()
        if not force and now - self.checked < self.interval():
            return
        self.checked = now
        if self._cpu() >= self.budget:
            self.end("timed out", "the program used %.3g s of CPU time" % self.budget)
        busy = sys.modules["coral_inside.processes"].busy_ns  # the sandbox's own
        theirs, ours = busy(self.pid), busy("self")
        if theirs is not None and ours is not None:
            if self.mark is None:
                self.mark = (now, theirs + ours)
            self.idle = max(0.0, (now - self.mark[0]) - (theirs + ours - self.mark[1]) / 1e9)
        if self.idle > self.idle_limit:
            self.end("timed out", "the program was idle (asleep or blocked) for %.3g s"
                     % self.idle_limit)

    # lines from the program's process ------------------------------------------------

    def line(self):
        """The program's next line, or None when its process has ended."""
        channel = self.channel
        while True:
            line = channel.line()
            if line is not None:
                self.account()
                return line
            if len(channel.buffer) > MAX_LINE:
                self.end("failed", "the program's answer is over %d MiB" % (MAX_LINE >> 20))
            self.account()
            if (select.select([channel.read], [], [], self.interval())[0]
                    and not channel.fill()):
                return None

    def gone(self, what):
        self.account(force=True)  # a process killed for its CPU time timed out
        self.end("failed", "the program's process ended %s" % what)

    def answer(self):
        line = self.line()
        if line is None:
            self.gone("while the test called it")
        if line[:1] != b"A":
            self.end("failed", "the program broke the check's protocol")
        try:
            reply = json.loads(line[1:])
            if type(reply) is not dict or type(reply.get("t", {})) is not dict:
                raise ValueError("not an answer")
        except (ValueError, RecursionError):
            self.end("failed", "the program broke the check's protocol")
        return reply

    # requests ------------------------------------------------------------------------

    def _say(self, kind, payload):
        try:
            self.channel.send(kind, payload)
        except OSError:
            self.gone("before the test's call reached it")

    def call(self, target, args, kwargs):
        try:
            request, sent = codec.call(target, args, kwargs, other=self._hand_back)
        except (codec.Unsendable, RecursionError) as error:
            raise TypeError("coral: %s cannot be passed to the program under test (only "
                            "plain data can)" % error) from None
        return self.request("C", request, sent)

    def request(self, kind, payload, sent):
        self._say(kind, payload)
        reply = self.answer()
        try:
            decoder = codec.Decoder(reply.get("t", {}), sent, other=self._handles)
            if "x" in reply:
                error = self._exception(reply["x"], decoder)
            else:
                return decoder.value(reply["v"])
        except (codec.Unsendable, KeyError, TypeError, ValueError, OverflowError,
                RecursionError, AttributeError) as error:
            self.end("failed", "the program's answer was not plain data (%s)"
                     % _describe(error))
        raise error

    @staticmethod
    def _hand_back(x):
        """What the test passes back to the program of the program's own: itself there
        (a callable or iterator it left in the test's list, too: a red-team pass)."""
        kind = type(x)
        if kind is ProgramObject:
            return ["h", x._handle]
        if kind is ProgramIterator:
            return ["g", x._handle]
        if kind is ProgramFunction and type(x._target) is int:
            return ["k", x._target]
        raise codec.Unsendable("a %s" % kind.__name__)

    def _handles(self, tag, rest):
        if len(rest) == 1 and type(rest[0]) is int:
            if tag == "h":
                return self.held.setdefault(rest[0], ProgramObject(rest[0]))
            if tag == "g":
                return ProgramIterator(self, rest[0])
            if tag == "k":
                return ProgramFunction(self, rest[0])
        raise codec.Unsendable("a malformed value")

    def _exception(self, x, decoder):
        return codec.exception(x, decoder, ProgramError, self.known)

    # the check -----------------------------------------------------------------------

    def loaded(self):
        line = self.line()
        if line is None:
            self.gone("while loading")
        if line[:1] == b"X":
            self.end("failed", line[1:].decode("utf-8", "replace"))
        if line[:1] != b"L":
            self.end("failed", "the program broke the check's protocol")

    def namespace(self):
        """The test's globals: the benchmark's own definitions of the names it takes from
        the program, proxies for those the candidate wrote."""
        namespace = {}
        helpers = self.private.get("helpers") or []
        if helpers:
            reference = {}
            exec(compile(self.private["reference"], "<benchmark>", "exec"), reference)
            namespace.update({n: reference[n] for n in helpers if n in reference})
            self.known = dict(namespace)  # the benchmark's own exception classes among them
        names = self.private["proxies"]
        self._say("N", names)
        reply = self.answer()
        try:
            decoder = codec.Decoder(reply.get("t", {}), None, other=self._handles)
            found = reply["n"]
            entry = self.private["entry_point"]
            for name in names:
                spec = found.get(name)
                if type(spec) is list and spec[:1] == ["f"]:
                    # the entry point is the function as it was when the test began (a
                    # program that rebinds it after a first right answer kept answering
                    # through the new one); other names are globals, looked up per call
                    bound = spec[1] if name == entry and len(spec) == 2 and type(
                        spec[1]) is int else name
                    namespace[name] = ProgramFunction(self, bound, name)
                elif type(spec) is list and len(spec) == 2 and spec[0] == "v":
                    namespace[name] = decoder.value(spec[1])
        except (codec.Unsendable, KeyError, TypeError, ValueError, OverflowError,
                RecursionError, AttributeError) as error:
            self.end("failed", "the program's answer was not plain data (%s)"
                     % _describe(error))
        return namespace

    def run(self):
        self.account(force=True)  # the marks idleness is counted from
        self.loaded()
        namespace = self.namespace()
        entry = self.private["entry_point"]
        if "seed" in self.private:  # the test's draws: not the program's to know (job.py)
            random.seed(self.private["seed"])
        try:
            exec(compile(self.private["test"], "<test>", "exec"), namespace)
            check = namespace["check"]
            if entry not in namespace:
                raise NameError("name %r is not defined" % entry)
            check(namespace[entry])
        except BaseException as error:  # noqa: B902 - the test's every failure is a verdict
            self.account(force=True)
            self.end("failed", _describe(error, True))
        self.account(force=True)
        self.end("passed", "")

    def end(self, verdict, detail):
        """Stop the program's process, report the verdict, and exit (the test never runs
        on after a verdict, whatever it catches)."""
        try:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except OSError:
            pass
        self.record({"verdict": verdict, "detail": " ".join(detail.split())[:300],
                     "cpu": round(self.cpu, 3), "idle": round(self.idle, 3)})
        times = os.times()
        self.send("E0 %.6f -1" % (times.user + times.system))
        os._exit(0)


def _describe(error, with_type=False):
    try:
        message = str(error)
    except BaseException:  # noqa: B902 - a message that cannot be made
        message = ""
    name = type(error).__name__
    if not with_type:
        return message or name
    return "%s: %s" % (name, message) if message else name


def _mute():
    """What this process prints goes nowhere: the run's output files lie in the folder the
    program's process can read."""
    sys.stdout.flush()
    sys.stderr.flush()
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    os.close(null)


def serve(send, record, private, load_module):
    """The check's process, from the moment its modules are loaded; never returns."""
    child = sys.modules["coral_inside.child"]  # the sandbox's own
    processes = sys.modules["coral_inside.processes"]
    _mute()
    times = os.times()
    send("L %.6f -1" % (times.user + times.system))
    pid = child.SPLIT["pid"]
    clock = processes.JobClock(os.getppid(), exclude=(os.getpid(),), root=pid)
    Checker(send, record, private, child.SPLIT["fd"], pid, clock).run()
