"""Which mutants a session leaves out (coral_core.mutation.filters) and how the report
shows what survived (the mutation plugin's display): no process started."""

from __future__ import annotations

import re

import pytest

from coral_core.errors import UserError
from coral_core.mutation.filters import MutantFilter, parse_lines, pragma_lines
from coral_core.mutation.project_config import check_flag, read_options
from coral_plugins.evaluators.mutation.command import _line
from coral_plugins.evaluators.mutation.display import (changed_lines, resume_command,
                                                       survivor_lines)


def test_pragma_lines_are_comments_not_strings():
    source = ("x = 1  # pragma: no mutate\ny = '# pragma: no mutate'\n"
              "z = 2  #pragma:no   mutate because\n")
    assert pragma_lines(source) == {1, 3}


def test_a_filter_says_why_a_mutant_is_left_out():
    keep = MutantFilter(operators=("core/Replace",), exclude_operators=("core/ReplaceAnd",),
                        lines=((10, 20),), pragma=frozenset({12}))
    assert keep.reason("core/ReplaceComparisonOperator_Eq_NotEq", 11, 11) is None
    assert keep.reason("core/ReplaceComparisonOperator_Eq_NotEq", 11, 12) == \
        "pragma: no mutate"
    assert keep.reason("core/NumberReplacer", 11, 11) == "operator not selected (--operator)"
    assert keep.reason("core/ReplaceAndWithOr", 11, 11) == \
        "operator excluded (--exclude-operator)"
    assert keep.reason("core/ReplaceComparisonOperator_Eq_NotEq", 21, 21) == "outside --lines"
    assert MutantFilter().reason("anything", 1, 1) is None


@pytest.mark.parametrize("text,ranges", [("10-40,55", ((10, 40), (55, 55))), ("", ()),
                                         (" 3 , 4-4 ", ((3, 3), (4, 4)))])
def test_line_ranges(text, ranges):
    assert parse_lines(text) == ranges


@pytest.mark.parametrize("text", ["a-b", "0-3", "9-2", "1-"])
def test_bad_line_ranges_are_one_line(text):
    with pytest.raises(UserError, match="--lines"):
        parse_lines(text)


def test_survivors_fit_80_columns_with_what_they_change():
    diff = ("--- mutation diff ---\n--- a/pkg/m.py\n+++ b/pkg/m.py\n@@ -1,3 +1,3 @@\n"
            " def f(x):\n-    return x + " + "1" * 100 + "\n+    return x - 1\n")
    rows = [{"module": "pkg/m.py", "line": 2, "operator": "core/ReplaceBinaryOperator_Add_Sub",
             "occurrence": 0, "verdict": "survived", "mode": "swap", "diff": diff},
            {"module": "pkg/m.py", "line": 9, "operator": "core/NumberReplacer",
             "occurrence": 3, "verdict": "survived", "mode": "uncovered", "diff": ""},
            {"module": "pkg/m.py", "line": 4, "operator": "core/NumberReplacer",
             "occurrence": 1, "verdict": "killed", "mode": "swap", "diff": diff}]
    lines = survivor_lines({"mutants": rows}, 20)
    assert lines[0] == "surviving mutants (2):"
    assert lines[1] == "  pkg/m.py:2  core/ReplaceBinaryOperator_Add_Sub#0"
    assert lines[2].startswith("    - return x + 111") and lines[2].endswith("…")
    assert lines[3] == "    + return x - 1"
    assert lines[4] == "  pkg/m.py:9  core/NumberReplacer#3 (uncovered)"
    assert all(len(line) <= 80 for line in lines)
    assert survivor_lines({"mutants": rows}, 1)[-1].startswith("  ... and 1 more")
    assert survivor_lines({"mutants": rows}, 0) == []
    assert changed_lines(diff) == ["- return x + " + "1" * 100, "+ return x - 1"]


def test_the_resume_command_is_the_same_run_with_resume():
    argv = ["/venv/bin/coral", "mutation", "run", "--module", "my calc.py", "--fresh",
            "--tests", "t.py"]
    assert resume_command(argv) == \
        "coral mutation run --module 'my calc.py' --tests t.py --resume"


def test_pyproject_options_are_typed(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.coral.mutation]\nmodule = "pkg"\ntests = ["tests"]\nsample = 1\n'
        'exclude-operators = ["core/NumberReplacer"]\n')
    assert read_options(tmp_path) == {"module": "pkg", "tests": ["tests"], "sample": 1.0,
                                      "exclude-operators": ["core/NumberReplacer"]}
    assert read_options(tmp_path / "nowhere") == {}


@pytest.mark.parametrize("text,message", [
    ('[tool]\ncoral = "x"\n', "must be a table (coral is not)"),
    ("[tool.coral.mutation]\nworkers = true\n", "workers must be int"),
    ('[tool.coral.mutation]\ntests = [1]\n', "tests must be str"),
    ("[tool.coral.mutation\n", "cannot be read as TOML"),
    ("[tool.coral.mutation]\nmodul = 1\n", "has no key 'modul'"),
    # out-of-range values name the file's key, not a flag the user never gave
    ("[tool.coral.mutation]\nsample = 2\n", "sample must be a fraction in (0, 1], not 2"),
    ("[tool.coral.mutation]\nsample = nan\n", "sample must be a fraction in (0, 1], not nan"),
    ("[tool.coral.mutation]\nworkers = 0\n", "workers must be in [1, 4096] (each is a process), "
                                             "not 0"),
    ("[tool.coral.mutation]\nseed = 9223372036854775808\n", "seed must be in [-2**63, 2**63 - 1]"),
    ("[tool.coral.mutation]\nseed = -9223372036854775809\n", "integer out of range"),
    ("[tool.coral.mutation]\nsurvivors = -2\n", "survivors must be -1 (all)"),
    ('[tool.coral.mutation]\ntimeout-mode = "fast"\n', "timeout-mode must be relative or seed"),
])
def test_a_bad_pyproject_table_is_one_error(tmp_path, text, message):
    (tmp_path / "pyproject.toml").write_text(text)
    with pytest.raises(UserError, match=re.escape(message)):
        read_options(tmp_path)


@pytest.mark.parametrize("key, value, message", [
    ("workers", 99999999999999999999, "--workers must be in [1, 4096]"),
    ("seed", 2 ** 70, "--seed must be in [-2**63, 2**63 - 1]"),
    ("survivors", -2, "--survivors must be -1 (all), 0 (none) or a count, not -2"),
    ("sample", 0.0, "--sample must be a fraction in (0, 1], not 0.0"),
])
def test_a_flag_is_held_to_what_its_pyproject_key_may_be(key, value, message):
    """A red-team pass: --workers 99999999999999999999 and a 77-bit --seed ran."""
    with pytest.raises(UserError) as caught:
        check_flag(key, value)
    assert str(caught.value).startswith(message)
    assert check_flag(key, 1 if key != "sample" else 0.5) in (1, 0.5)


def test_the_summary_line_says_how_many_mutants_the_score_is_of():
    base = {"mutation_score": 50.0, "mutation_num": 56, "cosmic_ray_score": 50.0,
            "mutation_uncertainty": 1.0, "mutation_uncertainty_fpc": 1.0}
    whole = _line({**base, "counts": {"killed": 28, "survived": 28}})
    assert "of 56 mutants;" in whole
    sampled = _line({**base, "sampled": 17, "counts": {"killed": 9, "survived": 8}})
    assert "of 56 mutants (17 sampled);" in sampled
    filtered = _line({**base, "counts": {"killed": 6, "survived": 5, "skipped": 45}})
    assert "of 56 mutants (45 left out by --operator" in filtered
