"""Running untrusted candidate programs: see docs/sandbox.md for the guarantees."""

from coral_core.sandbox.analysis import Analyzer
from coral_core.sandbox.ask import analyzer_for, syntax_valid
from coral_core.sandbox.decode import Opaque
from coral_core.sandbox.policy import SandboxPolicy
from coral_core.sandbox.pool import Sandbox
from coral_core.sandbox.results import ExecutionResult, StepResult
from coral_core.sandbox.wire import Job, JobTemplate

__all__ = ["Analyzer", "ExecutionResult", "Job", "JobTemplate", "Opaque", "Sandbox",
           "SandboxPolicy", "StepResult", "analyzer_for", "syntax_valid"]
