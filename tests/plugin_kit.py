"""Real third-party plugin distributions for tests: dist-info metadata with entry points.

`importlib.metadata` finds them on sys.path exactly as it finds a pip-installed package,
so Coral's entry-point discovery is exercised for real (no monkeypatched registry). The
example plugins are real modules in `example_plugins/` (linted, readable as a third-party
author would write them); a test that needs a plugin of its own passes its source.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

EXAMPLES = Path(__file__).with_name("example_plugins")


def make_distribution(root: Path, name: str, modules: dict[str, str],
                      entry_points: dict[str, str], version: str = "0.1.0") -> Path:
    """Write `modules` (module name -> source) and NAME-VERSION.dist-info into `root`."""
    root.mkdir(parents=True, exist_ok=True)
    for module, source in modules.items():
        (root / f"{module}.py").write_text(textwrap.dedent(source), encoding="utf-8")
    info = root / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n", encoding="utf-8")
    lines = ["[coral]"] + [f"{ep} = {target}" for ep, target in entry_points.items()]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (info / "RECORD").write_text("", encoding="utf-8")
    return root


def _example(module: str) -> dict[str, str]:
    return {module: (EXAMPLES / f"{module}.py").read_text(encoding="utf-8")}


def echo_model_distribution(root: Path) -> Path:
    return make_distribution(root, "coral-echo-model", _example("coral_echo_model"),
                             {"echo": "coral_echo_model"})


def kitchen_sink_distribution(root: Path) -> Path:
    return make_distribution(root, "coral-kitchen-sink", _example("coral_kitchen_sink"),
                             {"kitchen": "coral_kitchen_sink"}, version="2.3.4")


def flaky_distribution(root: Path) -> Path:
    return make_distribution(root, "coral-flaky", _example("coral_flaky"),
                             {"flaky": "coral_flaky"})
