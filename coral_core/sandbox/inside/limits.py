"""Limits both sides of the sandbox agree on. The worker and the analysis worker enforce
them inside; the host reads them (this module only: constants, no code) to size its own
waits and refuse oversized requests before they are sent."""

WALL_FACTOR = 3.0  # a step may take this many times its timeout in wall-clock time
CPU_SECONDS = 20  # an analysis request's CPU time
MAX_SOURCE = 1 << 20  # characters of code an analysis request may carry
