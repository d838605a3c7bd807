"""Run a command in a real pseudo-terminal of a given width and read what it showed there."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import termios
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rich.cells import cell_len

ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


@dataclass(frozen=True)
class Shown:
    """What the terminal received (`raw`, escapes removed) and its exit code."""

    raw: str
    returncode: int

    @property
    def lines(self) -> list[str]:
        """The lines as the terminal shows them: a carriage return starts its line over."""
        return [line.rsplit("\r", 1)[-1].rstrip() for line in self.raw.split("\n")]

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    def widest(self) -> int:
        return max((cell_len(line) for line in self.lines), default=0)


def in_terminal(argv: Sequence[str], columns: int, cwd: Path | str,
                env: dict[str, str] | None = None, stderr_too: bool = True,
                timeout: float = 300) -> Shown:
    """`argv` with stdout (and stderr unless `stderr_too` is false: then it is discarded) on a
    pseudo-terminal `columns` wide; $COLUMNS and $LINES unset, as in an interactive shell (and
    the width a pytest run shares with the processes it starts)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    environment = {k: v for k, v in (env or os.environ).items()
                   if k not in ("COLUMNS", "LINES", "GRADCHECK_COLUMNS")}
    environment.update(TERM="xterm", NO_COLOR="1")
    process = subprocess.Popen(list(argv), cwd=cwd, env=environment, stdin=slave, stdout=slave,
                               stderr=slave if stderr_too else subprocess.DEVNULL,
                               start_new_session=True)
    os.close(slave)
    received = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1.0)
            if not ready:
                if process.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: every writer closed its end
                break
            if not chunk:
                break
            received += chunk
        else:
            process.kill()
            raise TimeoutError(f"{argv} did not finish in {timeout}s")
    finally:
        os.close(master)
    returncode = process.wait(timeout=60)
    text = ESCAPE.sub("", received.decode("utf-8", "replace")).replace("\r\n", "\n")
    return Shown(text.replace("\b", ""), returncode)
