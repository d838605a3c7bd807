"""Checks in worker processes: real native crashes, native hangs, memory caps, the retry without
vectorisation, gradcheck's own bugs (exit 4) told apart from the user's (exit 3), -j N."""

from __future__ import annotations

import json
import os
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result

import gradcheck
from gradcheck.check_settings import CheckSettings
from gradcheck.errors import ExitCode, FunctionError, InternalError, Phase
from gradcheck.evidence.notes import RETRY_NOTE
from gradcheck.options import CheckOptions, options_from
from gradcheck.pipeline import TargetRequest, check_request
from gradcheck.processes import supervisor
from gradcheck.processes.failures import unexpected_error
from gradcheck.processes.supervisor import Events, Job, JobResult, run_jobs
from gradcheck.report import Report
from tests.conftest import FIXTURES, notes

BAD = FIXTURES / "bad"
Run = Callable[..., Result]


def job(target: str, **limits: Any) -> Job:
    return Job(check_request, (TargetRequest(target=target),), options_from("check", {}),
               name=target.rpartition(":")[2], target=target, **limits)


def timed(jobs: list[Job]) -> tuple[list[JobResult], dict[int, float]]:
    """Run the jobs; also how long each took from reaching its worker to its result."""
    started: dict[int, float] = {}
    took: dict[int, float] = {}
    events = Events(started=lambda i: started.setdefault(i, time.monotonic()),
                    finished=lambda i, _: took.setdefault(i, time.monotonic() - started[i]))
    return run_jobs(jobs, events=events), took


def test_a_crash_on_the_users_own_line_is_one_error_line_with_signal_phase_and_line(
        in_fixtures: Path, run_cli: Run) -> None:
    result = run_cli(["check", "bad/aborts.py:f", "--format", "json"])
    message = ("f aborted (SIGABRT) during the first calls of f and its gradient; it was running"
               " bad/aborts.py:10")
    assert result.exit_code == ExitCode.FUNCTION_ERROR
    assert result.stderr == f"Error: {message}\n"
    assert json.loads(result.stdout) == {
        "gradcheck": gradcheck.__version__, "target": "bad/aborts.py:f", "ok": False,
        "exit_code": 3, "error": message, "phase": "the first calls of f and its gradient"}


def test_a_segfault_shows_the_python_stack_with_traceback_and_is_a_junit_error(
        in_fixtures: Path, run_cli: Run) -> None:
    result = run_cli(["check", "bad/segfaults.py:f", "--format", "junit", "--traceback"])
    assert result.exit_code == 3
    stack, error_line = result.stderr.rstrip("\n").rsplit("\n", 1)
    assert error_line == ("Error: f crashed with a segmentation fault (SIGSEGV) during the first"
                          " calls of f and its gradient; it was running bad/segfaults.py:11")
    assert stack.startswith("Python stack when the process crashed (most recent call last):\n")
    assert stack.endswith('segfaults.py", line 11, in f') and "worker.py" not in stack
    suite = ET.fromstring(result.stdout).find("testsuite")
    assert suite is not None
    properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert properties["phase"] == "the first calls of f and its gradient"
    error = suite.find("testcase/error")
    assert error is not None and error.get("type") == "exit code 3"
    assert error.get("message") == error_line.removeprefix("Error: ")


def test_tensorflow_aborting_while_vectorising_still_gives_a_verdict(
        in_fixtures: Path, run_cli: Run) -> None:
    """TensorFlow's own Abort op, only under pfor: the check runs again without vectorisation."""
    result = run_cli(["check", "bad/aborts_when_vectorised.py:f", "--format", "json"])
    crash = ("TensorFlow aborted (SIGABRT) during the vectorised tape.jacobian of y with respect"
             " to x")
    assert result.stderr == f"Error: {crash}; checking again without vectorisation\n"
    assert result.exit_code == 0
    report = json.loads(result.stdout)
    assert report["ok"] is True and {c["status"] for c in report["checks"]} == {"pass"}
    assert report["notes"][0] == (
        f"{crash}; these results come from a new worker process with vectorisation off"
        " (no pfor, no tf.vectorized_map): tape.jacobian(..., experimental_use_pfor=True)"
        " crashes TensorFlow on this function where the while loop works, so your own"
        " tape.jacobian and tape.batch_jacobian calls on this function need"
        " experimental_use_pfor=False too")


def test_the_float32_expm_ends_with_a_verdict(in_fixtures: Path, run_cli: Run) -> None:
    result = run_cli(["check", "bad/expm_float32.py:f", "--dtype", "float32", "--format", "json"])
    assert result.exit_code in (0, 1), result.stderr
    notes = json.loads(result.stdout)["notes"]
    crash_notes = [n for n in notes if "crashed" in n or "aborted" in n]
    if not crash_notes:
        pytest.skip("this TensorFlow does not crash in the float32 expm, so there"
                    " is no crash for the verdict to note")
    assert "Error: " in result.stderr and "vectorisation off" in crash_notes[0], crash_notes


def crashes_while_vectorising(vectorised: bool, target: str, options: CheckOptions,
                              settings: CheckSettings) -> Report:
    """Aborts in a phase whose text says "vectorised", flagged `vectorised` or not; without
    vectorisation it checks `target`."""
    assert settings.phase is not None
    settings.phase(Phase("the vectorised-sounding evaluation", vectorised=vectorised))
    if settings.vectorise:
        os.abort()
    return check_request(TargetRequest(target=target), options, settings)


@pytest.mark.parametrize("vectorised", [True, False])
def test_a_crash_is_retried_when_its_phase_is_flagged_vectorised_whatever_its_words(
        vectorised: bool) -> None:
    target = f"{FIXTURES}/two_in_two_out.py:f"
    [result] = run_jobs([Job(crashes_while_vectorising, (vectorised, target),
                             options_from("check", {}), name="f", target=target)])
    crash = "f aborted (SIGABRT) during the vectorised-sounding evaluation"
    if vectorised:
        assert result.report is not None and result.report.ok
        assert notes(result.report)[0].startswith(crash)
        assert notes(result.report)[0].endswith("; " + RETRY_NOTE)
    else:
        assert isinstance(result.error, FunctionError) and result.report is None
        assert result.error.message.startswith(crash)
        assert result.error.phase == "the vectorised-sounding evaluation"


def test_a_native_hang_is_killed_at_its_timeout_and_located(started_tensorflow: None) -> None:
    start = time.monotonic()
    [result] = run_jobs([job(f"{BAD}/hangs_native.py:f", timeout=5)])
    # Never before its limit; after it, only as late as a loaded machine makes it (f spins
    # forever, so any end at all is the kill).
    assert 5 <= time.monotonic() - start < 5 + 30
    error = result.error
    assert isinstance(error, FunctionError) and error.exit_code == 3
    assert error.message.startswith("f did not finish within 5s (--timeout 5) during the first"
                                    " calls of f and its gradient; it was running ")
    assert error.message.endswith("bad/hangs_native.py:14")
    assert error.phase == "the first calls of f and its gradient"
    assert error.user_traceback is not None and "return spin(x) * 2.0" in error.user_traceback


def test_the_time_limit_counts_tensorflows_start_up() -> None:
    supervisor.stop_workers()  # the next worker needs a new fork server, which imports TensorFlow
    [result] = run_jobs([job(f"{BAD}/hangs.py:f", timeout=0.5)])
    error = result.error
    assert isinstance(error, FunctionError) and error.exit_code == 3
    assert error.phase == "the start-up of TensorFlow in a new worker process"
    assert error.message.startswith(
        "the time limit of 0.5s (--timeout 0.5) ran out during the start-up of TensorFlow in a"
        " new worker process (which took ")
    assert error.message.endswith("s), before f was called: the limit counts TensorFlow's"
                                  " start-up, so give it a few seconds more than that")


def test_a_worker_that_outgrows_its_memory_cap_is_stopped() -> None:
    [result], took = timed([job(f"{BAD}/grows.py:f", memory_limit=1200 << 20)])
    error = result.error
    assert isinstance(error, FunctionError)
    assert error.phase == "the first calls of f and its gradient"
    assert error.message.startswith("f was stopped during the first calls of f and its gradient:"
                                    " the check used ")
    assert error.message.endswith(" of memory, over the worker's cap of 1.2GiB"
                                  " (4 x --max-memory, at least 2GiB)")
    assert took[0] < 20  # stopped by its cap, long before the machine's memory runs out


def test_gradcheck_failing_in_a_worker_is_exit_4_not_the_users_fault() -> None:
    [result] = run_jobs([Job(check_request, (None,), options_from("check", {}), name="f",
                             target="nothing:f")])
    assert isinstance(result.error, InternalError) and result.error.exit_code == 4
    assert result.error.message.startswith("internal error while checking f: AttributeError:")
    assert "gradcheck/pipeline.py:" in result.error.message
    assert result.error.message.endswith("; please report it")


def _user_code_raises() -> None:
    raise ValueError("boom")


def _user_code_misuses_tensorflow() -> None:
    from gradcheck.engine.runtime import tensorflow

    tensorflow().reshape(tensorflow().ones(3), (2,))


def _caught(action: Callable[[], Any]) -> BaseException:
    try:
        action()
    except Exception as exc:
        return exc
    raise AssertionError("did not raise")


def test_whose_exception_it_is_depends_on_the_innermost_frame_that_is_not_a_library() -> None:
    mine = unexpected_error(_caught(_user_code_raises), "f")
    assert isinstance(mine, FunctionError)
    assert mine.message.startswith("f raised ValueError: boom (at ")
    line = _user_code_raises.__code__.co_firstlineno + 1
    assert mine.message.endswith(f"test_isolation.py:{line})")
    # TensorFlow raises on behalf of its caller: here the user's code.
    theirs = unexpected_error(_caught(_user_code_misuses_tensorflow), "f")
    assert isinstance(theirs, FunctionError) and "InvalidArgumentError" in theirs.message
    # gradcheck's own code raising is gradcheck's bug.
    ours = unexpected_error(_caught(lambda: check_request(None, options_from("check", {}))),
                            "f")  # type: ignore[arg-type]
    assert isinstance(ours, InternalError) and ours.exit_code == ExitCode.INTERNAL_ERROR


def test_the_api_runs_in_a_worker_when_asked() -> None:
    target = f"{FIXTURES}/two_in_two_out.py:f"
    here, there = gradcheck.check(target), gradcheck.check(target, isolate=True)
    assert [(c.check, c.status, c.input, c.output) for c in there.checks] == [
        (c.check, c.status, c.input, c.output) for c in here.checks]
    with pytest.raises(FunctionError, match=r"^f raised InvalidArgumentError: Matrix size"):
        gradcheck.check(f"{BAD}/raises.py:f", isolate=True)
    with pytest.raises(TypeError, match="isolate=True sends f and its arguments to a worker"):
        gradcheck.check(lambda x: x, [1.0], isolate=True)
    with pytest.raises(ValueError, match=r"timeout= needs isolate=True"):
        gradcheck.check(target, timeout=1)


MIXED = (
    f'name = "passes"\ntarget = "{FIXTURES}/two_in_two_out.py:f"',
    f'name = "crashes"\ntarget = "{BAD}/aborts.py:f"',
    f'name = "fails"\ntarget = "{FIXTURES}/custom_gradient_full_jacobian.py:f"',
    f'name = "hangs"\ntarget = "{BAD}/hangs_native.py:f"\ntimeout = 3',
    f'name = "passes too"\ntarget = "{FIXTURES}/custom_gradient_correct.py:f"',
)


def _without_times(payload: dict[str, Any]) -> dict[str, Any]:
    return {**payload, "reports": [{k: v for k, v in r.items() if k != "seconds"}
                                   for r in payload["reports"]]}


def test_run_in_parallel_gives_the_serial_results(tmp_path: Path, run_cli: Run) -> None:
    config = tmp_path / "gradcheck.toml"
    config.write_text("[tool.gradcheck]\n" + "".join(
        f"[[tool.gradcheck.check]]\n{table}\n" for table in MIXED))
    runs = {jobs: run_cli(["run", "--config", str(config), "-j", jobs, "--format", "json"])
            for jobs in ("1", "2")}
    serial, parallel = (json.loads(runs[jobs].stdout) for jobs in ("1", "2"))
    assert runs["1"].exit_code == runs["2"].exit_code == 3
    assert _without_times(serial) == _without_times(parallel)
    reports = {r["name"]: r for r in serial["reports"]}
    assert list(reports) == ["passes", "crashes", "fails", "hangs", "passes too"]
    assert {name: r["exit_code"] for name, r in reports.items()} == {
        "passes": 0, "crashes": 3, "fails": 1, "hangs": 3, "passes too": 0}
    assert reports["crashes"]["phase"] == reports["hangs"]["phase"] == (
        "the first calls of f and its gradient")
    assert reports["hangs"]["error"].startswith("f did not finish within 3s (timeout 3) during")
    for payload in (serial, parallel):
        hangs = next(r for r in payload["reports"] if r["name"] == "hangs")
        # The limit counts from when a worker was free (its start-up included), so the check's
        # own time may be under 3 s; it never runs on past the limit (loose: a loaded machine).
        assert 0 < hangs["seconds"] < 3 + 30


@pytest.mark.parametrize(("target", "message"), [
    ("bad/segfaults_in_ctypes.py:f",
     "f crashed with a segmentation fault (SIGSEGV) during the first calls of f and its"
     " gradient; it was running bad/segfaults_in_ctypes.py:11"),
    ("bad/exits_on_import.py:f",
     "the worker process exited with code 0 during the loading of bad/exits_on_import.py:f and"
     " its inputs without a report: f or its module ended the process (os._exit?)"),
])
def test_the_users_own_crash_through_the_standard_library_or_exit_is_exit_3_without_a_retry(
        target: str, message: str, in_fixtures: Path, run_cli: Run) -> None:
    result = run_cli(["check", target, "--no-compiled"])
    assert result.exit_code == ExitCode.FUNCTION_ERROR
    assert result.stderr == f"Error: {message}\n"  # one line: no "checking again"


def test_a_file_shadowing_the_standard_library_is_named(tmp_path: Path) -> None:
    from gradcheck.targets.modules import import_module

    (tmp_path / "json.py").write_text("def dumps(value):\n    raise RuntimeError('mine')\n")
    module = import_module(str(tmp_path / "json.py"))
    with pytest.raises(RuntimeError) as caught:
        module.dumps(1)
    error = unexpected_error(caught.value, "f")
    assert error.message.endswith(f"; {tmp_path / 'json.py'} shadows the standard library's"
                                  " module json: rename it")


def test_a_json_py_in_the_current_folder_does_not_break_python_m_gradcheck(
        tmp_path: Path) -> None:
    import os
    import shutil
    import subprocess
    import sys

    shutil.copy(FIXTURES / "two_in_two_out.py", tmp_path / "ops.py")
    (tmp_path / "json.py").write_text("raise RuntimeError('not the json you want')\n")
    done = subprocess.run(
        [sys.executable, "-m", "gradcheck", "check", "ops.py:f", "-q", "--no-compiled"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "PYTHONPATH": str(FIXTURES.parent)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("OK ops.py:f")


def test_a_huge_timeout_is_no_timeout_and_no_traceback() -> None:
    import os
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "gradcheck", "check", "two_in_two_out.py:f", "--timeout", "1e308",
         "-q", "--no-compiled"], cwd=FIXTURES, capture_output=True, text=True, timeout=300,
        check=False, env={**os.environ, "PYTHONPATH": str(FIXTURES.parent)})
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # the worker's watchdog thread raised no OverflowError


def test_a_fork_server_killed_under_the_worker_is_one_clean_error_and_the_next_check_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os
    import signal
    import threading
    from multiprocessing import forkserver

    from gradcheck.processes import workers

    if workers.context().get_start_method() != "forkserver":
        pytest.skip("no fork server on this platform")
    started = tmp_path / "started"
    monkeypatch.setenv("GRADCHECK_STARTED_FILE", str(started))

    def kill_the_fork_server() -> None:
        for _ in range(1200):
            if started.exists():
                os.kill(forkserver._forkserver._forkserver_pid, signal.SIGKILL)
                return
            time.sleep(0.1)

    threading.Thread(target=kill_the_fork_server, daemon=True).start()
    target = str(BAD / "waits_forever.py") + ":f"
    (result,) = run_jobs([job(target, timeout=120.0)])
    assert isinstance(result.error, InternalError)
    assert result.error.message.startswith(
        "the fork server process that starts gradcheck's workers was killed (perhaps by the"
        f" system's out-of-memory killer) while the check of {target} was running")
    (after,) = run_jobs([job(str(FIXTURES / "two_in_two_out.py") + ":f")])
    assert after.report is not None and after.report.ok


SCRIPT = """
import gradcheck


def f(x):
    import tensorflow as tf
    return tf.sin(x)

{call}
"""


@pytest.mark.parametrize(("call", "expected"), [
    ("print(gradcheck.check(f, [0.5, 1.0], isolate=True).ok)",
     "gradcheck.errors.UsageError: isolate=True runs f in a worker process, which imports"
     " script.py again to find f: put the top-level code of script.py that calls gradcheck under"
     ' `if __name__ == "__main__":`, or define f in a module of its own'),
    ('if __name__ == "__main__":\n    print(gradcheck.check(f, [0.5, 1.0], isolate=True,'
     ' compiled=False).ok)', "True"),
])
def test_isolate_from_a_script_says_when_it_needs_a_main_guard(call: str, expected: str,
                                                               tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    (tmp_path / "script.py").write_text(SCRIPT.format(call=call))
    done = subprocess.run([sys.executable, "script.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300, check=False,
                          env={**os.environ, "PYTHONPATH": str(FIXTURES.parent)})
    lines = (done.stdout + done.stderr).strip().splitlines()
    assert lines[-1] == expected
    assert "bootstrapping" not in done.stderr


# devices_at_import: every tf.distribute example; dtensor_at_import: the DTensor guide's eight
# virtual CPUs and initialize_accelerator_system() at import; mixed_policy_at_import: the mixed
# precision guide's global policy and model, set up at import.
@pytest.mark.parametrize("module", ["devices_at_import", "dtensor_at_import",
                                    "mixed_policy_at_import"])
def test_a_module_that_sets_up_logical_devices_at_import_is_checked(module: str,
                                                                    tmp_path: Path) -> None:
    """Every tf.distribute example configures its devices when imported, which TensorFlow
    refuses once it has started: the worker starts it only after the user's module (a fresh
    `gradcheck check`, as a user runs it)."""
    import os
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "gradcheck", "check", str(FIXTURES / f"{module}.py") + ":f",
         "-i", "[1.0, 2.0]", "-q", "--no-compiled"], capture_output=True, text=True,
        timeout=300, check=False, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(FIXTURES.parent)})
    assert done.returncode == 0, done.stderr
    assert "passed" in done.stdout
