"""The lease is a fence: a holder stalled past its lease writes nothing and runs nothing more.

A child process (A, ``hpd-agent resume`` with a 1 s lease) drives a run of ``fence_agents``
until it waits for its second question; the test SIGSTOPs it and waits, on the store, until
A's lease has expired. This process (B) then takes the run over, answers and finishes it
(the ``charge`` tool's side effect is done here). SIGCONT wakes A, which would answer the
same question and charge again: its writes are refused by the fence and its tool function
never starts, so every side effect is done once, the store holds exactly what B wrote, and
A exits with the CLI's lease status and a one-line error.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import durable_agents
import fence_agents
import pytest
from _pg import fresh_postgres, postgres_dsn  # noqa: F401  (fixtures)

from hpd_agent.store import SQLiteStore, Store, open_store

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
TESTS = Path(__file__).resolve().parents[1]
RUN = "run_fence"
EXIT_LEASED = 13


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the test drives processes; one event loop is enough


@pytest.fixture(params=["sqlite", "postgres"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        path = str(tmp_path / "runs.db")
        SQLiteStore(path)
        return path
    return str(request.getfixturevalue("fresh_postgres"))


def _env(workdir: Path) -> dict[str, str]:
    return {
        **os.environ,
        "HPD_TEST_DIR": str(workdir),
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(TESTS)]),
        "HPD_AGENT_ALLOW_MODEL_REQUESTS": "0",
        "HPD_AGENT_LEASE_TTL": "1.0",
    }


async def _parked(store: Store, pid: int) -> str:
    """Wait (bounded, on the store) until process ``pid`` holds the run's lease and its
    second question waits: that question's request id."""
    with anyio.fail_after(60):
        while True:
            lease = await store.get_lease(RUN)
            if lease is not None and lease.holder.split(":")[1] == str(pid):
                for r in await store.list_requests(run_id=RUN):
                    if r.question == "Second?":
                        return r.request_id
            await anyio.sleep(0.02)


async def _state(store: Store) -> tuple[Any, ...]:
    """All the store holds of the run: journal, record, requests, lease."""
    requests = sorted(
        await store.list_requests(run_id=RUN, status=None), key=lambda r: r.request_id
    )
    return (
        await store.journal(RUN),
        await store.get_run(RUN),
        requests,
        await store.get_lease(RUN),
    )


async def test_a_stalled_holder_writes_nothing_and_does_nothing_twice(
    location: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HPD_TEST_DIR", str(tmp_path))
    store = open_store(location)
    first = await fence_agents.build().run("go", store=store, run_id=RUN, on_unhandled="interrupt")
    (question,) = first.pending
    stderr_path = tmp_path / "a.stderr"
    command = [sys.executable, "-m", "hpd_agent.cli", "resume", RUN, "--db", location]
    command += ["--agent", "fence_agents:build", "--answer", f"{question.request_id}=yes"]
    stderr = os.open(stderr_path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        a = await anyio.open_process(
            command, env=_env(tmp_path), stdout=subprocess.DEVNULL, stderr=stderr
        )
    finally:
        os.close(stderr)
    try:
        second = await _parked(store, a.pid)
        a.send_signal(signal.SIGSTOP)
        stopped_at = time.time()
        await durable_agents.wait_lease_lapsed(store, RUN, timeout=30)
        assert time.time() - stopped_at < 5  # A's 1 s lease (HPD_AGENT_LEASE_TTL), not 10 s

        with anyio.fail_after(30):  # B: takes the lapsed lease over and finishes the run
            done = await fence_agents.build().resume(
                RUN, store=store, answers={second: "go"}, wait=True
            )
        assert done.output == "charged once"
        assert durable_agents.read_lines("side_effects.txt") == ["charged 5"]
        after_b = await _state(store)
        assert after_b[1] is not None and after_b[1].status == "completed"

        a.send_signal(signal.SIGCONT)
        with anyio.fail_after(30):
            await a.wait()
    finally:
        if a.returncode is None:
            a.send_signal(signal.SIGCONT)
            a.kill()
        await a.aclose()

    err = stderr_path.read_text()
    assert a.returncode == EXIT_LEASED, err
    (error,) = [line for line in err.splitlines() if line.startswith("error:")]
    assert re.search(r"lost its lease|lease was taken over", error) and "Traceback" not in err, err
    assert "waiting up to" not in err  # a lost lease is not a refusal to wait out
    # Every side effect once; the store holds exactly what B wrote (A wrote nothing).
    assert durable_agents.read_lines("side_effects.txt") == ["charged 5"]
    assert await _state(store) == after_b
    # Each model turn once too: A, woken, makes no model call once its lease is lost.
    assert durable_agents.read_lines("calls.txt") == [f"fence@{turn}" for turn in range(4)]
    await store.aclose()


async def test_a_lost_lease_is_not_waited_out_and_retried() -> None:
    """``resume(wait=...)`` waits out a refusal (nothing written); a lease lost while the
    run was driven (``lost=True``: writes may have been made) is raised at once."""
    from hpd_agent import RunLeasedError
    from hpd_agent._core.lease_wait import wait_for_lease

    tries: list[int] = []

    async def reopen() -> None:
        tries.append(1)
        raise RunLeasedError("lost", run_id="r", holder="", expires_at=0.0, lost=True)

    with anyio.fail_after(5), pytest.raises(RunLeasedError):
        await wait_for_lease(reopen, True)
    assert tries == [1]
