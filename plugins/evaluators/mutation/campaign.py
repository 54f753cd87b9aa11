"""`coral mutation run`: cosmic-ray's mutants, run by warm forking workers in parallel, every
verdict committed to the session (a cosmic-ray WorkDB) as it completes."""

from __future__ import annotations

import io
import os
import queue
import random
import threading
import time
import tokenize
from pathlib import Path

from coral_core.errors import UserError
from coral_core.files.fileio import read_bytes

from coral_core.mutation import skip_requested
from coral_core.mutation.plan import Plan, make_plans
from .workers import WorkerDied, WorkerProcess, start_worker
from .score import summarize, unavailable, verdict_of
from coral_core.mutation.session import Session, digest

MODULE_BYTES = 16 * 1024 * 1024  # a module to mutate; far above any real one


def _inside(path: Path, project: Path, what: str) -> Path:
    resolved = (project / path).resolve()
    if not resolved.exists():
        raise UserError(f"{what} {path} does not exist")
    if resolved != project and project not in resolved.parents:
        raise UserError(f"{what} {path} is outside the project folder {project}")
    return resolved


def _result(plan: Plan, reply: dict | None):
    """cosmic-ray's WorkResult for a plan and the worker's reply, with the kill list."""
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome, WorkResult

    if plan.error is not None:
        return WorkResult(worker_outcome=WorkerOutcome.EXCEPTION, output=plan.error,
                          test_outcome=TestOutcome.INCOMPETENT), []
    if plan.source is None:
        return WorkResult(worker_outcome=WorkerOutcome.NO_TEST), []
    if not plan.compiles:
        return WorkResult(worker_outcome=WorkerOutcome.NORMAL, output="mutant does not compile",
                          test_outcome=TestOutcome.KILLED, diff=plan.diff), [("*", "compile")]
    if reply is None:  # uncovered: no test executes the mutated lines
        return WorkResult(worker_outcome=WorkerOutcome.NORMAL, output="no test covers it",
                          test_outcome=TestOutcome.SURVIVED, diff=plan.diff), []
    events = reply.get("events", [])
    kills = [(e["test"], "failed") for e in events if e.get("failed")]
    if reply.get("timeout"):
        finished = {e["test"] for e in events if "test" in e}
        running = [t for t in (reply.get("ran") or plan.tests or []) if t not in finished]
        kills.append((running[0] if running else "*", "timeout"))
        return WorkResult(worker_outcome=WorkerOutcome.NORMAL, output="timeout",
                          test_outcome=TestOutcome.KILLED, diff=plan.diff), kills
    crash = [e["crash"] for e in events if "crash" in e]
    output = crash[0] if crash else f"exit status {reply.get('exit')}"
    outcome = TestOutcome.SURVIVED if reply.get("exit") == 0 else TestOutcome.KILLED
    if outcome == TestOutcome.KILLED and not kills:
        kills = [("*", f"exit {reply.get('exit')}")]
    return WorkResult(worker_outcome=WorkerOutcome.NORMAL, output=output, test_outcome=outcome,
                      diff=plan.diff), kills


def run_mutation(module: Path, tests: list[Path], session_path: Path | None = None,
                 workers: int | None = None, timeout_mode: str = "relative",
                 resume: bool = False, sample: float | None = None, seed: int = 0,
                 project: Path | None = None, progress=None, executor: str = "local",
                 ray_address: str = "") -> dict:
    """Mutation-test `module` with `tests`; returns the summary (see docs/mutation.md).
    executor "ray": the workers are Ray actors (remote.py), on a local Ray or the cluster
    at `ray_address`."""
    if executor not in ("local", "ray"):
        raise UserError(f"--executor must be local or ray, not '{executor}'")
    if timeout_mode not in ("relative", "seed"):
        raise UserError(f"--timeout-mode must be relative or seed, not '{timeout_mode}'")
    if sample is not None and not 0 < sample <= 1:
        raise UserError(f"--sample must be a fraction in (0, 1], not {sample}")
    project = (project or Path.cwd()).resolve()
    module_abs = _inside(module, project, "module")
    if module_abs.suffix != ".py":
        raise UserError(f"module {module} is not a Python file")
    raw = read_bytes(module_abs, limit=MODULE_BYTES, what="module")  # a FIFO is refused
    test_paths = [_inside(t, project, "tests") for t in tests]
    if skip_requested():  # after the paths: a wrong one is still an error
        return unavailable("SKIP_MUTATION=true")
    try:
        import cosmic_ray  # noqa: F401
    except ImportError:
        raise UserError("cosmic-ray is not installed: pip install 'coral-engine[mutation]'") \
            from None
    rel_module = Path(os.path.relpath(module_abs, project))
    rel_tests = [os.path.relpath(t, project) for t in test_paths]
    session_path = Path(session_path or (project / f"{rel_module.stem}.mutation.sqlite"))
    if resume and not session_path.is_file():
        raise UserError(f"{session_path} holds no Coral mutation session to resume")
    try:  # its coding line and BOM, as cosmic-ray reads it
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
        source = raw.decode(encoding)
    except (SyntaxError, UnicodeDecodeError, LookupError):
        raise UserError(f"module {module} is not text in the encoding it declares (UTF-8 "
                        "unless a coding line says otherwise)") from None
    try:
        compile(source, str(module_abs), "exec")
    except SyntaxError as error:
        raise UserError(f"module {module} does not parse: {error.msg} (line {error.lineno})") \
            from None
    workers = max(1, workers or os.cpu_count() or 1)
    meta_now = {"module": str(rel_module), "module_sha256": digest(module_abs),
                "tests": rel_tests, "timeout_mode": timeout_mode, "sample": sample,
                "seed": seed,
                "test_command": "python -m pytest " + " ".join(rel_tests)}
    spawn, shutdown = start_worker, None
    if executor == "ray":  # joined before anything is written: an unreachable cluster is 2
        from .remote import ray_spawner

        spawn, shutdown = ray_spawner(project, {session_path.resolve()}, ray_address)
    try:
        return _session_run(session_path, resume, meta_now, rel_module, rel_tests, source,
                            workers, timeout_mode, sample, seed, project, progress, spawn)
    finally:
        if shutdown is not None:
            shutdown()


def _session_run(session_path: Path, resume: bool, meta_now: dict, rel_module: Path,
                 rel_tests: list[str], source: str, workers: int, timeout_mode: str, sample,
                 seed: int, project: Path, progress, spawn) -> dict:
    created = not session_path.exists()
    session = Session(session_path)
    try:
        if resume:
            meta = session.meta()
            if not meta:
                raise UserError(f"{session_path} holds no Coral mutation session to resume")
            keys = ("module", "module_sha256", "tests", "timeout_mode", "sample", "seed")
            changed = [k for k in keys if meta.get(k) != meta_now[k]]
            if changed:
                raise UserError(f"cannot resume {session_path}: {changed[0]} differs from the "
                                "session's (start a new session without --resume)")
        else:
            cwd = os.getcwd()
            os.chdir(project)
            try:
                session.init(rel_module)
            finally:
                os.chdir(cwd)
            session.set_meta(meta_now)
        return _execute(session, rel_module, rel_tests, source, workers, timeout_mode,
                        sample, seed, project, progress, spawn)
    except UserError:
        if created and not session.done():  # refused before a verdict: leave nothing
            session.close()
            for end in ("", "-wal", "-shm", "-journal"):
                Path(f"{session_path}{end}").unlink(missing_ok=True)
        raise
    finally:
        session.close()


def _execute(session: Session, module: Path, tests: list[str], source: str, workers: int,
             timeout_mode: str, sample, seed: int, project: Path, progress,
             spawn=start_worker) -> dict:
    started = time.perf_counter()
    items = session.items()
    keyed = sorted(items, key=lambda i: (i.mutations[0].operator_name, i.mutations[0].occurrence))
    if sample is not None:
        count = max(1, round(sample * len(keyed)))
        keyed = sorted(random.Random(seed).sample(keyed, count),
                       key=lambda i: (i.mutations[0].operator_name, i.mutations[0].occurrence))
    done = session.done()
    pending = [item for item in keyed if item.job_id not in done]
    if not pending:
        return report(session, time.perf_counter() - started, sample_size=len(keyed))
    pytest_args = list(tests)
    first = spawn(module, pytest_args, project)
    pool: list[WorkerProcess] = [first]
    try:
        baseline_reply = first.ask({"op": "baseline", "id": "baseline", "timeout": 3600})
        events = [e for e in baseline_reply.get("events", []) if "test" in e]
        failing = [e["test"] for e in events if e["failed"]]
        if failing or baseline_reply.get("exit") != 0 or baseline_reply.get("timeout"):
            shown = ", ".join(failing[:5]) + (" ..." if len(failing) > 5 else "")
            raise UserError("the tests fail on the unmutated code (every mutant would count as "
                            f"killed): {shown or 'exit status ' + str(baseline_reply.get('exit'))}")
        session.set_baseline(events)
        baseline = {e["test"]: {"seconds": e["seconds"], "cpu": e["cpu"],
                                "lines": set(e["lines"])} for e in events}
        suite_seconds = first.startup_seconds + baseline_reply["seconds"]
        disk_tests, all_exact, reasons = exact_reasons(
            first.hello.get("disk", []), baseline_reply.get("disk", []), project / module)
        session.set_meta({"exact_reasons": reasons, "exact_all": all_exact,
                          "exact_tests": sorted(disk_tests)})
        plans = make_plans(pending, source, set(first.hello["collect_lines"]), baseline,
                           timeout_mode, suite_seconds, disk_tests, all_exact,
                           (float(first.hello.get("startup_cpu", 0.0)), first.startup_seconds))
        runnable = [p for p in plans if p.error is None and p.source is not None
                    and p.compiles and p.mode != "uncovered"]
        runnable.sort(key=lambda p: -(p.cpu_limit or p.timeout))  # long first: better packing
        for plan in plans:
            if plan not in runnable:
                result, kills = _result(plan, None)
                session.record(plan.job_id, result, 0.0, plan.mode, 0, False, kills)
                if progress:
                    progress(plan, result)
        for _ in range(min(workers, len(runnable)) - 1):
            pool.append(spawn(module, pytest_args, project))
        _dispatch(session, runnable, pool, module, pytest_args, project, progress, spawn)
    finally:
        for worker in pool:
            worker.close()
    return report(session, time.perf_counter() - started, sample_size=len(keyed))


def _dispatch(session, plans, pool, module, pytest_args, project, progress,
              spawn=start_worker) -> None:
    jobs: queue.Queue = queue.Queue()
    for plan in plans:
        jobs.put(plan)
    done: queue.Queue = queue.Queue()
    stopping = threading.Event()  # the run is ending (an error, ^C): its workers close

    def serve(index: int) -> None:
        while not stopping.is_set():
            try:
                plan = jobs.get_nowait()
            except queue.Empty:
                return
            request = {"op": "mutant", "id": plan.job_id, "mode": plan.mode,
                       "source": plan.source, "functions": plan.functions,
                       "tests": plan.tests, "timeout": plan.timeout,
                       "cpu_limit": plan.cpu_limit, "exact": plan.exact,
                       "recheck": plan.recheck}
            try:
                reply = pool[index].ask(request)
            except WorkerDied:  # a mutant took its worker down: start another, retry once
                if stopping.is_set():  # no: the run closed it
                    return
                try:
                    pool[index].close()
                    pool[index] = spawn(module, pytest_args, project)
                    reply = pool[index].ask(request)
                except (WorkerDied, UserError) as error:  # a thread must always answer
                    done.put(error)
                    return
            done.put((plan, reply))

    seen: list[str] = []  # what mutants' own in-memory runs saw of the disk
    threads = [threading.Thread(target=serve, args=(i,), daemon=True) for i in range(len(pool))]
    for thread in threads:
        thread.start()
    try:
        for _ in range(len(plans)):
            got = done.get()
            if isinstance(got, BaseException):
                raise UserError(f"a mutation worker died twice: {got}")
            plan, reply = got
            result, kills = _result(plan, reply)
            mode = "reload" if any("fallback" in e for e in reply.get("events", [])) \
                else plan.mode
            ran = plan.tests
            if reply.get("exact"):  # the verdict came from the exact path
                mode, ran = "exact", reply.get("ran")
                seen.extend(f"{e.get('test') or 'the session'} (under a mutant): {e.get('why')}"
                            for e in reply.get("seen", []))
            session.record(plan.job_id, result, reply.get("seconds", 0.0), mode,
                           len(ran) if ran is not None else -1,
                           bool(reply.get("timeout")), kills)
            if progress:
                progress(plan, result)
        if seen:
            reasons = session.meta().get("exact_reasons", [])
            session.set_meta({"exact_reasons": list(dict.fromkeys(reasons + seen))[:20]})
    finally:
        stopping.set()
    for thread in threads:
        thread.join()


def exact_reasons(collection: list[str], baseline: list[dict], module: Path,
                  ) -> tuple[set[str], bool, list[str]]:
    """(the tests that see the disk, whether every mutant must run the exact way, why):
    from the audit hook's events at collection and in the baseline, and the module's
    encoding (cosmic-ray writes every mutant as UTF-8, whatever the file declares)."""
    reasons = [f"at collection: {why}" for why in collection]
    disk_tests: set[str] = set()
    every = bool(collection)
    for event in baseline:
        test, phase, why = event.get("test") or "", event.get("phase"), event.get("why", "")
        if phase == "call" and test:
            disk_tests.add(test)
            reasons.append(f"{test}: {why}")
        else:  # a fixture, or between tests: it may reach any test
            every = True
            reasons.append(f"{test or 'the session'} ({phase}): {why}")
    raw = module.read_bytes()
    encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
    if encoding not in ("utf-8", "utf-8-sig") and not raw.isascii():
        every = True
        reasons.append(f"the module is {encoding} text: cosmic-ray rewrites it as UTF-8")
    unique = list(dict.fromkeys(reasons))
    return disk_tests, every, unique[:20]


def report(session: Session, seconds: float | None = None, sample_size: int | None = None) -> dict:
    """The summary of a session (also for a session read back with no run)."""
    items = session.items()
    results = session.results()
    extra = session.mutant_rows()
    killers: dict[str, list[str]] = {}
    for job_id, test, _how in session.kills():
        killers.setdefault(job_id, []).append(test)
    summary = summarize(results, len(items))
    rows = []
    for item in sorted(items, key=lambda i: (i.mutations[0].operator_name,
                                             i.mutations[0].occurrence)):
        spec = item.mutations[0]
        result = results.get(item.job_id)
        row = extra.get(item.job_id, (None, None, None, None))
        verdict = verdict_of(result) if result is not None else "pending"
        if verdict == "killed" and result.output == "timeout":
            verdict_detail = "timeout"
        else:
            verdict_detail = verdict
        rows.append({"job_id": item.job_id, "module": str(spec.module_path),
                     "operator": spec.operator_name, "occurrence": spec.occurrence,
                     "line": spec.start_pos[0], "verdict": verdict, "detail": verdict_detail,
                     "seconds": round(row[0], 4) if row[0] is not None else -1,
                     "mode": row[1] or "", "killed_by": sorted(killers.get(item.job_id, []))})
    summary["mutants"] = rows
    baseline_tests = [r[0] for r in session.sql.execute("SELECT test FROM coral_baseline")]
    killing = {test for tests in killers.values() for test in tests}
    summary["tests"] = len(baseline_tests)
    meta = session.meta()
    summary["exact"] = sum(1 for row in extra.values() if row[1] == "exact")
    summary["exact_reasons"] = meta.get("exact_reasons", [])
    summary["tests_killing_nothing"] = sorted(set(baseline_tests) - killing)
    summary["session"] = str(session.path)
    if seconds is not None:
        summary["seconds"] = round(seconds, 3)
    if sample_size is not None and sample_size != len(items):
        summary["sampled"] = sample_size
    return summary
