"""gradcheck.processes.trees on real processes, without TensorFlow: a tree ended at any depth (a
daemon in a session of its own included) before end_tree returns, and multiprocessing's fork
server started under a TMPDIR too long for an AF_UNIX socket."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gradcheck.processes.trees import alive, end_tree

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="subreapers and /proc: Linux")
REPO = Path(__file__).resolve().parent.parent

TREE = textwrap.dedent("""
    import os, subprocess, sys, time
    from gradcheck.processes.trees import become_subreaper
    become_subreaper()
    child = subprocess.Popen(["sleep", "60"])
    daemon = subprocess.Popen([sys.executable, "-c", '''
    import os, subprocess
    if os.fork():
        os._exit(0)
    os.setsid()
    grandchild = subprocess.Popen(["sleep", "61"])
    print(os.getpid(), grandchild.pid, flush=True)
    grandchild.wait()
    '''], stdout=subprocess.PIPE, text=True)
    print(child.pid, *daemon.stdout.readline().split(), flush=True)
    daemon.wait()
    time.sleep(60)
""")


def test_a_tree_ends_at_any_depth_before_end_tree_returns() -> None:
    root = subprocess.Popen([sys.executable, "-c", TREE], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        assert root.stdout is not None
        started = [int(pid) for pid in root.stdout.readline().split()]
        assert len(started) == 3 and all(alive(pid) for pid in started)
        ended = end_tree(root.pid, include_root=True)
        assert set(started) <= ended
        assert not any(alive(pid) for pid in [root.pid, *started])
    finally:
        root.kill()
        root.wait()


FORK_SERVER = textwrap.dedent("""
    import multiprocessing, sys
    from gradcheck.processes import trees
    if sys.argv[1] == "fixed":
        trees.short_socket_folder()
    elif sys.argv[1] == "nowhere":
        trees.SHORT_FOLDERS = ("/nonexistent/gradcheck",)
        try:
            trees.short_socket_folder()
        except trees.UsageError as exc:
            print(exc)
            sys.exit(2)
    server = multiprocessing.get_context("forkserver").Process(target=print, args=("ran",))
    server.start()
    server.join()
""")


@pytest.mark.parametrize(("how", "code", "output"), [
    ("as-is", 1, "AF_UNIX path too long"),  # what Python alone does
    ("fixed", 0, "ran"),
    ("nowhere", 2, "is too long a path for the sockets of gradcheck's worker processes"),
])
def test_a_fork_server_starts_under_a_long_tmpdir(how: str, code: int, output: str,
                                                 tmp_path: Path) -> None:
    long = tmp_path / ("x" * 120)
    long.mkdir()
    done = subprocess.run([sys.executable, "-c", FORK_SERVER, how], capture_output=True,
                          text=True, timeout=60, check=False,
                          env={**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": str(long)})
    assert done.returncode == code, done.stderr
    assert output in done.stdout + done.stderr
    assert list(long.iterdir()) == []
