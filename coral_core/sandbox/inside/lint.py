"""The analysis worker: parsing, flake8 and bandit of candidate code, inside the sandbox.

Unlike the other modules here it imports third-party packages (flake8 and bandit, from the
bound site-packages), and it never runs candidate code: it reads it. It still runs in a
sandbox of its own, as the sandbox user, with resource limits and a CPU timer per request,
because hostile source can make a linter recurse until it crashes, loop, or print: here that
costs a worker (replaced by the host) and the candidate gets the worst score for that
objective; nothing reaches the host's stdout.

Directives and encodings cannot change an objective: flake8 runs with disable_noqa (no
`# noqa`, no `# flake8: noqa`), bandit with ignore_nosec, and both read the text Python
runs. compile() of a string ignores a coding declaration, so it is defused here too (the
word `coding` in a comment on the first two lines becomes `c0ding`: every position stays);
text Python cannot run as UTF-8 source (a leading byte-order mark, lone surrogates) is
refused (worst score). The text reaches the linters through a memfd, never a file on disk.

Host -> worker and back: a 4-byte big-endian length, then JSON.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import io
import json
import logging
import os
import re
import resource
import signal
import struct
import sys
import warnings

from . import hidden_calls, testscreen
from .limits import CPU_SECONDS, MAX_SOURCE
from .privileges import die_with_parent, harden

# The analysis worker's address space, deliberately not `execution.memory_mb` (the limit a
# candidate's own process runs under): this worker never runs candidate code, it holds
# flake8 and bandit, which need more than a small candidate limit allows, and it serves
# every candidate of a run, so a user's limit for candidates must not break their linting.
MEMORY_BYTES = 2 << 30

_COMMENT = re.compile(r"^[ \t\f]*#")
_COOKIE_WORD = re.compile(r"coding(?=[:=])")

# What every linter is run on once before the worker drops its privileges (so that each
# imports what it imports on first use) and once after (check): findings of pyflakes,
# pycodestyle and two bandit plugins, which a linter whose plugins did not load lacks.
SAMPLE = (b"import os\nimport subprocess\n\n\ndef run(a,b):\n"
          b"    return subprocess.call(a, shell=True)\n")
SAMPLE_FINDINGS = {"flake8": {"F401", "E231"}, "bandit": {"B404", "B602"}}
CHECK_OPTIONS = {"max_line_length": 99, "select": ["E", "F", "W", "C"]}  # a guide made then


class Timeout(BaseException):
    """A BaseException: linters catch Exception from their plugins and must not swallow it."""


class Unavailable(Exception):
    """A linter failed for a reason no candidate's code can cause (it cannot read its own
    files, or cannot set itself up): the host must say so, not score the candidate."""


def canonical(code):
    """(text, UTF-8 bytes) that every linter reads: `code` as Python runs it (see above)."""
    if code.startswith("\ufeff"):
        raise ValueError("the program starts with a byte-order mark, which Python refuses")
    lines = code.split("\n", 2)
    for index in range(min(2, len(lines))):
        if _COMMENT.match(lines[index]):
            lines[index] = _COOKIE_WORD.sub("c0ding", lines[index])
    text = "\n".join(lines)
    return text, text.encode("utf-8")  # UnicodeEncodeError for lone surrogates


def describe(error):
    try:
        text = "%s: %s" % (type(error).__name__, error)
    except BaseException:
        text = type(error).__name__
    return " ".join(text.split())[:300]


class Linters:
    """flake8 style guides (one per set of options) and the bandit configuration.

    Each linter is set up, and run once on SAMPLE, while the worker is still root: they
    import their plugins (and those their modules) on first use, from files the sandbox
    user may not be able to read. One that cannot be set up is `broken`, not fatal: the
    worker still parses and screens, and the host says once why that linter cannot run.
    """

    def __init__(self):
        for name in ("bandit", "stevedore", "flake8"):  # they log to stderr: /dev/null here
            logging.getLogger(name).setLevel(logging.CRITICAL)
        self.broken = {}  # linter: why it does not work here
        self._guides = {}
        self.memfd = os.memfd_create("coral-lint", os.MFD_CLOEXEC)
        self.path = "/proc/self/fd/%d" % self.memfd
        for name, setup in (("flake8", self._setup_flake8), ("bandit", self._setup_bandit)):
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    setup()
            except Exception as error:
                self.broken[name] = describe(error)

    def _setup_flake8(self):
        from flake8.api import legacy
        from flake8.options.parse_args import parse_args

        # flake8 looks for its plugins again for every style guide, through the metadata
        # files of the installed packages; as the sandbox user those can be unreadable (a
        # virtual environment in a root-only folder), and a guide made then has no plugins
        # at all (KeyError: 'default'). Found once, here, while the worker is still root:
        # every guide starts from a copy (--isolated: no configuration file is read).
        plugins, defaults = parse_args(["--isolated"])
        legacy.parse_args = lambda argv: (plugins, copy.deepcopy(defaults))
        self._legacy = legacy
        self.load(SAMPLE)
        self.flake8({"max_line_length": 79})

    def _setup_bandit(self):
        from bandit.core import config, manager

        self._manager = manager
        self._bandit_config = config.BanditConfig()
        self.load(SAMPLE)
        self.bandit()

    def check(self):
        """After the worker dropped its privileges: each linter run on SAMPLE as the sandbox
        user (flake8 with a style guide made now, as for options not seen before). What
        fails here would fail for every candidate: it goes into `broken`."""
        for name, run in (("flake8", lambda: self.flake8(CHECK_OPTIONS, remember=False)),
                          ("bandit", self.bandit)):
            if name in self.broken:
                continue
            try:
                self.load(SAMPLE)
                reply = run()
            except Exception as error:
                self.broken[name] = describe(error)
                continue
            missing = SAMPLE_FINDINGS[name] - set(reply.get("codes", reply.get("tests", ())))
            if missing:
                self.broken[name] = ("%s found no %s in a sample that has them (its plugins "
                                     "did not load)" % (name, ", ".join(sorted(missing))))
        return self.broken

    def load(self, data):
        os.ftruncate(self.memfd, 0)
        view = memoryview(data)
        while len(view):
            view = view[os.pwrite(self.memfd, view, len(data) - len(view)):]

    def flake8(self, options, remember=True):
        key = json.dumps(options, sort_keys=True)
        entry = self._guides.get(key)
        if entry is None:
            settings = {"max_line_length": int(options.get("max_line_length", 79)),
                        "isolated": True, "quiet": 2, "disable_noqa": True}
            if options.get("select"):
                settings["select"] = [str(code) for code in options["select"]]
            try:  # before any candidate's code is read: a failure here is ours
                entry = [self._legacy.get_style_guide(**settings), {}]
            except Exception as error:
                raise Unavailable("flake8 could not make a style guide: "
                                  + describe(error)) from None
            if remember:
                self._guides[key] = entry
        guide, before = entry
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            report = guide.check_files([self.path])
        if printed.getvalue() or getattr(guide._application, "catastrophic_failure", False):
            # flake8 reports a plugin that crashed (pyflakes on a deep expression) by
            # printing it and counting no violation: here that is a failure, never a pass
            raise RuntimeError("flake8 failed: " + " ".join(printed.getvalue().split())[:200])
        totals = _totals(report.get_statistics(""))  # cumulative over this guide's checks
        entry[1] = totals
        codes = sorted(c for c, n in totals.items() if n > before.get(c, 0))
        return {"violations": report.total_errors, "codes": codes[:20]}

    def bandit(self):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            scan = self._manager.BanditManager(self._bandit_config, "file", quiet=True,
                                               ignore_nosec=True)
        scan.discover_files([self.path])
        scan.run_tests()
        if scan.skipped or not scan.files_list:  # bandit hides its own failures as skips
            reason = scan.skipped[0][1] if scan.skipped else "nothing scanned"
            raise RuntimeError("bandit could not scan the program (%s)" % reason)
        issues = scan.get_issue_list()
        high = sum(1 for issue in issues if issue.severity == "HIGH")
        medium = sum(1 for issue in issues if issue.severity == "MEDIUM")
        return {"high": high, "medium": medium, "low": len(issues) - high - medium,
                "tests": sorted({str(issue.test_id) for issue in issues})[:50]}


def with_hidden_calls(report, text):
    """bandit's report with the calls it cannot see (hidden_calls.py) as medium issues."""
    found = hidden_calls.findings(ast.parse(text))
    return {**report, "medium": report["medium"] + len(found),
            "tests": sorted(set(report["tests"]) | {code for _, code, _ in found})[:50]}


def _totals(lines):
    """flake8's statistics lines ("COUNT CODE message") accumulate across checks."""
    totals = {}
    for line in lines:
        count, code = line.split(" ", 2)[:2]
        totals[code] = totals.get(code, 0) + int(count)
    return totals


def parse(code):
    """Whether the code parses, and the functions it defines at module level."""
    try:
        tree = ast.parse(canonical(code)[0])
    except Exception:  # SyntaxError, ValueError, RecursionError, MemoryError, encodings
        return {"parses": False, "functions": [], "statements": 0}
    names = [node.name for node in tree.body
             if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]
    return {"parses": True, "functions": names[:1000], "statements": len(tree.body)}


def handle(linters, request):
    """(reply, whether this worker may serve another request)."""
    code = request.get("code")
    if not isinstance(code, str) or len(code) > MAX_SOURCE:
        return {"error": "the program is too large to analyse"}, True
    kind = request.get("kind")
    signal.setitimer(signal.ITIMER_PROF, CPU_SECONDS)
    try:
        if kind == "parse":
            return parse(code), True
        if kind == "screen":
            modules = (request.get("options") or {}).get("modules") or []
            return testscreen.screen(canonical(code)[0], [str(m) for m in modules]), True
        if kind in linters.broken:  # the host knew from our hello, and asks nonetheless
            return {"error": linters.broken[kind], "internal": True}, True
        linters.load(canonical(code)[1])
        if kind == "flake8":
            return linters.flake8(request.get("options") or {}), True
        if kind == "bandit":
            return with_hidden_calls(linters.bandit(), canonical(code)[0]), True
        return {"error": "unknown request"}, True
    except Timeout:
        return {"error": "the linter took more than %d s of CPU time" % CPU_SECONDS}, False
    except (ValueError, UnicodeError) as error:  # refused before any linter ran
        return {"error": describe(error)}, True
    except (Unavailable, ImportError, PermissionError) as error:
        # Not the code's doing (a linter that cannot read its own files as the sandbox
        # user): the host reports it, the candidate is not scored on it.
        return {"error": describe(error), "internal": True}, False
    except BaseException as error:  # a linter failed: its state may be broken
        return {"error": describe(error)}, False
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)


def _timeout(*_):
    raise Timeout()


def _read(fd, size):
    parts, left = [], size
    while left:
        chunk = os.read(fd, left)
        if not chunk:
            return None
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def _send(fd, value):
    data = json.dumps(value, separators=(",", ":")).encode()
    view = memoryview(struct.pack(">I", len(data)) + data)
    while len(view):
        view = view[os.write(fd, view):]


def main(argv):
    """argv: JSON options: `ids` ([uid, gid] to run as, when started as root)."""
    options = json.loads(argv[1]) if len(argv) > 1 else {}
    harden()
    requests, replies = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # whatever a linter prints goes nowhere
        os.dup2(null, fd)
    linters = Linters()
    ids = options.get("ids")
    if ids and os.geteuid() == 0:
        os.setgroups([])
        os.setresgid(ids[1], ids[1], ids[1])
        os.setresuid(ids[0], ids[0], ids[0])
    die_with_parent()
    for which, value in ((resource.RLIMIT_AS, MEMORY_BYTES), (resource.RLIMIT_CORE, 0),
                         (resource.RLIMIT_NPROC, 0), (resource.RLIMIT_FSIZE, 8 * MAX_SOURCE)):
        try:
            resource.setrlimit(which, (value, value))
        except (ValueError, OSError):
            pass
    signal.signal(signal.SIGPROF, _timeout)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 1000))
    _send(replies, {"ready": True, "broken": linters.check()})
    while True:
        head = _read(requests, 4)
        if head is None:
            return
        body = _read(requests, struct.unpack(">I", head)[0])
        if body is None:
            return
        try:
            request = json.loads(body)
        except ValueError:
            return
        reply, healthy = handle(linters, request)
        if not healthy:
            reply["retire"] = True  # the host replaces this worker
        _send(replies, reply)
        if not healthy:
            return
