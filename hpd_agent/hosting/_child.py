"""A program this process talks to over its stdin and stdout (``open_child``): the other end
of a protocol on stdio (an editor's agent over ACP, any stdio server), in a process group of
its own, reaped when left.

Such a program may start children of its own and may not exit when asked, so
``ChildProcess.end`` asks in turn: its input closed (the protocol's own "goodbye"),
``grace`` seconds, SIGTERM to its group, ``kill_grace`` seconds, SIGKILL; leaving
``open_child`` kills whatever is left of the group and reaps the program.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager

import anyio
import anyio.abc

__all__ = ["ChildProcess", "open_child"]


class ChildProcess:
    """A program ``open_child`` started: ``exited`` is set once it has exited (``watch``
    reaps it as it exits, ``end`` ends it), ``status`` is its exit status."""

    def __init__(self, process: anyio.abc.Process) -> None:
        self.process = process
        self.exited = anyio.Event()
        self.status: int | None = None

    @property
    def stdin(self) -> anyio.abc.ByteSendStream:
        """What the program reads."""
        assert self.process.stdin is not None  # opened with a pipe
        return self.process.stdin

    @property
    def stdout(self) -> anyio.abc.ByteReceiveStream:
        """What the program writes (its stderr is this process's)."""
        assert self.process.stdout is not None
        return self.process.stdout

    async def watch(self) -> None:
        """Wait for the program to exit on its own, then set ``exited``."""
        self.status = await self.process.wait()
        self.exited.set()

    async def end(
        self,
        close_input: Callable[[], Awaitable[None]],
        grace: float = 5.0,
        kill_grace: float = 2.0,
    ) -> None:
        """End the program (shielded): ``close_input``, ``grace`` seconds to exit, then
        SIGTERM, ``kill_grace`` seconds, then SIGKILL, each to its process group. It waits
        for the process itself: a task running ``watch`` may be cancelled already."""
        with anyio.CancelScope(shield=True):
            await close_input()
            for sig, wait in ((None, grace), (signal.SIGTERM, kill_grace), (signal.SIGKILL, None)):
                if sig is not None:
                    _kill(self.process, sig)
                with anyio.move_on_after(float("inf") if wait is None else wait):
                    self.status = await self.process.wait()
                    break
            self.exited.set()


@asynccontextmanager
async def open_child(
    argv: Sequence[str], *, cwd: str, env: Mapping[str, str]
) -> AsyncGenerator[ChildProcess]:
    """Start ``argv`` with pipes on its stdin and stdout, in a process group of its own;
    leaving kills what is left of the group and reaps the program (use
    ``ChildProcess.end`` first to let it exit).

    Raises:
        OSError: The program cannot be started.
    """
    process = await anyio.open_process(
        list(argv), cwd=cwd, env=dict(env), stderr=None, start_new_session=True
    )
    try:
        yield ChildProcess(process)
    finally:
        with anyio.CancelScope(shield=True):
            _kill(process, signal.SIGKILL)  # stragglers of its group
            await process.aclose()


def _kill(process: anyio.abc.Process, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, sig)  # its children too
    with contextlib.suppress(ProcessLookupError, OSError):  # it may have left the group
        process.send_signal(sig)
