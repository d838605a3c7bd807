"""Processes as the system shows them (the one reader of Linux's /proc; psutil elsewhere): a
process's state, memory and umask; its descendants and its group's members, ended together, so
that nothing a check started (at any depth, in a session of its own or not) outlives the
command; and a short folder for the sockets multiprocessing makes when TMPDIR is too long."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import tempfile
import time
from collections.abc import Iterable

from gradcheck.errors import UsageError

# Linux's prctl option that keeps a process's orphaned descendants its children (instead of
# init's), so that they can still be found and ended with it.
PR_SET_CHILD_SUBREAPER = 36
# The longest path an AF_UNIX socket can be bound to (sun_path holds 108 bytes with its NUL).
MAX_SOCKET_PATH = 107
# What multiprocessing adds to its folder's parent: "/pymp-XXXXXXXX/listener-XXXXXXXX".
SOCKET_SUFFIX = len("/pymp-XXXXXXXX/listener-XXXXXXXX")
# Folders tried, in order, for multiprocessing's sockets when TMPDIR's path is too long.
SHORT_FOLDERS = ("/tmp", "/var/tmp", "/dev/shm")
# Linux says how much memory a process holds in /proc; elsewhere (macOS, Windows) psutil says
# it, a dependency on those platforms only (pyproject.toml), so the memory cap holds there too.
READS_PROC = sys.platform == "linux"


def proc_value(path: str, key: str) -> str | None:
    """The first word after "Key:" in a /proc file such as /proc/self/status, or None."""
    try:
        with open(path, encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith(f"{key}:"):
                    return line.split()[1]
    except (OSError, IndexError):
        pass
    return None


def proc_bytes(path: str, key: str) -> int | None:
    """A "Key:  N kB" line of a /proc file in bytes, or None."""
    value = proc_value(path, key)
    try:
        return None if value is None else int(value) * 1024
    except ValueError:
        return None


def stat_fields(pid: int | str) -> list[str] | None:
    """/proc/PID/stat after the command's name: state, parent pid, process group...; None
    when there is no such process (or no /proc)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            return stat.read().rpartition(")")[2].split() or None
    except OSError:
        return None


def resident_memory(pid: int, from_proc: bool = READS_PROC) -> int | None:
    """Process `pid`'s resident memory in bytes, or None when it has ended."""
    if from_proc:
        return proc_bytes(f"/proc/{pid}/status", "VmRSS")
    import psutil

    try:
        return int(psutil.Process(pid).memory_info().rss)
    except psutil.Error:
        return None


def available_memory(from_proc: bool = READS_PROC) -> int | None:
    """Bytes of memory available to new processes (Linux's MemAvailable), or None."""
    if from_proc:
        return proc_bytes("/proc/meminfo", "MemAvailable")
    try:
        import psutil
    except ImportError:
        return None
    return int(psutil.virtual_memory().available)


def umask() -> int:
    """The process's umask (read from /proc on Linux, so that it is never changed)."""
    found = proc_value("/proc/self/status", "Umask")
    if found is not None:
        with contextlib.suppress(ValueError):
            return int(found, 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _table() -> dict[int, tuple[int, int, str]]:
    """Every process: pid -> (parent pid, process group, state letter)."""
    table: dict[int, tuple[int, int, str]] = {}
    if os.path.isdir("/proc"):
        with contextlib.suppress(OSError):
            for entry in os.scandir("/proc"):
                if not entry.name.isdigit():
                    continue
                fields = stat_fields(entry.name)
                if fields is None or len(fields) < 3:
                    continue
                with contextlib.suppress(ValueError):
                    table[int(entry.name)] = (int(fields[1]), int(fields[2]), fields[0])
        return table
    try:
        import psutil
    except ImportError:
        return table
    for process in psutil.process_iter(["ppid", "status"]):
        with contextlib.suppress(psutil.Error, OSError, AttributeError):
            group = os.getpgid(process.pid) if hasattr(os, "getpgid") else -1
            state = "Z" if process.info["status"] == psutil.STATUS_ZOMBIE else "R"
            table[process.pid] = (process.info["ppid"] or 0, group, state)
    return table


def _ended_state(state: str) -> bool:
    return state in ("Z", "X", "x")


def alive(pid: int) -> bool:
    """The process runs (a zombie has ended: only its exit status is left)."""
    entry = _table_entry(pid)
    return entry is not None and not _ended_state(entry)


def _table_entry(pid: int) -> str | None:
    if os.path.isdir("/proc"):
        fields = stat_fields(pid)
        return None if fields is None else fields[0]
    entry = _table().get(pid)
    return None if entry is None else entry[2]


def members(root: int, group: int | None = None) -> set[int]:
    """The live descendants of ROOT, and the live members of process group GROUP (not ROOT, nor
    this process)."""
    table = _table()
    children: dict[int, list[int]] = {}
    for pid, (parent, _, _) in table.items():
        children.setdefault(parent, []).append(pid)
    found: set[int] = set()
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    if group is not None:
        found.update(pid for pid, (_, pgid, _) in table.items() if pgid == group)
    found.discard(root)
    found.discard(os.getpid())
    return {pid for pid in found if not _ended_state(table[pid][2])}


def _signal(pids: Iterable[int], signum: int | None) -> None:
    if signum is None:
        return
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signum)


def end_tree(root: int, include_root: bool = True, group: int | None = None,
             wait: float = 5.0) -> set[int]:
    """End ROOT's descendants and process group GROUP's members (and ROOT itself when
    INCLUDE_ROOT): each is stopped as it is found, until no new one appears (a stopped process
    starts no other), then all are killed, and their end awaited for up to WAIT seconds.
    Returns those ended besides ROOT."""
    stop = getattr(signal, "SIGSTOP", None)
    kill = getattr(signal, "SIGKILL", signal.SIGTERM)
    if include_root:
        _signal([root], stop)
    found: set[int] = set()
    for _ in range(100):  # a fork bomb stopped a generation at a time
        new = members(root, group) - found
        if not new:
            break
        _signal(new, stop)
        found |= new
    _signal(found, kill)
    if include_root:
        _signal([root], kill)
    if group is not None and hasattr(os, "killpg"):
        with contextlib.suppress(OSError):
            if group != os.getpgid(0):
                os.killpg(group, kill)
    deadline = time.monotonic() + wait
    waiting = set(found) | ({root} if include_root else set())
    while waiting and time.monotonic() < deadline:  # a zombie has ended: its parent reaps it
        waiting = {pid for pid in waiting if alive(pid)}
        if waiting:
            time.sleep(0.01)
    return found


def become_subreaper() -> bool:
    """Linux: orphans among this process's descendants become its children rather than init's
    (so a daemon that f starts is still found under it); elsewhere nothing. True if done."""
    if sys.platform != "linux":
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def short_socket_folder() -> None:
    """multiprocessing binds its fork server's socket under a folder it makes in TMPDIR: when
    that path would be too long for AF_UNIX, its folder is made in a short one instead; a
    UsageError when none is writable."""
    from multiprocessing import process, util

    config = process.current_process()._config  # type: ignore[attr-defined]
    if config.get("tempdir") is not None or sys.platform == "win32":
        return
    if len(os.fsencode(tempfile.gettempdir())) + SOCKET_SUFFIX <= MAX_SOCKET_PATH:
        return
    import shutil

    failures = []
    for parent in SHORT_FOLDERS:
        try:
            folder = tempfile.mkdtemp(prefix="pymp-", dir=parent)
        except OSError as exc:
            failures.append(f"{parent}: {exc.strerror or exc}")
            continue
        util.Finalize(None, util._remove_temp_dir,  # type: ignore[attr-defined]
                      args=(shutil.rmtree, folder), exitpriority=-100)
        config["tempdir"] = folder
        return
    raise UsageError(f"the temporary folder {tempfile.gettempdir()} (TMPDIR) is too long a path"
                  f" for the sockets of gradcheck's worker processes, and no short folder is"
                  f" writable ({'; '.join(failures)}); set TMPDIR to a shorter path")
