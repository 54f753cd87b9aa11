"""Progress says what is happening: current counts while the model generates, a note while
the first batch starts, and a finished phase (a resumed run's) that stops its clock."""

from __future__ import annotations

import io
import threading
from concurrent.futures import Future

import pytest

from conftest import coral_env, run_coral
from coral_cli.progress import PlainProgress, RichProgress
from coral_core.config import experiment as configuration
from coral_core.run.factories import experiment_preset
from coral_core.run.rundir import RunInfo
from coral_core.run.runner import Planner
from coral_core.types import ScoredCandidate
from coral_core.run.store import RunStore
from coral_core.run.trial import TrialRun
from coral_core.types import Generation


class BlockingModelExecutor:
    """Its second `generate` waits until the driver has recorded an evaluation: it
    finishes only if scores are recorded while the model works."""

    name = "blocking"

    def __init__(self) -> None:
        self.calls = 0
        self.recorded = threading.Event()
        self.waited_for_record = False

    def generate(self, model, requests):
        self.calls += 1
        if self.calls == 2:
            self.waited_for_record = self.recorded.wait(60)
        return [[Generation(f"def gcd(a, b):\n    return {self.calls}\n")] for _ in requests]

    def submit(self, scoring, task, text, extract=True):
        done: Future = Future()
        done.set_result(ScoredCandidate({"bugfix": 1.0}, 1.0, True, {}, text))
        return done


class Recorder:
    def __init__(self, executor: BlockingModelExecutor) -> None:
        self.executor = executor
        self.events: list[tuple[str, str, int]] = []

    def start(self, phase, total, done=0):
        self.events.append(("start", phase, done))

    def advance(self, phase, amount=1):
        self.events.append(("advance", phase, amount))
        if phase == "evaluate":
            self.executor.recorded.set()

    def note(self, phase, text):
        self.events.append(("note", phase, len(text)))


def test_evaluations_are_recorded_while_the_model_generates(tmp_path, data_dir):
    config = configuration.merge(experiment_preset("quixbugs"), {
        "dataset": {"data_dir": str(data_dir), "split": "train", "problems": ["gcd"]},
        "model": {"batch_size": 1}, "run": {"samples": 3}})
    plan = Planner(config).plan(0, {})
    store = RunStore(tmp_path / "coral.sqlite")
    executor = BlockingModelExecutor()
    progress = Recorder(executor)
    try:
        result = TrialRun(plan, store, executor, RunInfo(tmp_path, config, False),
                          progress).run()
    finally:
        store.close()
    assert executor.waited_for_record, "no evaluation was recorded while the model worked"
    assert result["problems"][0]["n"] == 3 and result["problems"][0]["c"] == 3
    notes = [e for e in progress.events if e[0] == "note"]
    assert notes[0][2] > 0 and notes[-1][2] == 0  # a note while starting, cleared after


def test_plain_progress_names_what_a_phase_waits_for(capsys):
    progress = PlainProgress(every=3600)
    progress.note("generate", "first batch: includes model start-up")
    progress.start("generate", 4)
    progress.advance("generate")
    progress.note("generate", "")
    progress.advance("generate", 3)
    lines = capsys.readouterr().err.splitlines()
    assert lines == ["generate: 0/4 (first batch: includes model start-up)", "generate: 4/4"]


def test_a_phase_already_complete_stops_its_clock():
    progress = RichProgress()
    progress.start("generate", 10, 10)
    progress.start("evaluate", 10, 3)
    generate, evaluate = progress._progress.tasks
    assert generate.finished and generate.finished_time is not None
    assert not evaluate.finished


@pytest.mark.parametrize("width", [60, 80, 132])
def test_bars_leave_room_for_the_echoed_ctrl_c(width):
    """A bar as wide as the terminal leaves the cursor in its last column, so the "^C" the
    terminal echoes wraps it and the display's last redraw leaves every bar twice."""
    from rich.console import Console

    from coral_cli.progress import ECHO_ROOM

    progress = RichProgress()
    progress.label("trial 3/16 (temperature=0.2, max_new_tokens=256)")
    progress.start("generate", 400, 12)
    progress.note("generate", "waiting for Ray: 3 calls in flight, oldest 40 s " * 4)
    console = Console(width=width, record=True, color_system=None, file=io.StringIO())
    console.print(progress._progress.get_renderable())
    lines = console.export_text().splitlines()
    assert lines and max(len(line) for line in lines) <= width - ECHO_ROOM
    assert "12/400" in lines[0]


def test_plain_progress_says_which_trial_each_line_is_about(tmp_path, data_dir):
    config = tmp_path / "grid.toml"
    config.write_text('[search]\nstrategy = "grid"\n[search.space]\n'
                      '"model.temperature" = [0.2, 0.4]\n')
    result = run_coral("run", "--plugin", "quixbugs", "--model", "reference", "--config",
                       str(config), "--limit", "1", "--samples", "2", "--out",
                       str(tmp_path / "run"), env=coral_env(data_dir))
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if ": generate: " in line
             or ": evaluate: " in line]
    assert {line.split(":")[0] for line in lines} == {"trial 0", "trial 1"}
    first = next(line for line in lines if line.startswith("trial 1: generate"))
    assert first.startswith("trial 1: generate: 0/2"), "trial 0's counts were shown as 1's"
