"""Progress of a run: rich bars on a terminal, plain lines otherwise, nothing with --json
off a terminal. Each phase (generate, evaluate) shows counts, elapsed time, ETA and a
note saying what it waits for (the first batch includes model start-up)."""

from __future__ import annotations

import logging
import sys
import time

from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, Task,
                           TaskID, TextColumn, TimeElapsedColumn, TimeRemainingColumn)
from rich.table import Column
from rich.text import Text

from .output import stderr

# An executor says what a phase waits for ("waiting for Ray: 3 calls in flight, oldest
# 40 s") as a record on this logger, its phase in `coral_phase`; a display shows it as the
# phase's note while it is up, and the record is never printed as a log line.
NOTES = logging.getLogger("coral.progress")
NOTES.propagate = False


class _Notes(logging.Handler):
    def __init__(self, progress: "RichProgress | PlainProgress") -> None:
        super().__init__(logging.INFO)
        self.progress = progress

    def emit(self, record: logging.LogRecord) -> None:
        phase = getattr(record, "coral_phase", None)
        if isinstance(phase, str) and phase:
            try:
                self.progress.note(phase, record.getMessage())
            except Exception:  # a note must never break the run it describes
                pass


def _listen(progress: "RichProgress | PlainProgress") -> _Notes:
    handler = _Notes(progress)
    NOTES.addHandler(handler)
    NOTES.setLevel(logging.INFO)
    return handler


def _unlisten(handler: _Notes) -> None:
    NOTES.removeHandler(handler)
    if not any(isinstance(other, _Notes) for other in NOTES.handlers):
        NOTES.setLevel(logging.NOTSET)


ECHO_ROOM = 2  # columns the terminal's "^C" takes when Ctrl-C is pressed


class _Narrower:
    """A renderable drawn ECHO_ROOM columns narrower than the console. A bar line as wide as
    the terminal leaves the cursor in its last column: the echoed "^C" then wraps it onto a
    new line, and the display's last redraw, one line off, leaves a copy of every bar."""

    def __init__(self, renderable: RenderableType) -> None:
        self.renderable = renderable

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        narrower = options.update_width(max(1, options.max_width - ECHO_ROOM))
        yield from console.render(self.renderable, narrower)


class _NoteColumn(TextColumn):
    """The column that gives way: the table may narrow it (it is not no_wrap, so the counts
    and times keep their width), and its text is cut with an ellipsis, never wrapped."""

    def render(self, task: Task) -> Text:
        text = super().render(task)
        text.no_wrap, text.overflow = True, "ellipsis"
        return text


class _Bars(Progress):
    def get_renderable(self) -> RenderableType:
        return _Narrower(super().get_renderable())


class RichProgress:
    """Bars with counts and ETA for each phase (generate, evaluate)."""

    def __init__(self) -> None:
        self._progress = _Bars(
            # at 80 columns the note gives way, never the counts and times ("0/4…" for 0/400)
            SpinnerColumn(finished_text=" "), TextColumn("{task.description:>9}"),
            BarColumn(bar_width=16),
            MofNCompleteColumn(table_column=Column(no_wrap=True)),
            TimeElapsedColumn(table_column=Column(no_wrap=True)), TextColumn("eta"),
            TimeRemainingColumn(table_column=Column(no_wrap=True)),
            _NoteColumn("{task.fields[note]}", style="dim", table_column=Column(ratio=1)),
            console=stderr, transient=False,
        )
        self._tasks: dict[str, TaskID] = {}
        self._notes: dict[str, str] = {}
        self._label = ""

    def __enter__(self) -> "RichProgress":
        self._progress.start()
        self._listener = _listen(self)
        return self

    def __exit__(self, *exc: object) -> None:
        _unlisten(self._listener)
        self._progress.stop()

    def label(self, text: str) -> None:
        """Which trials the bars count now (a search runs several)."""
        self._label = text
        for phase in self._tasks:
            self.note(phase, self._notes.get(phase, ""))

    def _shown(self, phase: str) -> str:
        return " - ".join(filter(None, (self._label, self._notes.get(phase, ""))))

    def start(self, phase: str, total: int, done: int = 0) -> None:
        note = self._shown(phase)
        if phase in self._tasks:
            self._progress.reset(self._tasks[phase], total=total, completed=done, note=note)
        else:
            self._tasks[phase] = self._progress.add_task(phase, total=total, completed=done,
                                                         note=note)
        # a phase already complete (a resumed run) must not keep counting time
        self._progress.update(self._tasks[phase], completed=done)

    def advance(self, phase: str, amount: int = 1) -> None:
        self._progress.advance(self._tasks[phase], amount)

    def note(self, phase: str, text: str) -> None:
        """What the phase waits for ('' clears it); may come before `start`."""
        self._notes[phase] = text
        if phase in self._tasks:
            self._progress.update(self._tasks[phase], note=self._shown(phase))


class PlainProgress:
    """A line per phase at its start, every `every` seconds while it advances, when its
    note changes and at its end: for logs and pipes."""

    def __init__(self, every: float = 5.0) -> None:
        self.every = every
        self._state: dict[str, dict[str, float]] = {}
        self._notes: dict[str, str] = {}
        self._label = ""

    def __enter__(self) -> "PlainProgress":
        self._listener = _listen(self)
        return self

    def __exit__(self, *exc: object) -> None:
        _unlisten(self._listener)

    def label(self, text: str) -> None:
        """Which trials the next lines are about ('trial 3: generate: 0/24')."""
        self._label = text
        self._state.clear()  # the last trial's counts are not this one's

    def start(self, phase: str, total: int, done: int = 0) -> None:
        self._state[phase] = {"total": total, "done": done, "printed": 0.0}
        self._line(phase)

    def advance(self, phase: str, amount: int = 1) -> None:
        state = self._state[phase]
        state["done"] += amount
        if state["done"] >= state["total"] or time.monotonic() - state["printed"] >= self.every:
            self._line(phase)

    def note(self, phase: str, text: str) -> None:
        """What the phase waits for ('' clears it); may come before `start`."""
        changed = text != self._notes.get(phase, "")
        self._notes[phase] = text
        if changed and text and phase in self._state:
            self._line(phase)

    def _line(self, phase: str) -> None:
        state = self._state[phase]
        state["printed"] = time.monotonic()
        note = self._notes.get(phase)
        label = f"{self._label}: " if self._label else ""
        sys.stderr.write(f"{label}{phase}: {int(state['done'])}/{int(state['total'])}"
                         f"{f' ({note})' if note else ''}\n")
        sys.stderr.flush()


class QuietProgress(PlainProgress):
    def _line(self, phase: str) -> None:
        pass


def progress_for(json_output: bool) -> RichProgress | PlainProgress:
    if json_output:
        return QuietProgress() if not sys.stderr.isatty() else RichProgress()
    return RichProgress() if sys.stderr.isatty() else PlainProgress()
