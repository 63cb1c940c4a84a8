"""A server command run as a child process of a test, found by the line saying where it
serves (``hpd-agent serve --a2a``, ``hpd-agent mcp --http``)."""

from __future__ import annotations

import os
import re
import subprocess
import threading
from collections.abc import Iterator, Mapping, Sequence
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
