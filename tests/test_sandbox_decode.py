"""Recorded values are decoded with caps on size, depth, count and work (issue 7, class 3):
whatever a candidate's record holds, the parent spends bounded time on it and either gets
plain builtins back or a DecodeError (that step's error)."""

from __future__ import annotations

import json
import time

import pytest

from coral_core.sandbox.decode import MAX_EQUAL_HASHES, DecodeError, Opaque, decode_record

pytestmark = pytest.mark.loaded  # make test runs it beside CPU hogs

M = (1 << 61) - 1  # hash(k * M) == 0 for every int k


def test_plain_values_come_back_as_builtins():
    text = json.dumps([1, 2.5, "s", None, True, {"t": [1, {"b": "ff"}]}, {"s": [1, 2]},
                       {"fs": [3]}, {"d": [["k", {"t": [1, 2]}], [{"t": [1]}, 2]]},
                       {"o": 3, "truthy": False}])
    assert decode_record(text) == [1, 2.5, "s", None, True, (1, b"\xff"), {1, 2},
                                   frozenset({3}), {"k": (1, 2), (1,): 2}, Opaque(3, False)]
    assert decode_record(text.encode()) == decode_record(text)


@pytest.mark.parametrize("build", [
    lambda n: {"s": [k * M for k in range(1, n)]},
    lambda n: {"fs": [{"t": [k * M]} for k in range(1, n)]},
    lambda n: {"d": [[k * M, 0] for k in range(1, n)]},
])
def test_sets_and_dicts_of_colliding_hashes_are_refused_in_linear_time(build):
    text = json.dumps(build(40000))
    started = time.process_time()
    with pytest.raises(DecodeError, match="equal hashes"):
        decode_record(text)
    assert time.process_time() - started < 5.0  # quadratic rebuilding took 40 s and more


def test_a_few_equal_hashes_are_fine():
    values = [k * M for k in range(1, MAX_EQUAL_HASHES + 1)]
    assert decode_record(json.dumps({"s": values})) == set(values)


@pytest.mark.parametrize("text", [
    "[" * 100000 + "]" * 100000,
    '{"t":[' * 5000 + "1" + "]}" * 5000,
    '{"s":[[1]]}', '{"d":[[[1],2]]}', '{"d":[[1]]}', '{"b":"zz"}', '{"x":"boom"}',
    '{"x":[[[]]]}', '{"q":1}', '{"o":"1","truthy":true}', "1" * 5000, "nul\x00", "\xff",
])
def test_malformed_or_unbounded_records_are_decode_errors(text):
    with pytest.raises(DecodeError):
        decode_record(text.encode("utf-8", "surrogateescape") if text == "\xff" else text)


def test_node_count_is_capped():
    with pytest.raises(DecodeError, match="too large"):
        decode_record("[" + ",".join(["0"] * 1_100_000) + "]")
