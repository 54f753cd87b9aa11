"""What two-process ("hosted") sandbox jobs share: the codec that carries plain data
between the job's two processes (see docs/testgen.md and docs/benchmarks.md).

The sandbox runs a hosted job as two forks (sandbox/inside/child.py): one loads the job's
public part (the candidate), the other, forked first and alone in reading the private part,
serves or drives it. The files here are support-module text sent into the sandbox, so that
test generation and the HumanEval checks cross values the same way.
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).parent


def source_of(name: str) -> str:
    """The text of `name`.py in this package, to be sent as a sandbox support module."""
    return (HERE / f"{name}.py").read_text(encoding="utf-8")
