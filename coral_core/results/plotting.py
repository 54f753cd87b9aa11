"""matplotlib on the Agg backend (no display needed), and the metadata that keeps a
plot's bytes the same for the same data (no version string in the file)."""

from __future__ import annotations

from typing import Any

METADATA = {"Software": None}


def pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt
