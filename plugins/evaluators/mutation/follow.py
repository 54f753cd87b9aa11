"""Following the Python processes a test starts, so that such a test need not send every
mutant the exact way.

A test that runs the module in a subprocess (`python -m package`, a CLI test) was a "disk
test": its coverage unknown and its processes reading the unmutated file, every mutant ran
it the exact way, a fresh pytest each (python-slugify: 155 of 521 mutants, four fifths of
the run). Now each Python process a test starts runs probe.py first (as `sitecustomize`,
through PYTHONPATH): it reports the module's lines it ran and the processes it started, and
under a mutant it imports the mutant, served for the module's file as the worker's reload
mode serves it (what cosmic-ray's rewritten file would give it). When every process a test
started, and every one those started, reported, and none read the module's file or did
anything the probe cannot follow, the test is an ordinary one: its coverage includes its
processes' lines and its verdict in memory is cosmic-ray's. Otherwise it stays a disk test
(in the baseline), or the mutant's verdict is not proven and it runs the exact way (under
a mutant), as before.
"""

from __future__ import annotations

import glob
import json
import os
from dataclasses import dataclass, field

from coral_plugins.evaluators.mutation import probe

VARIABLE = probe.VARIABLE


@dataclass
class Followed:
    """What one run's tests' processes did: per test, lines of the module they ran."""

    lines: dict[str, set[int]] = field(default_factory=dict)
    events: list[dict] = field(default_factory=list)  # the audit events left to judge
    touched: set[tuple[str, int]] = field(default_factory=set)  # annotations read (census)
    census_unknown: bool = False  # a process could not tell whose annotations it read


class Follow:
    """The probe's folder (its `sitecustomize.py`) and the reports its processes write."""

    def __init__(self, module_path: str, scratch: str):
        self.folder = os.path.realpath(os.path.join(scratch, "probe"))
        self.reports = os.path.join(scratch, "probe-reports")
        os.makedirs(self.folder, exist_ok=True)
        os.makedirs(self.reports, exist_ok=True)
        with open(probe.__file__, encoding="utf-8") as source:
            text = source.read()
        with open(os.path.join(self.folder, "sitecustomize.py"), "w", encoding="utf-8") as out:
            out.write(text)
        self.config = {"dir": self.reports, "module": os.path.realpath(module_path),
                       "test": ""}

    def install(self, environ) -> None:
        """The probe first on the path of every process started from here on."""
        path = environ.get("PYTHONPATH")
        environ["PYTHONPATH"] = self.folder + (os.pathsep + path if path else "")
        environ[VARIABLE] = json.dumps(self.config)

    def set_test(self, test: str, environ=os.environ) -> None:
        """The test whose processes report from now on ("" between tests: not followed)."""
        environ[VARIABLE] = json.dumps({**self.config, "test": test})

    def serve(self, source: str) -> None:
        """Under a mutant (in the worker's forked child): the processes its tests start
        import the mutant's text for the module's file."""
        path = os.path.join(self.reports, f"mutant-{os.getpid()}.py.txt")
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(source)
        self.config = {**self.config, "mutant": path}

    def take_census(self) -> None:
        """The baseline (in the worker's forked child): each process also says whose
        annotations it read (coral_core.mutation.annotations)."""
        self.config = {**self.config, "census": True}

    def collect(self) -> list[dict]:
        """Every report written since the last collect (each read once)."""
        found = []
        for path in glob.glob(os.path.join(self.reports, "*.json")):
            try:
                with open(path, encoding="utf-8") as handle:
                    found.append(json.load(handle))
            except (OSError, ValueError):
                pass
            try:
                os.unlink(path)
            except OSError:
                pass
        for path in glob.glob(os.path.join(self.reports, "*.part")) + glob.glob(
                os.path.join(self.reports, "mutant-*.py.txt")):
            try:
                os.unlink(path)
            except OSError:
                pass
        return found


def judge(events: list[dict], reports: list[dict]) -> Followed:
    """The audit events of a run with its followed starts settled: a test's starts (in its
    own body) whose every process reported and did nothing unfollowable are dropped and
    their lines kept; any other start stays a "started a process" event, as before."""
    by_test: dict[str, dict[int, dict]] = {}
    for report in reports:  # one pid may report twice (before an exec, and after): merged
        mine = by_test.setdefault(str(report.get("test", "")), {})
        pid = int(report.get("pid", -1))
        known = mine.setdefault(pid, {"lines": [], "started": [], "troubles": []})
        for key in ("lines", "started", "troubles"):
            known[key] = list(known[key]) + list(report.get(key) or ())
    starts: dict[str, list[dict]] = {}
    popens: dict[str, int] = {}
    out = Followed()
    out.touched = {(str(k[0]), int(k[1])) for report in reports
                   for k in report.get("touched") or ()}
    out.census_unknown = any("touched" in r and r["touched"] is None for r in reports)
    for event in events:
        if "popen" in event:  # subprocess.Popen: its fork_exec must give a start
            popens[event["test"]] = popens.get(event["test"], 0) + 1
        elif "start" not in event:
            out.events.append(event)
        elif event.get("phase") == "call" and event.get("test"):
            starts.setdefault(event["test"], []).append(event)
        else:  # at collection, in a fixture, between tests: it may reach any test
            out.events.append(_unfollowed(event, ""))
    for test in sorted(set(starts) | set(popens)):
        mine = starts.get(test, [])
        if popens.get(test, 0) > len(mine):
            why = "a process started without a pid to follow"
        else:
            why, lines = _settle(mine, by_test.get(test, {}))
        if why is None:
            out.lines[test] = lines
        else:
            out.events.extend(_unfollowed(event, why) for event in mine or [
                {"test": test, "phase": "call", "start": "subprocess"}])
    return out


def _settle(starts: list[dict], reports: dict[int, dict]) -> tuple[str | None, set[int]]:
    """(None, the lines they ran) when every process of the tree reported cleanly, else
    (why not, ...)."""
    lines: set[int] = set()
    waiting = [int(event["pid"]) for event in starts]
    seen: set[int] = set()
    while waiting:
        pid = waiting.pop()
        if pid in seen:
            continue
        seen.add(pid)
        report = reports.get(pid)
        if report is None:
            return "not followed: not a Python program, or it ended without exiting", lines
        if report.get("troubles"):
            return report["troubles"][0], lines
        lines |= set(report.get("lines") or ())
        waiting.extend(int(pid) for pid in report.get("started") or ())
    return None, lines


def _unfollowed(event: dict, why: str) -> dict:
    return {"test": event.get("test", ""), "phase": event.get("phase"),
            "why": f"started a process ({event['start']})" + (f": {why}" if why else "")}
