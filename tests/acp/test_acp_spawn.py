"""``hpd_agent.acp._rpc.spawn``: a program started with a JSON-RPC peer on its stdio is reaped
when its scope ends, a cancelled scope too (its watching task then cancelled before the
program exited), on asyncio and trio. Run in a child interpreter with a deadline: a reaping
that waits for a watcher that is gone hangs with no timer left, which no in-process
``fail_after`` could end."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from _child import PYTHONPATH

SCENARIO = """
import sys, anyio
from hpd_agent.acp._rpc import spawn

async def nothing(method, params):
    return None

async def main():
    waits = [sys.executable, "-c", "import sys; sys.stdin.read()"]  # exits when stdin closes
    with anyio.CancelScope() as scope:
        async with spawn(waits, cwd=".", env={}, on_request=nothing, on_notification=nothing) as child:
            print(child.proc.process.pid, flush=True)
            scope.cancel()
            await anyio.sleep_forever()
    print(child.proc.exited.is_set(), child.proc.status)

anyio.run(main, backend=sys.argv[1])
"""


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_cancelled_scope_reaps_its_program(backend: str, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCENARIO, backend],
        env={"PYTHONPATH": PYTHONPATH},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    pid, ended = done.stdout.splitlines()
    assert ended == "True 0"  # it exited as its stdin closed: no signal needed
    assert not Path(f"/proc/{pid}").exists()
