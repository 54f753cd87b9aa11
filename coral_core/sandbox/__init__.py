"""Running untrusted candidate programs: see docs/sandbox.md for the guarantees."""

from .decode import Opaque
from .policy import SandboxPolicy
from .pool import ExecutionResult, Job, JobTemplate, Sandbox, StepResult

__all__ = ["ExecutionResult", "Job", "JobTemplate", "Opaque", "Sandbox", "SandboxPolicy",
           "StepResult"]
