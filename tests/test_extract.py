"""Finding the program in a model's reply."""

from __future__ import annotations

import pytest

from coral_core.extract import extract_python

pytestmark = pytest.mark.loaded  # make test runs it beside CPU hogs

FIXED = "def gcd(a, b):\n    if b == 0:\n        return a\n    return gcd(b, a % b)"


def test_completion_that_closes_the_prompt_fence():
    assert extract_python(FIXED + "\n```\nThis works because...", "gcd") == FIXED


def test_chat_reply_with_prose_around_one_block():
    reply = f"Sure! Here is the fix:\n\n```python\n{FIXED}\n```\n\nThe bug was the order."
    assert extract_python(reply, "gcd") == FIXED


def test_several_blocks_prefers_the_last_that_defines_the_entry_point():
    reply = (f"The buggy code:\n```python\ndef gcd(a, b):\n    return gcd(a % b, b)\n```\n"
             f"Fixed:\n```python\n{FIXED}\n```\nUsage:\n```python\nprint(gcd(4, 6))\n```\n")
    assert extract_python(reply, "gcd") == FIXED


def test_a_test_file_is_preferred_to_the_function_quoted_after_it():
    """A red-team reply gave the tests, then the function under test "for reference": the
    last block that parsed won, and the file was scored on no tests."""
    tests = "from gcd import gcd\n\n\ndef test_gcd():\n    assert gcd(35, 21) == 7"
    classy = "import gcd\n\n\nclass TestGcd:\n    def test_one(self):\n        assert 1"
    for block in (tests, classy):
        reply = f"Tests:\n```python\n{block}\n```\nFor reference:\n```python\n{FIXED}\n```"
        assert extract_python(reply, tests=True) == block
    assert extract_python(f"```python\n{FIXED}\n```", tests=True) == FIXED  # none: as before


def test_indented_block_is_dedented():
    indented = "\n".join("    " + line for line in FIXED.splitlines())
    reply = f"1. Fix it:\n   ```py\n{indented}\n   ```\n"
    assert extract_python(reply, "gcd") == FIXED


def test_bare_code_with_trailing_prose_is_trimmed_to_what_parses():
    reply = f"Here you go\n{FIXED}\nThis is correct because gcd(b, a % b) shrinks."
    assert extract_python(reply, "gcd") == FIXED


def test_imports_and_helpers_before_the_function_are_kept():
    code = "import math\n\n\ndef helper(x):\n    return x\n\n\n" + FIXED
    assert extract_python(f"```python\n{code}\n```", "gcd") == code


def test_unfenced_block_without_closing_fence():
    assert extract_python(f"```python\n{FIXED}\n", "gcd") == FIXED


def test_replies_that_would_crash_or_stall_a_parser_are_bounded():
    """Extraction runs in the parent on what a model wrote: a deep expression (RecursionError
    or MemoryError from ast.parse), thousands of lines of prose after the code (one parse
    per trimmed ending), and whitespace a careless pattern backtracks over."""
    import time

    replies = [
        "```python\ndef gcd(a, b):\n    return " + "-" * 200000 + "a\n```",
        "def gcd(a, b):\n    return a" + ".b" * 100000 + "\n",
        FIXED + "\n" + "This is prose, not code.\n" * 20000,
        "\n" * 200000 + "x",
        "```python\n" + "\n" * 100000 + "def gcd(a, b:\n```",
        "def gcd(a, b):\n    x = " + "+".join(["a"] * 5000) + "\n",
    ]
    for reply in replies:
        started = time.process_time()
        code = extract_python(reply, "gcd")
        assert isinstance(code, str)
        assert time.process_time() - started < 10.0, reply[:40]


@pytest.mark.parametrize("unit", ["`", "```a", "``` ", "```\n", "\n```python\n", "    \t"])
def test_extraction_is_linear_in_the_reply(unit):
    """CPU time, not wall time, and a generous bound: an 8x longer reply of a hostile shape
    costs far less than 64x (quadratic), whatever the machine's load."""
    import time

    def cost(size: int) -> float:
        text = unit * (size // len(unit))
        best = float("inf")
        for _ in range(3):
            started = time.process_time()
            extract_python(text, "gcd")
            best = min(best, time.process_time() - started)
        return best

    small, large = cost(20_000), cost(160_000)
    assert large <= max(24 * small, 0.05), (small, large)
