"""One durable run whose process dies at a write of its journal, in a durability mode.

Run as a child process by ``test_durability_modes.py``::

    python modes_crash.py LOCATION MODE CUT POINT WORKDIR

The run (its id: ``WORKDIR``'s name) calls the ``work`` tool with ``a``, then ``b`` (its side effect: a
line in ``WORKDIR/effects.txt``), asks the human a question (``ask_user``, answered at once
by a scripted human), calls ``work`` with ``c`` and answers "done". It runs with
``durability=MODE``. Every write that makes part of the run durable is a cut point,
counted from 1 in the order the run makes them: a journal write (``Journal._writing``), an
entry sent ahead (PostgreSQL) or its confirmation, a batch of the store's writer in mode
``"async"`` (``BehindIO.commit``, in the writer's thread), the question's request
(``StoreRequests.open``), the run's end (``LeaseKeeper.close``). In mode ``"async"`` each
model turn waits until the writer has committed every fact handed to it (``DRAINED``), so
its batches come at the same points in every run. Each is listed in
``WORKDIR/cuts.txt`` as it is reached. At cut ``CUT`` the process ends itself
(``os._exit(17)``, no clean-up) at ``POINT``: ``before`` (nothing of that write made) or
``after`` (it is made: sent, for an entry sent ahead). With ``CUT`` 0 the run finishes.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Awaitable, Sequence
from typing import Any

import anyio
import anyio.lowlevel
import anyio.to_thread

from hpd_agent import Agent, ask_user, tool
from hpd_agent.messages import Message, ToolResultMessage
from hpd_agent.models import ModelRequestParams
from hpd_agent.store import open_store
from hpd_agent.testing import FunctionModel, ScriptedHuman, text, tool_call

CRASHED = 17
KEYS = ("a", "b", "c")


class _Drained:
    """Facts handed to the store's writer (mode ``"async"``) against those it committed or
    the run took back."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.handed = 0
        self.done = 0

    def count(self, handed: int = 0, done: int = 0) -> None:
        with self.cond:
            self.handed += handed
            self.done += done
            self.cond.notify_all()

    async def wait(self) -> None:
        def wait() -> None:
            with self.cond:
                assert self.cond.wait_for(lambda: self.done >= self.handed, timeout=30)

        await anyio.to_thread.run_sync(wait)


DRAINED = _Drained()


def _append(path: str, line: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode() + b"\n")
    finally:
        os.close(fd)


def build(workdir: str) -> Agent:
    """The agent (here and in the resuming test)."""

    @tool
    async def work(key: str) -> str:
        """Do one step of work (a side effect: a line in effects.txt)."""
        _append(os.path.join(workdir, "effects.txt"), key)
        return f"did {key}"

    async def turn(messages: Sequence[Message], info: ModelRequestParams) -> Any:
        await anyio.lowlevel.checkpoint()  # a real model's round trip yields to the event loop
        await DRAINED.wait()  # mode "async": the writer's batch comes before the next turn
        if info.turn in (0, 1):
            return tool_call("work", _id=f"w{info.turn}", key=KEYS[info.turn])
        if info.turn == 2:
            return tool_call("ask_user", _id="ask", question="Which colour?")
        if info.turn == 3:
            return tool_call("work", _id="w3", key="c")
        answer = next(
            m.content for m in messages if isinstance(m, ToolResultMessage) and m.name == "ask_user"
        )
        return text(f"done: {answer}")

    return Agent("worker", model=FunctionModel(turn), tools=[work, ask_user()], max_turns=8)


def human() -> ScriptedHuman:
    return ScriptedHuman({"colour": "blue"})


def _cut_at(cut: int, point: str, workdir: str) -> None:
    """Count the run's writes (module docstring) and die at ``cut``'s ``point``."""
    from hpd_agent.store import _backend, _behind, _journal, _lease

    seen = [0]
    # The store's writer thread (mode "async") and the event loop reach writes at the same
    # time: each takes its number under the lock and compares its own, or cut N is missed.
    numbering = threading.Lock()

    def reached(what: str) -> int:
        with numbering:
            seen[0] += 1
            n = seen[0]
        _append(os.path.join(workdir, "cuts.txt"), f"{n} {what}")
        if n == cut and point == "before":
            os._exit(CRASHED)
        return n

    def done(n: int) -> None:
        if n == cut and point == "after":
            os._exit(CRASHED)

    async def then_done(waiting: Awaitable[Any], n: int) -> Any:
        value = await waiting
        done(n)
        return value

    writing: Any = _journal.Journal._writing  # pyright: ignore[reportPrivateUsage]

    def counted_writing(self: Any, entries: Any) -> Any:
        n = reached("write " + ",".join(e.kind for e in entries))
        waiting = writing(self, entries)
        if waiting is None:
            done(n)
            return None
        return then_done(waiting, n)

    init: Any = _journal.Journal.__init__

    def counted_init(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        send, confirm = self._send_now, self._confirm
        if send is not None:

            def counted_send(run_id: str, entry: Any) -> bool:
                n = reached("send " + entry.kind)
                sent = send(run_id, entry)
                done(n)
                return sent

            async def counted_confirm() -> None:
                n = reached("confirm")
                await confirm()
                done(n)

            self._send_now, self._confirm = counted_send, counted_confirm

    writer_init: Any = _behind.BehindWriter.__init__

    def counted_writer(self: Any, connect: Any, name: str) -> None:
        def counted_connect() -> Any:
            io = connect()
            commit = io.commit

            def counted_commit(batch: Any) -> Any:
                entries = [e for _, _, es in batch for e in es]
                n = reached("behind " + ",".join(e.kind for e in entries))
                errors = commit(batch)
                done(n)
                DRAINED.count(done=len(entries))
                return errors

            io.commit = counted_commit
            return io

        writer_init(self, counted_connect, name)

    add: Any = _behind.Behind.add

    def counted_add(self: Any, entry: Any) -> None:
        DRAINED.count(handed=1)
        add(self, entry)

    take: Any = _behind.Behind.take

    def counted_take(self: Any) -> Any:
        taken = take(self)
        DRAINED.count(done=len(taken))
        return taken

    _behind.BehindWriter.__init__ = counted_writer  # type: ignore[method-assign]
    _behind.Behind.add = counted_add  # type: ignore[method-assign]
    _behind.Behind.take = counted_take  # type: ignore[method-assign]
    opening: Any = _backend.StoreRequests.open

    async def counted_open(self: Any, *args: Any) -> Any:
        n = reached("request")
        opened = await opening(self, *args)
        done(n)
        return opened

    closing: Any = _lease.LeaseKeeper.close

    async def counted_close(self: Any, *args: Any) -> Any:
        n = reached("close")
        closed = await closing(self, *args)
        done(n)
        return closed

    _journal.Journal._writing = counted_writing  # type: ignore[method-assign]
    _journal.Journal.__init__ = counted_init  # type: ignore[method-assign]
    _backend.StoreRequests.open = counted_open  # type: ignore[method-assign]
    _lease.LeaseKeeper.close = counted_close  # type: ignore[method-assign]


async def main(location: str, mode: str, cut: int, point: str, workdir: str) -> None:
    _cut_at(cut, point, workdir)
    store = open_store(location)
    try:
        await build(workdir).run(
            "go",
            store=store,
            run_id=os.path.basename(workdir),
            handler=human(),
            durability=mode,  # type: ignore[arg-type]
        )
    finally:
        await store.aclose()


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5])
