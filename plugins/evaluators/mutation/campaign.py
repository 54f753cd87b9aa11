"""`coral mutation run`: cosmic-ray's mutants, run by warm forking workers in parallel, every
verdict committed to the session (a cosmic-ray WorkDB) as it completes."""

from __future__ import annotations

import io
import logging
import os
import queue
import random
import stat
import threading
import time
import tokenize
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Protocol

from coral_core.errors import UserError
from coral_core.files.fileio import read_bytes

from coral_core.mutation import skip_requested
from coral_core.mutation.filters import MutantFilter, pragma_lines
from coral_core.mutation.plan import Plan, annotate, make_plans
from .exact import restore
from .workers import NotImported, WorkerDied, WorkerProcess, start_worker
from .score import summarize, unavailable, verdict_of
from coral_core.mutation.fingerprint import file_digest, tests_digest
from coral_core.files.fileio import SQLITE_SUFFIXES, is_within, same_file
from coral_core.mutation.session import Session, Verdict
from . import incremental

log = logging.getLogger(__name__)

MODULE_BYTES = 16 * 1024 * 1024  # a module to mutate; far above any real one


def _inside(path: Path, project: Path, what: str) -> Path:
    resolved = (project / path).resolve()
    if not resolved.exists():
        raise UserError(f"{what} {path} does not exist")
    if resolved != project and project not in resolved.parents:
        raise UserError(f"{what} {path} is outside the project folder {project}")
    return resolved


_NOT_WALKED = ("__pycache__", "node_modules", "site-packages")


def _refuse_aliases(project: Path, modules: list[Path]) -> None:
    """A link inside the project to a module (or to a folder above one) lets the tests
    import it under a second name, which runs code Coral neither mutates in memory nor
    traces (a red-team pass: every mutant of a module the tests imported through a link
    'survived'). Refused: cosmic-ray writes through the link, Coral cannot follow both."""
    wanted = {str(m) for m in modules}
    for folder, folders, files in os.walk(project):
        folders[:] = [f for f in folders if not f.startswith(".") and f not in _NOT_WALKED]
        for name in [*folders, *files]:
            link = os.path.join(folder, name)
            if not os.path.islink(link):
                continue
            real = os.path.realpath(link)
            hit = next((m for m in sorted(wanted)
                        if m == real or m.startswith(real + os.sep)), None)
            if hit is not None:
                raise UserError(
                    f"{os.path.relpath(link, project)} is a link to "
                    f"{os.path.relpath(real, project)}, so the tests can import module "
                    f"{os.path.relpath(hit, project)} under two names and Coral would mutate "
                    "it under one; remove the link, or mutate a copy of the project without it")


def _result(plan: Plan, reply: dict | None):
    """cosmic-ray's WorkResult for a plan and the worker's reply, with the kill list."""
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome, WorkResult

    if plan.skip is not None:
        return WorkResult(worker_outcome=WorkerOutcome.SKIPPED, output=plan.skip), []
    if plan.error is not None:
        return WorkResult(worker_outcome=WorkerOutcome.EXCEPTION, output=plan.error,
                          test_outcome=TestOutcome.INCOMPETENT), []
    if plan.source is None:
        return WorkResult(worker_outcome=WorkerOutcome.NO_TEST), []
    if not plan.compiles:
        return WorkResult(worker_outcome=WorkerOutcome.NORMAL, output="mutant does not compile",
                          test_outcome=TestOutcome.KILLED, diff=plan.diff), [("*", "compile")]
    if reply is None:  # uncovered (no test executes the mutated lines), or equivalent
        output = ("only annotations that no code reads differ" if plan.mode == "equivalent"
                  else "no test covers it")
        return WorkResult(worker_outcome=WorkerOutcome.NORMAL, output=output,
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


class Progress(Protocol):
    """What a display is told: the mutants in the run (and how many a resumed session had
    done), then each verdict as it is committed."""

    def start(self, total: int, done: int) -> None: ...

    def advance(self, plan: Plan, result) -> None: ...


def run_mutation(module: Path | list[Path], tests: list[Path], session_path: Path | None = None,
                 workers: int | None = None, timeout_mode: str = "relative",
                 resume: bool = False, sample: float | None = None, seed: int = 0,
                 project: Path | None = None, progress: Progress | None = None,
                 executor: str = "local", ray_address: str = "", fresh: bool = False,
                 keep: MutantFilter | None = None) -> dict:
    """Mutation-test `module` (a file, a folder of them, or a list of both) with `tests`;
    returns the summary (see docs/mutation.md). executor "ray": the workers are Ray actors
    (remote.py), on a local Ray or the cluster at `ray_address`. An existing session is
    continued with `resume` or replaced with `fresh`, never silently. `keep`: which mutants
    run (the rest are skipped)."""
    if executor not in ("local", "ray"):
        raise UserError(f"--executor must be local or ray, not '{executor}'")
    if ray_address and executor != "ray":
        raise UserError(f"--ray-address '{ray_address}' is read only by the ray executor; "
                        "add --executor ray (or drop the address to run here)")
    if timeout_mode not in ("relative", "seed"):
        raise UserError(f"--timeout-mode must be relative or seed, not '{timeout_mode}'")
    if sample is not None and not 0 < sample <= 1:
        raise UserError(f"--sample must be a fraction in (0, 1], not {sample}")
    if resume and fresh:
        raise UserError("--resume and --fresh exclude each other")
    project = (project or Path.cwd()).resolve()
    given = list(module) if isinstance(module, (list, tuple)) else [module]
    if not given:
        raise UserError("no module to mutate: give --module (or [tool.coral.mutation] module)")
    test_paths = [_inside(t, project, "tests") for t in tests]
    found = modules_of([_inside(m, project, "module") for m in given], test_paths)
    if not found:
        raise UserError(f"no Python module to mutate in {', '.join(map(str, given))}")
    # a file the walk of a folder found that leads out of the project (a link to
    # /etc/passwd, to a module elsewhere) is left out, as a linked folder is
    found = [path for path in found if is_within(path, project)]
    if not found:
        raise UserError(f"no Python module to mutate in {', '.join(map(str, given))}")
    _refuse_aliases(project, found)
    sources = {Path(os.path.relpath(path, project)): _source(path, path.relative_to(project))
               for path in found}
    if skip_requested():  # after the paths: a wrong one is still an error
        return unavailable("SKIP_MUTATION=true")
    try:
        import cosmic_ray  # noqa: F401
    except ImportError:
        raise UserError("cosmic-ray is not installed: pip install 'coral-engine[mutation]'") \
            from None
    rel_modules = list(sources)
    rel_tests = [os.path.relpath(t, project) for t in test_paths]
    session_path = Path(session_path or default_session(project, given[0]))
    if resume and not session_path.is_file():
        raise UserError(f"{session_path} holds no Coral mutation session to resume")
    if not session_path.absolute().parent.is_dir():
        raise UserError(f"--session {session_path}: its folder does not exist")
    if os.path.lexists(session_path) and not os.path.isfile(session_path):
        raise UserError(f"--session {session_path} is not a file (SQLite would write its "
                        "journal beside it); give a file, or a new path")
    read = [*found, *test_paths, *(f for t in test_paths if t.is_dir() for f in t.rglob("*"))]
    if any(same_file(session_path, path) for path in read):  # a file in a --tests folder too
        raise UserError(f"--session {session_path} is a file the run reads (a module or a "
                        "test file); give the session a file of its own")
    keep = keep or MutantFilter()
    workers = max(1, workers or os.cpu_count() or 1)
    one = len(rel_modules) == 1
    meta_now = {"module": str(rel_modules[0]) if one else [str(m) for m in rel_modules],
                "module_sha256": file_digest(project / rel_modules[0]) if one else
                {str(m): file_digest(project / m) for m in rel_modules},
                "tests": rel_tests, "tests_sha256": tests_digest(project, rel_tests),
                "timeout_mode": timeout_mode, "sample": sample,
                "seed": seed, **keep.meta(),
                "test_command": "python -m pytest " + " ".join(rel_tests)}
    spawn, shutdown = start_worker, None
    if executor == "ray":  # joined before anything is written: an unreachable cluster is 2
        from .remote import ray_spawner

        spawn, shutdown = ray_spawner(project, {session_path.resolve()}, ray_address)
    try:
        return _session_run(session_path, resume, fresh, meta_now, sources, rel_tests,
                            workers, timeout_mode, sample, seed, project, progress, spawn,
                            keep)
    finally:
        if shutdown is not None:
            shutdown()


def default_session(project: Path, first_module: Path) -> Path:
    """The session named after the first --module given (a file's or a folder's name)."""
    name = (project / first_module).resolve().stem or project.name
    return project / f"{name}.mutation.sqlite"


def modules_of(paths: list[Path], tests: list[Path]) -> list[Path]:
    """The Python files to mutate: each file given, and every `.py` file under each folder
    given (as cosmic-ray's module-path), less tests (files under --tests, conftest.py,
    test_*.py, *_test.py), caches and hidden folders."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            for candidate in sorted(path.rglob("*.py")):
                parts = candidate.relative_to(path).parts
                if any(part.startswith(".") or part == "__pycache__" for part in parts):
                    continue
                if candidate.name == "conftest.py" or candidate.name.startswith("test_") \
                        or candidate.name.endswith("_test.py"):
                    continue
                if any(candidate == t or t in candidate.parents for t in tests):
                    continue
                found.append(candidate)
        elif path.suffix != ".py":
            raise UserError(f"module {path} is not a Python file")
        elif any(path == t or t in path.parents for t in tests):
            raise UserError(f"module {path} is one of the tests (under --tests); give the "
                            "code they test")
        else:
            found.append(path)
    return list(dict.fromkeys(found))


def _source(path: Path, shown: Path) -> str:
    """The module's text as Python and cosmic-ray read it (its coding line, a BOM); one line
    for a module that is not text or does not parse."""
    raw = read_bytes(path, limit=MODULE_BYTES, what="module")  # a FIFO is refused
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
        source = raw.decode(encoding)
    except (SyntaxError, UnicodeDecodeError, LookupError):
        raise UserError(f"module {shown} is not text in the encoding it declares (UTF-8 "
                        "unless a coding line says otherwise)") from None
    try:
        compile(source, str(path), "exec")
    except SyntaxError as error:
        raise UserError(f"module {shown} does not parse: {error.msg} (line {error.lineno})") \
            from None
    return source


def _session_run(session_path: Path, resume: bool, fresh: bool, meta_now: dict,
                 sources: dict[Path, str], rel_tests: list[str], workers: int,
                 timeout_mode: str, sample, seed: int, project: Path, progress, spawn,
                 keep: MutantFilter) -> dict:
    created = not session_path.exists()
    session = Session(session_path)
    try:
        if not resume and not fresh and (session.meta() or session.has_items()):
            if not session.meta():  # `cosmic-ray init` made it: nothing of Coral's to resume
                raise UserError(f"{session_path} holds a session Coral did not make (cosmic-"
                                "ray's own?): --fresh starts it over, or give another "
                                "--session")
            raise UserError(f"{session_path} holds a mutation session already: --resume "
                            "continues it, --fresh starts it over")
        earlier: dict = {}
        if resume:
            meta = session.meta()
            if not meta:
                raise UserError(f"{session_path} holds no Coral mutation session to resume")
            keys = ("module", "tests", "timeout_mode", "sample", "seed",
                    "operators", "exclude_operators", "lines")
            filters = ("operators", "exclude_operators", "lines")  # none before they existed
            changed = [k for k in keys
                       if meta.get(k, meta_now[k] if k in filters else None) != meta_now[k]]
            if changed:
                raise UserError(f"cannot resume {session_path}: {changed[0]} differs from the "
                                "session's (--fresh starts it over)")
            # reusable verdicts: also for a plain resume of an interrupted incremental one
            earlier = incremental.earlier_verdicts(session)
            why = incremental.what_changed(meta, meta_now, project)
            if why:  # enumerate afresh; what still holds is reused, the rest runs
                session.save_earlier({k: (e.deps, e.verdict) for k, e in earlier.items()})
                meta_now = {**meta_now, "changed": why}
        if not resume or "changed" in meta_now:
            cwd = os.getcwd()
            os.chdir(project)
            try:
                session.init(list(sources), keep_earlier=resume)
            finally:
                os.chdir(cwd)
            session.set_meta(meta_now)
        return _execute(session, sources, rel_tests, workers, timeout_mode, sample, seed,
                        project, progress, spawn, keep, earlier)
    except UserError:
        if created and not session.done():  # refused before a verdict: leave nothing
            session.close()
            for end in SQLITE_SUFFIXES:
                Path(f"{session_path}{end}").unlink(missing_ok=True)
        raise
    finally:
        session.close()


_STARTER = ThreadPoolExecutor(thread_name_prefix="coral-mutation-start")


def _key(item) -> tuple:
    spec = item.mutations[0]
    return (str(spec.module_path), spec.operator_name, spec.occurrence)


def _execute(session: Session, sources: dict[Path, str], tests: list[str], workers: int,
             timeout_mode: str, sample, seed: int, project: Path, progress,
             spawn=start_worker, keep: MutantFilter | None = None,
             earlier: dict | None = None) -> dict:
    started = time.perf_counter()
    keyed = sorted(session.items(), key=_key)
    if sample is not None:
        count = max(1, round(sample * len(keyed)))
        keyed = sorted(random.Random(seed).sample(keyed, count), key=_key)
    done = session.done()
    pending = [item for item in keyed if item.job_id not in done]
    if progress:
        progress.start(len(keyed), len(keyed) - len(pending))
    for module, source in sources.items():
        mine = [item for item in pending if Path(item.mutations[0].module_path) == module]
        if mine:
            own = replace(keep or MutantFilter(), pragma=pragma_lines(source))
            _module_run(session, module, mine, source, tests, workers, timeout_mode, project,
                        progress, spawn, own, several=len(sources) > 1, earlier=earlier or {})
    return report(session, time.perf_counter() - started, sample_size=len(keyed))


def _module_run(session: Session, module: Path, pending: list, source: str, tests: list[str],
                workers: int, timeout_mode: str, project: Path, progress, spawn,
                keep: MutantFilter, several: bool, earlier: dict) -> None:
    """One module's mutants, by a pool of workers warmed for that module. In a session of
    several modules, one the tests do not import at collection is not an error: a test may
    import it in its body (its mutants are then reloaded), and one that no test runs at all
    leaves every mutant uncovered (cosmic-ray's tests would pass on each: survived)."""
    pytest_args = list(tests)
    original = (project / module).read_bytes()  # before any test of this pool has run
    first = spawn(module, pytest_args, project)
    pool: list[WorkerProcess] = [first]
    starting: list[Future] = []
    try:
        if first.hello.get("module") is None and not several:
            raise NotImported(f"the tests never import {module} (nothing to mutate through "
                              "them)")
        # the other workers collect the tests while the first runs the baseline (no more
        # than the mutants left could use; after an edit most may be reused: none then)
        starting = [] if earlier else [_STARTER.submit(spawn, module, pytest_args, project)
                                       for _ in range(min(workers, len(pending)) - 1)]
        try:
            baseline_reply = first.ask({"op": "baseline", "id": "baseline", "timeout": 3600})
        except WorkerDied as died:  # a test that kills its runner (a red-team pass)
            raise UserError(f"the tests did not finish on the unmutated code: {died} (does a "
                            "test end or kill the process that runs it?)") from None
        events = [e for e in baseline_reply.get("events", []) if "test" in e]
        failing = [e["test"] for e in events if e["failed"]]
        if failing or baseline_reply.get("exit") != 0 or baseline_reply.get("timeout"):
            shown = ", ".join(failing[:5]) + (" ..." if len(failing) > 5 else "")
            raise UserError("the tests fail on the unmutated code (every mutant would count as "
                            f"killed): {shown or 'exit status ' + str(baseline_reply.get('exit'))}")
        _put_back(project / module, original, baseline_reply)
        session.set_baseline(events)
        baseline = {e["test"]: {"seconds": e["seconds"], "cpu": e["cpu"],
                                "lines": set(e["lines"]),
                                "child_lines": set(e.get("child_lines", ())),
                                "followed": bool(e.get("followed"))} for e in events}
        suite_seconds = first.startup_seconds + baseline_reply["seconds"]
        disk_tests, all_exact, reasons = exact_reasons(
            first.hello.get("disk", []), baseline_reply.get("disk", []), project / module)
        if several:  # one session, several modules: each module's reasons, named
            before = session.meta()
            reasons = list(dict.fromkeys(before.get("exact_reasons", []) + [
                f"{module}: {reason}" for reason in reasons]))[:20]
            all_exact = all_exact or bool(before.get("exact_all"))
            disk_tests |= set(before.get("exact_tests", []))
        followed = sorted({*(session.meta().get("followed_tests", []) if several else []),
                           *(test for test, row in baseline.items() if row["followed"])})
        session.set_meta({"exact_reasons": reasons, "exact_all": all_exact,
                          "exact_tests": sorted(disk_tests), "followed_tests": followed})
        census = next((e["census"] for e in baseline_reply.get("events", [])
                       if "census" in e), {"untouched": [], "touched": []})
        unread = {tuple(k) for k in census["untouched"]} - {
            tuple(k) for k in census["touched"]}
        session.set_meta({"annotations_read": sorted(  # what kept mutants from `equivalent`
            {*(session.meta().get("annotations_read", []) if several else []),
             *(f"{module}: {name} (line {line})" for name, line in census["touched"])})})
        startup = (float(first.hello.get("startup_cpu", 0.0)), first.startup_seconds)
        plans = make_plans(pending, source, set(first.hello["collect_lines"]), baseline,
                           timeout_mode, suite_seconds, disk_tests, all_exact, startup,
                           keep, unread, {tuple(k) for k in census.get("watchable", [])})
        readers = _readers(first, plans, baseline, unread)
        if readers:
            annotate(plans, readers, unread, baseline, timeout_mode, suite_seconds, startup)
        runnable = [p for p in plans if p.skip is None and p.error is None
                    and p.source is not None and p.compiles
                    and p.mode not in ("uncovered", "equivalent")]
        runnable.sort(key=lambda p: -(p.cpu_limit or p.timeout))  # long first: better packing
        running = {id(plan) for plan in runnable}
        settled = [plan for plan in plans if id(plan) not in running]
        verdicts = []
        for plan in settled:
            result, kills = _result(plan, None)
            verdicts.append(Verdict(plan.job_id, result, 0.0, plan.mode, 0, False,
                                    tuple(kills)))
        session.record_many(verdicts)
        if progress:
            for plan, verdict in zip(settled, verdicts):
                progress.advance(plan, verdict.result)
        imported = next((e["imported"] for e in baseline_reply.get("events", [])
                         if "imported" in e), [])
        # a followed test's processes import project files no one watches: never reused
        test_files = {test: None if baseline.get(test, {}).get("followed") else files
                      for test, files in (first.hello.get("test_files") or {}).items()}
        watched_now = incremental.watched(project, imported, test_files, str(module))
        prints = incremental.fingerprints(plans, source, str(module), baseline, test_files,
                                          watched_now, project)
        session.set_fingerprints(prints)
        session.set_meta({"watched": {**(session.meta().get("watched") or {}), **watched_now}})
        if earlier:
            settled = incremental.reuse(session, runnable, prints, earlier, progress)
            runnable = [p for p in runnable if p.job_id not in settled]
        wanted = min(workers, len(runnable)) - 1  # workers beside the first
        while starting:
            worker = starting.pop(0).result()  # a worker that cannot start: as the first
            pool.append(worker) if len(pool) <= wanted else worker.close()
        while len(pool) <= wanted:
            pool.append(spawn(module, pytest_args, project))
        _dispatch(session, runnable, pool, module, pytest_args, project, progress, spawn,
                  original)
    finally:
        for future in starting:  # started for a run that ended early
            if future.cancel():
                continue
            try:
                future.result().close()
            except Exception:  # noqa: B902 - the run's own error is the one to report
                pass
        for worker in pool:
            worker.close()


def _readers(worker: WorkerProcess, plans: list, baseline: dict[str, dict], unread: set,
             ) -> dict[tuple[str, int], list[str]]:
    """{function: the tests that read its annotations} for the functions that mutants
    changing only annotations change (plugins' readers.py), from one more run of the suite;
    {} where that run is not the baseline's own (a test fails or ends otherwise, a process
    it started could not tell what it read, it saw the disk) or a test replaced a
    function's annotations (what later tests read of them is not noted)."""
    keys = sorted({tuple(key) for plan in plans if plan.mode == "reload"
                   for key in plan.annotations or ()} - unread)
    if not keys:
        return {}
    reply = worker.ask({"op": "readers", "id": "readers", "keys": keys, "timeout": 3600})
    events = reply.get("events", [])
    tests = [event for event in events if "test" in event]
    watched = next((event["watched"] for event in events if "watched" in event), [])
    if reply.get("exit") != 0 or reply.get("timeout") or reply.get("unknown") \
            or reply.get("disk") or [event["test"] for event in tests] != list(baseline) \
            or any(event["failed"] or event.get("replaced") for event in tests):
        log.debug("the annotation readers' run differs from the baseline: mutants reload")
        return {}
    return {tuple(key): [event["test"] for event in tests if key in event["read"]]
            for key in watched}


_PUT_BACK: set[str] = set()  # the files said to be put back (once each)


def _put_back(path: Path, original: bytes | None, reply: dict | None) -> None:
    """A test that wrote the module's file (the audit saw it, or its worker died before it
    could say: `reply` None) changed the user's file, which Coral never writes: it is put
    back as it was (a red-team pass found a test's `open(calc.__file__, "a")` left in the
    user's source). Done by the worker's own thread after its mutant, before a worker that
    died is replaced: done later, by the thread that records verdicts, it let the
    replacement import the broken file (seen under load in CI). A file that changed with
    no test seen writing it is the user's edit, and kept."""
    if original is None:
        return
    events = [*reply.get("disk", []), *reply.get("seen", [])] if reply is not None else []
    if reply is not None and not any(
            isinstance(e, dict) and str(e.get("why", "")).startswith("wrote ") for e in events):
        return
    try:
        if os.path.realpath(path.parent) != str(path.parent):  # a folder made a link
            raise OSError(f"its folder {path.parent} was replaced by a link")
        if _current(path) != original:
            restore(str(path), original)
            if str(path) not in _PUT_BACK:
                _PUT_BACK.add(str(path))
                log.warning("a test wrote %s; it is put back as it was (each time)", path)
    except OSError as error:
        log.warning("a test wrote %s, which could not be put back: %s", path, error)


def _current(path: Path) -> bytes | None:
    """The file's bytes, or None where a test left no regular file (removed, renamed away,
    a link or a FIFO in its place)."""
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return None
        return path.read_bytes()
    except FileNotFoundError:
        return None


def _dispatch(session, plans, pool, module, pytest_args, project, progress,
              spawn=start_worker, original: bytes | None = None) -> None:
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
                       "source": plan.source, "tests": plan.tests, "timeout": plan.timeout,
                       "cpu_limit": plan.cpu_limit, "exact": plan.exact,
                       "recheck": plan.recheck, "annotations": plan.annotations}
            try:
                reply = pool[index].ask(request)
            except WorkerDied:  # a mutant took its worker down: start another, retry once
                if stopping.is_set():  # no: the run closed it
                    return
                try:
                    pool[index].close()
                    _put_back(project / module, original, None)
                    pool[index] = spawn(module, pytest_args, project)
                    if stopping.is_set():  # the run ended while it started: not left running
                        pool[index].close()
                        return
                    reply = pool[index].ask(request)
                except (WorkerDied, UserError, OSError) as error:  # a thread must answer
                    if stopping.is_set():  # ^C closed what the restart was using
                        return
                    _put_back(project / module, original, None)
                    done.put(error)
                    return
            _put_back(project / module, original, reply)
            done.put((plan, reply))

    seen: list[str] = []  # what mutants' own in-memory runs saw of the disk
    threads = [threading.Thread(target=serve, args=(i,), daemon=True) for i in range(len(pool))]
    for thread in threads:
        thread.start()
    try:
        left = len(plans)
        while left:
            batch = [done.get()]  # and every verdict that came meanwhile: one commit
            while len(batch) < left:
                try:
                    batch.append(done.get_nowait())
                except queue.Empty:
                    break
            left -= len(batch)
            verdicts, died = [], [got for got in batch if isinstance(got, BaseException)]
            for got in batch:
                if isinstance(got, BaseException):
                    continue
                plan, reply = got
                result, kills = _result(plan, reply)
                mode = "reload" if any("fallback" in e for e in reply.get("events", [])) \
                    else plan.mode
                ran = plan.tests
                if reply.get("exact"):  # the verdict came from the exact path
                    mode, ran = "exact", reply.get("ran")
                    seen.extend(f"{e.get('test') or 'the session'} (under a mutant): "
                                f"{_why(e)}" for e in reply.get("seen", []))
                verdicts.append(Verdict(plan.job_id, result, reply.get("seconds", 0.0), mode,
                                        len(ran) if ran is not None else -1,
                                        bool(reply.get("timeout")), tuple(kills)))
            session.record_many(verdicts)  # every verdict that came, before any error
            if died:
                raise UserError(f"a mutation worker died twice: {died[0]}")
            if progress:
                for got, verdict in zip(batch, verdicts):
                    progress.advance(got[0], verdict.result)
        if seen:
            reasons = session.meta().get("exact_reasons", [])
            session.set_meta({"exact_reasons": list(dict.fromkeys(reasons + seen))[:20]})
    finally:
        stopping.set()
    for thread in threads:
        thread.join()


def _why(event: dict) -> str:
    """What the audit hook saw, or what a line on its pipe that it did not write means (a
    test that writes onto inherited descriptors: a red-team pass saw an empty reason)."""
    why = event.get("why")
    return why if isinstance(why, str) and why else \
        "something a test wrote onto the audit hook's pipe (its events cannot be trusted)"


def exact_reasons(collection: list[str], baseline: list[dict], module: Path,
                  ) -> tuple[set[str], bool, list[str]]:
    """(the tests that see the disk, whether every mutant must run the exact way, why):
    from the audit hook's events at collection and in the baseline, and the module's
    encoding (cosmic-ray writes every mutant as UTF-8, whatever the file declares)."""
    reasons = [f"at collection: {why}" for why in collection]
    disk_tests: set[str] = set()
    every = bool(collection)
    for event in baseline:
        test, phase, why = event.get("test") or "", event.get("phase"), _why(event)
        if phase == "call" and test:
            disk_tests.add(test)
            reasons.append(f"{test}: {why}")
        else:  # a fixture, or between tests: it may reach any test
            every = True
            reasons.append(f"{test or 'the session'}" + (f" ({phase})" if phase else "")
                           + f": {why}")
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
    meta = session.meta()
    reused = set(meta.get("reused") or [])
    rows = []
    for item in sorted(items, key=_key):
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
                     "mode": row[1] or "", "reused": item.job_id in reused,
                     "killed_by": sorted(killers.get(item.job_id, [])),
                     "diff": (result.diff or "") if result is not None else "",
                     "reason": (result.output or "") if verdict == "skipped" else ""})
    summary["mutants"] = rows
    baseline_tests = [r[0] for r in session.sql.execute("SELECT test FROM coral_baseline")]
    killing = {test for tests in killers.values() for test in tests}
    summary["tests"] = len(baseline_tests)
    summary["exact"] = sum(1 for row in extra.values() if row[1] == "exact")
    summary["exact_reasons"] = meta.get("exact_reasons", [])
    summary["followed_tests"] = meta.get("followed_tests", [])
    summary["reused"] = len(reused)
    summary["changed"] = meta.get("changed", [])
    summary["tests_killing_nothing"] = sorted(set(baseline_tests) - killing)
    summary["session"] = str(session.path)
    if seconds is not None:
        summary["seconds"] = round(seconds, 3)
    if sample_size is not None and sample_size != len(items):
        summary["sampled"] = sample_size
    return summary
