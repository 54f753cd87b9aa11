"""What a job did, rebuilt from the worker's frames (see inside/framing.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from coral_core.sandbox.decode import DecodeError, decode_record

DETAIL_CHARS = 300


@dataclass(frozen=True)
class StepResult:
    """What one step did: status ok | error | timeout, the values it recorded, its time."""

    status: str
    records: tuple[Any, ...] = ()
    detail: str = ""
    seconds: float = 0.0
    cost: int = -1  # lines executed, where the job counted them; -1: not counted or tampered
    cpu: float = -1.0


@dataclass(frozen=True)
class ExecutionResult:
    steps: tuple[StepResult, ...]
    load_error: str = ""
    load_seconds: float = 0.0
    load_cost: int = -1  # lines executed while loading, where counted
    stdout: str = ""
    stderr: str = ""
    isolated: bool = False

    @property
    def seconds(self) -> float:
        """Load plus every step: precomputing answers while loading cannot hide time."""
        return self.load_seconds + sum(step.seconds for step in self.steps)


class ProtocolError(Exception):
    """The worker sent something no worker of ours sends."""


def _text(payload: bytes, limit: int) -> str:
    return payload[: 4 * limit].decode("utf-8", "replace")[:limit]


def _number(value: Any, kind: type, default: Any) -> Any:
    if type(value) is bool or not isinstance(value, (int, float)):
        return default
    return kind(value)


class Assembly:
    """Collects one job's frames; `feed` returns True once the job is done."""

    def __init__(self, steps: int, max_records: int):
        self.count = steps
        self.max_records = max_records
        self.steps: dict[int, StepResult] = {}
        self.records: list[bytes] = []
        self.detail = ""
        self.load_error = ""
        self.load_seconds = 0.0
        self.load_cost = -1
        self.stdout = self.stderr = ""
        self.done_id: int | None = None

    def feed(self, kind: bytes, payload: bytes) -> bool:
        if kind == b"R":
            self.records.append(payload)
        elif kind == b"D":
            self.detail = _text(payload, DETAIL_CHARS)
        elif kind == b"S":
            self._step(_json(payload))
        elif kind == b"L":
            message = _json(payload)
            self.load_seconds = _number(message.get("seconds"), float, 0.0)
            self.load_cost = _number(message.get("cost"), int, -1)
        elif kind == b"F":
            first = _number(_json(payload).get("first"), int, 0)
            self.load_error = self.detail
            for index in range(max(0, first), self.count):
                self.steps.setdefault(index, StepResult(
                    "error", detail=("the program did not load: " + self.detail)[:DETAIL_CHARS]))
            self.detail, self.records = "", []
        elif kind == b"o":
            self.stdout = payload.decode("utf-8", "replace")
        elif kind == b"e":
            self.stderr = payload.decode("utf-8", "replace")
        elif kind == b"Z":
            self.done_id = _number(_json(payload).get("id"), int, -1)
            return True
        else:
            raise ProtocolError(f"unknown frame {kind!r}")
        return False

    def _step(self, message: dict[str, Any]) -> None:
        index = _number(message.get("step"), int, -1)
        status = message.get("status")
        if status not in ("ok", "error", "timeout") or not 0 <= index < self.count:
            raise ProtocolError("malformed step result")
        detail, raws = self.detail, self.records
        self.detail, self.records = "", []
        records: tuple[Any, ...] = ()
        try:
            if len(raws) > self.max_records:
                raise DecodeError("too many recorded values")
            records = tuple(decode_record(raw) for raw in raws)
        except DecodeError as error:
            status, detail = "error", f"unrepresentable value: {error}"[:DETAIL_CHARS]
        self.steps[index] = StepResult(
            status, records, detail, _number(message.get("seconds"), float, 0.0),
            _number(message.get("cost"), int, -1), _number(message.get("cpu"), float, -1.0))

    def result(self, isolated: bool) -> ExecutionResult:
        ordered = tuple(self.steps.get(i, StepResult("error", detail="no result"))
                        for i in range(self.count))
        return ExecutionResult(ordered, self.load_error, self.load_seconds, self.load_cost,
                               self.stdout, self.stderr, isolated)


def _json(payload: bytes) -> dict[str, Any]:
    try:
        value = json.loads(payload)
    except (ValueError, RecursionError):
        raise ProtocolError("unreadable frame") from None
    if not isinstance(value, dict):
        raise ProtocolError("unreadable frame")
    return value
