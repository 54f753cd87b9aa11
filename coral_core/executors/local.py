"""The built-in `local` executor plugin: runs are generated and scored on this machine
(`in_process.LocalExecutor`, imported when a run uses it)."""

from coral_core.hookspecs import hookimpl
from coral_core.lazy import Lazy


@hookimpl
def coral_register_executors(register):
    register("local", Lazy("coral_core.executors.in_process:LocalExecutor"))
