"""What works beyond Linux: the worker's memory cap and the run's free memory read through
psutil where there is no /proc (macOS, Windows), compared here with /proc's own numbers."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from gradcheck.processes.trees import available_memory, resident_memory

LINUX_ONLY = pytest.mark.skipif(sys.platform != "linux", reason="compares with /proc")


@LINUX_ONLY
def test_a_processs_memory_reads_the_same_with_and_without_proc() -> None:
    ballast = bytearray(64 << 20)  # 64 MiB, touched, so resident
    ballast[::4096] = b"x" * len(ballast[::4096])
    from_proc, from_psutil = resident_memory(os.getpid(), True), resident_memory(os.getpid(), False)
    assert from_proc is not None and from_psutil is not None
    assert from_proc > 64 << 20
    assert abs(from_proc - from_psutil) < 16 << 20
    del ballast


@LINUX_ONLY
def test_the_free_memory_reads_alike_with_and_without_proc() -> None:
    from_proc, from_psutil = available_memory(True), available_memory(False)
    assert from_proc is not None and from_psutil is not None
    assert abs(from_proc - from_psutil) < max(from_proc // 10, 256 << 20)


@pytest.mark.parametrize("from_proc", [True, False])
def test_an_ended_process_has_no_memory(from_proc: bool) -> None:
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    assert resident_memory(ended.pid, from_proc) is None
