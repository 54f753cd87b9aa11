"""An evaluator that raises on some candidates, and a record hook that raises on some
records: one candidate's or one record's failure must not end a run."""
from coral_core.hookspecs import hookimpl
from coral_core.types import Evaluation


class Flaky:
    name = "flaky"
    objectives = ("steady",)

    def evaluate(self, candidate, context):
        if "# variant 3" in candidate.code:
            raise ValueError(f"cannot score variant 3 of {candidate.task.id}")
        return Evaluation({"steady": 1.0})


@hookimpl
def coral_register_evaluators(register):
    register("flaky", Flaky)


@hookimpl
def coral_record_written(run, kind, record):
    if kind == "generation" and record.sample == 1:
        raise RuntimeError("the dashboard is down")


@hookimpl
def coral_run_finished(run, summary):
    summary["fixed"] = 999  # a copy: what Coral prints and writes stays as it was
    summary["problems"].clear()
    raise RuntimeError("the report server is down")
