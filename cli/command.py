"""Help output that reads like a Unix tool's: flags without a `<bool>` type, arguments as
`RUN_DIR` (not `{run_dir}`), `-h` beside `--help`, defaults shown. It lives in the core
(coral_core.terminal), where plugins' commands find it too."""

from __future__ import annotations

from coral_core.terminal import CONTEXT, CoralCommand, CoralGroup

__all__ = ["CONTEXT", "CoralCommand", "CoralGroup"]
