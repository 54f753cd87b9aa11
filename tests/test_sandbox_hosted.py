"""Hosted (two-process) sandbox jobs at the sandbox's own level: the job's `prepare` runs
in the candidate's process alone and before the candidate's code, and the private part
reaches the other process whole, whatever its size against the padding's block."""

from __future__ import annotations

import pytest

from coral_core.sandbox import JobTemplate, Sandbox, SandboxPolicy
from coral_core.sandbox.wire import PRIVATE_BLOCK
from coral_core.scoring.program_tests import Case, ExecutionSpec, Step

# The host's side: relays nothing, reads what the candidate's process writes until that
# process ends, then records what it saw and what its own process was prepared with.
HARNESS = '''
import os, sys

PREPARED = []


def prepare(*arguments):
    PREPARED.append(list(arguments))


def serve(send, record, private, load_module):
    read_fd = sys.modules["coral_inside.child"].SPLIT["fd"][0]
    send("L 0.0 -1")
    seen = b""
    while True:
        chunk = os.read(read_fd, 65536)
        if not chunk:
            break
        seen += chunk
    record({"host_prepared": PREPARED, "private": private,
            "candidate": seen.decode("utf-8", "replace")})
    send("E0 0.0 -1")
'''
SETUP = ("import sys as _sys\n"
         "def run():\n"
         "    __coral_record__(_sys.modules['program'].SEEN)\n")
CANDIDATE = "import harness\nSEEN = [list(p) for p in harness.PREPARED]\n"


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(SandboxPolicy(timeout=10.0), workers=1) as box:
        yield box


def _run(sandbox: Sandbox, private: dict, prepare=("harness", "prepare", ("a", [1, 2]))):
    spec = ExecutionSpec(module="program", cases=(Case("run", Step(script="run"), ()),),
                         support=(("harness", HARNESS),), setup=SETUP, host="harness",
                         prepare=prepare)
    result = sandbox.run(JobTemplate(spec, sandbox.policy, [10.0]).job(CANDIDATE, private))
    assert not result.load_error, result.load_error
    (record,) = result.steps[0].records
    return record


def _recorded(record: dict) -> str:
    """What the candidate's process recorded (its protocol lines reach the host)."""
    (line,) = [line for line in record["candidate"].splitlines() if line.startswith("R")]
    return line[1:]


def test_prepare_runs_in_the_candidates_process_alone_before_its_code(sandbox):
    record = _run(sandbox, {"secret": 1})
    assert record["host_prepared"] == []  # the host's process never ran it
    # the candidate's module saw it done, with its arguments as plain data
    assert _recorded(record) == '[["a",[1,2]]]'
    assert record["private"] == {"secret": 1}


def test_without_prepare_nothing_is_called(sandbox):
    record = _run(sandbox, {"secret": 2}, prepare=())
    assert record["host_prepared"] == [] and _recorded(record) == "[]"
    assert record["private"] == {"secret": 2}


@pytest.mark.parametrize("size", [0, PRIVATE_BLOCK - 40, PRIVATE_BLOCK - 13, PRIVATE_BLOCK,
                                  3 * PRIVATE_BLOCK + 7])
def test_the_private_part_arrives_whole_at_any_size(sandbox, size):
    private = {"text": "x" * size, "tail": "\u00e9\n\u2603 }"}
    assert _run(sandbox, private)["private"] == private


def test_a_private_part_is_padded_to_whole_blocks():
    spec = ExecutionSpec(module="program", cases=(Case("run", Step(script="run"), ()),),
                         support=(("harness", HARNESS),), setup=SETUP, host="harness")
    template = JobTemplate(spec, SandboxPolicy(timeout=10.0), [10.0])
    short, longer = template.job("x = 1", {"a": "b"}), template.job("x = 1", {"a": "b" * 5000})
    assert len(short.body) == len(longer.body)  # the same block: lengths tell nothing
