"""Running untrusted candidate programs: see docs/sandbox.md for the guarantees."""

from .analysis import Analyzer
from .ask import analyzer_for, syntax_valid
from .decode import Opaque
from .policy import SandboxPolicy
from .pool import Sandbox
from .results import ExecutionResult, StepResult
from .wire import Job, JobTemplate

__all__ = ["Analyzer", "ExecutionResult", "Job", "JobTemplate", "Opaque", "Sandbox",
           "SandboxPolicy", "StepResult", "analyzer_for", "syntax_valid"]
