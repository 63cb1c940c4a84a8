"""What the ACP client's tests share: the two scripted ACP agents written with the official
SDKs (Python: ``acp_py_agent.py``; TypeScript: ``node/agent.mjs``, its npm package installed
once by ``npm ci`` under a file lock, the suite running in parallel workers), this process's
agent children (read from /proc), and one root run calling an ``ACPAgent`` tool."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from hpd_agent import Agent, RunFinished, RunResult
from hpd_agent.acp import ACPAgent
from hpd_agent.events import Event
from hpd_agent.messages import ToolResultMessage
from hpd_agent.run import Run
from hpd_agent.testing import ScriptedModel, text, tool_call

HERE = Path(__file__).parent
PY_AGENT = HERE / "acp_py_agent.py"
NODE_DIR = HERE / "node"
TS_AGENT = NODE_DIR / "agent.mjs"
KINDS = ("py", "ts")


def node() -> str:
    """The node executable, with the pinned SDK installed (or the test skips, saying why)."""
    exe, npm = shutil.which("node"), shutil.which("npm")
    if exe is None or npm is None:
        pytest.skip(
            "node and npm are needed for the TypeScript SDK's agent (apt-get install nodejs npm)"
        )
    sdk = NODE_DIR / "node_modules" / "@agentclientprotocol" / "sdk" / "package.json"
    # Parallel workers: one installs, the others wait for it (npm ci empties node_modules first).
    with open(NODE_DIR / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not sdk.is_file():
            done = subprocess.run(
                [npm, "ci", "--no-audit", "--no-fund"],
                cwd=NODE_DIR,
                capture_output=True,
                text=True,
                timeout=280,
            )
            if done.returncode != 0:
                pytest.skip(f"npm could not install the ACP SDK: {done.stderr.strip()[-500:]}")
    return exe


def command(kind: str, log: Path) -> tuple[str, list[str]]:
    """How to start the agent of ``kind`` ("py" or "ts") logging to ``log``."""
    if kind == "ts":
        return node(), [str(TS_AGENT), str(log)]
    return sys.executable, [str(PY_AGENT), str(log)]


def acp_agent(kind: str, tmp: Path, **kwargs: Any) -> ACPAgent:
    """An ``ACPAgent`` named "Agent" running the scripted agent of ``kind`` in ``tmp``."""
    exe, args = command(kind, tmp / "agent.log")
    kwargs.setdefault("name", "Agent")
    kwargs.setdefault("cwd", tmp)
    return ACPAgent(exe, args, **kwargs)


def logged(tmp: Path) -> list[str]:
    path = tmp / "agent.log"
    return path.read_text().splitlines() if path.exists() else []


def arrived(tmp: Path) -> list[str]:
    """What reached the agent, in the order it came: each message's method, or "response"."""
    path = tmp / "agent.log.wire"
    return path.read_text().splitlines() if path.exists() else []


def steps(*items: dict[str, Any]) -> str:
    """A query the scripted agents follow."""
    return json.dumps({"steps": list(items)})


def children() -> list[int]:
    """Pids of this process's children running a scripted agent (alive or not reaped)."""
    me, found = os.getpid(), []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue  # gone meanwhile
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        ours = str(PY_AGENT).encode() in cmdline or str(TS_AGENT).encode() in cmdline
        # A zombie (exited, not reaped) has no command line left: its name tells.
        name, state = stat.split("(", 1)[1].rsplit(")", 1)[0], stat.rsplit(")", 1)[1].split()[0]
        zombie = state == "Z" and name.startswith(("python", "node"))
        if ppid == me and (ours or zombie):
            found.append(int(entry.name))
    return found


def children_running(marker: str) -> list[int]:
    """Pids of this process's children whose command line holds ``marker``."""
    me, found = os.getpid(), []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == me and marker.encode() in cmdline:
                found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    """Whether ``pid`` is a process (a zombie too)."""
    return Path(f"/proc/{pid}").exists()


@dataclass
class Outcome:
    """What one root run gave: its result, its events, the agent tool's results."""

    result: RunResult
    events: list[Event] = field(default_factory=list[Event])
    children_at_finish: list[int] = field(default_factory=list[int])

    @property
    def results(self) -> list[ToolResultMessage]:
        return [m for m in self.result.messages if isinstance(m, ToolResultMessage)]

    @property
    def texts(self) -> list[str]:
        return [m.content for m in self.results]


Answer = Callable[[Run, Event], Awaitable[None]]


async def no_answer(run: Run, event: Event) -> None:
    """Answer nothing."""


async def run_calls(
    tool: Any, *turns: Sequence[str], answer: Answer = no_answer, name: str = "Agent"
) -> Outcome:
    """A root run "Root" whose model calls ``tool`` once per query of each turn (the queries
    of a turn in parallel), then answers "done"; ``answer`` sees every event."""
    script: list[Any] = [[tool_call(name, query=q) for q in turn] for turn in turns]
    root = Agent("Root", model=ScriptedModel([*script, text("done")]), tools=[tool])
    events: list[Event] = []
    at_finish: list[int] = []
    async with root.stream("go") as run:
        async for event in run:
            events.append(event)
            if isinstance(event, RunFinished):
                at_finish = children()
            await answer(run, event)
    return Outcome(run.result, events, at_finish)
