"""A server command run as a child process of a test, found by the line saying where it
serves (``hpd-agent serve --a2a``, ``hpd-agent mcp --http``); or read line by line as its
output comes (``child_lines``: what ``hpd-agent serve`` says while it serves)."""

from __future__ import annotations

import os
import queue
import re
import subprocess
import threading
from collections.abc import Generator, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

TESTS = Path(__file__).resolve().parent
PYTHONPATH = os.pathsep.join([str(TESTS.parent), str(TESTS)])
"""A test's child process imports the checkout and the helpers in tests/ (by name)."""


@contextmanager
def serving_child(
    command: Sequence[str], *, cwd: Path, env: Mapping[str, str], serving: re.Pattern[str]
) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """``command`` running (its output read in a thread) and its URL, group 1 of the first
    line ``serving`` matches, once it listens; terminated at the end unless it ended."""
    proc = subprocess.Popen(
        [*command],
        cwd=cwd,
        env=dict(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    found: list[str] = []
    ready = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            match = serving.search(line)
            if match and not found:
                found.append(match.group(1))
                ready.set()
        ready.set()

    threading.Thread(target=read, daemon=True).start()
    try:
        assert ready.wait(60) and found, "the server did not start"
        yield found[0], proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(30)


class Lines:
    """A child's output (stdout and stderr), line by line as it comes, read in a thread."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    def until(self, pattern: str) -> list[str]:
        """The lines from here up to the first that ``pattern`` matches in full (each waited
        for, a minute at most)."""
        seen: list[str] = []
        while True:
            line = self._lines.get(timeout=60)
            assert line is not None, "the child ended:\n" + "\n".join(seen)
            seen.append(line)
            if re.fullmatch(pattern, line):
                return seen

    def rest(self) -> list[str]:
        """The lines still to come once the child is stopped (terminated)."""
        self.proc.terminate()
        self.proc.wait(timeout=30)
        out: list[str] = []
        while (line := self._lines.get(timeout=60)) is not None:
            out.append(line)
        return out


@contextmanager
def child_lines(command: Sequence[str], *, cwd: Path, env: Mapping[str, str]) -> Generator[Lines]:
    """``command`` running, its output read line by line; killed at the end unless it ended."""
    proc = subprocess.Popen(
        [*command],
        cwd=cwd,
        env=dict(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        yield Lines(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
