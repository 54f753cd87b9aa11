"""The calls bandit cannot see, found in the source: names built at run time."""

from __future__ import annotations

import ast

import pytest

from coral_core.sandbox.inside import hidden_calls


def _codes(source: str) -> list[str]:
    return [code for _, code, _ in hidden_calls.findings(ast.parse(source))]


@pytest.mark.parametrize("source, codes", [
    ("m = __import__('sub' + 'process')\n", ["CORAL1"]),
    ("m = __import__('os')\n", ["CORAL1"]),
    ("import importlib\nm = importlib.import_module(name)\n", ["CORAL1"]),
    ("import os\nf = getattr(os, 'sys' + 'tem')\n", ["CORAL2"]),
    ("import builtins\nf = getattr(builtins, x)\n", ["CORAL2"]),
    ("import os as o\nsetattr(o, name, None)\n", ["CORAL2"]),
    ("f = exec\n", ["CORAL3"]),
    ("import builtins\nrun = builtins.eval\n", ["CORAL3"]),
    ("call(compile)\n", ["CORAL3"]),
    ("import sys\nm = sys.modules[n]\n", ["CORAL4"]),
    ("f = globals()['ev' + 'al']\n", ["CORAL4"]),
    ("f = __builtins__[name]\n", ["CORAL4"]),
])
def test_names_built_at_run_time_are_found(source, codes):
    assert _codes(source) == codes


@pytest.mark.parametrize("source", [
    "import importlib\njson = importlib.import_module('json')\n",
    "value = getattr(node, 'successors', [])\n",
    "class V:\n    def visit(self, kind):\n        return getattr(self, 'visit_' + kind)()\n",
    "import os\npath = getattr(os, 'sep')\n",
    "eval('1 + 1')\nexec('x = 1')\ncode = compile('1', 'f', 'eval')\n",  # bandit's to see
    "x = globals()['__name__']\nimport sys\nm = sys.modules['json']\n",
    "from collections import namedtuple\nPoint = namedtuple('Point', 'x y')\n",
])
def test_honest_programs_name_what_they_call(source):
    assert _codes(source) == []


def test_no_quixbugs_program_is_flagged(data_dir):
    folder = data_dir / "quixbugs"
    programs = sorted(folder.glob("correct_python_programs/*.py")) + sorted(
        folder.glob("python_programs/*.py"))
    assert len(programs) >= 80
    assert {p.name: _codes(p.read_text()) for p in programs if _codes(p.read_text())} == {}
