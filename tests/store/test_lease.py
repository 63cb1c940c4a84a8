"""One process drives a run at a time: the run's lease in the store.

The two-process tests run the ``durable_agents`` tree in a real child process (A), parked on
a depth-2 question that waits through the store (a SQLite file, or a PostgreSQL server).
While A lives, a ``resume`` from another process (B: the CLI, and this test process) fails
at once naming A; after A is SIGKILLed, B's ``resume`` fails until A's lease expires, then
takes the run over and completes it with each side effect done once.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import anyio
import anyio.abc
import durable_agents
import pytest
from _pg import fresh_postgres, postgres_dsn  # noqa: F401  (fixtures)

from hpd_agent import Agent, ClarificationRequest, RunLeasedError, UserError, ask_user
from hpd_agent.events import Event, RunFinished, RunStarted
from hpd_agent.store import Lease, MemoryStore, SQLiteStore, Store, open_store
from hpd_agent.testing import ScriptedModel, text, tool_call

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
TESTS = Path(__file__).resolve().parents[1]
RUN = "run_lease"


@pytest.fixture(params=["sqlite", "postgres"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        path = str(tmp_path / "runs.db")
        SQLiteStore(path)  # create the tables, so this process can look before the child
        return path
    return str(request.getfixturevalue("fresh_postgres"))


def _env(workdir: Path) -> dict[str, str]:
    return {
        **os.environ,
        "HPD_TEST_DIR": str(workdir),
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(TESTS)]),
        "HPD_AGENT_ALLOW_MODEL_REQUESTS": "0",
    }


async def _cli(workdir: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    """``hpd-agent ARGS`` in another process (bounded)."""
    with anyio.fail_after(60):
        return await anyio.run_process(
            [sys.executable, "-m", "hpd_agent.cli", *args], env=_env(workdir), check=False
        )


async def _until_lapsed(store: Store, run_id: str) -> None:
    await durable_agents.wait_lease_lapsed(store, run_id, timeout=10)


async def _parked(store: Store) -> tuple[str, Lease]:
    """Wait (bounded, on the store) until the child holds the lease, its question waits and
    the sibling tool's result is journaled (its side effect is then done and recorded)."""
    with anyio.fail_after(60):
        while True:
            lease = await store.get_lease(RUN)
            pending = await store.list_requests(run_id=RUN) if lease is not None else []
            journal = await store.journal(RUN) if pending else {}
            if any(e.kind == "tool" and k.endswith(":step") for k, e in journal.items()):
                assert lease is not None
                return pending[0].request_id, lease
            await anyio.sleep(0.02)


async def _child(location: str, ttl: float) -> anyio.abc.Process:
    return await anyio.open_process(
        [sys.executable, str(TESTS / "durable_agents.py"), location, RUN, str(ttl)],
        env=_env(Path(os.environ["HPD_TEST_DIR"])),
    )


async def test_a_second_resume_fails_at_once_naming_the_live_holder(
    location: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HPD_TEST_DIR", str(tmp_path))
    store = open_store(location)
    child = await _child(location, ttl=2.0)
    async with child:
        try:
            request_id, lease = await _parked(store)
            assert lease.holder.split(":")[1] == str(child.pid)

            # B in another process: the CLI refuses with its own status, naming A.
            agent = ("--agent", "durable_agents:build")
            done = await _cli(
                tmp_path,
                "resume",
                RUN,
                "--db",
                location,
                *agent,
                "--answer",
                f"{request_id}=Django",
                "--no-wait",
            )
            assert done.returncode == 13, done.stderr
            err = done.stderr.decode()
            assert f":{child.pid}:" in err and "lease" in err and "Traceback" not in err
            assert len(err.strip().splitlines()) == 1
            # By default the CLI waits for the lease to expire, saying so; a live holder
            # renews it, so it is still refused (never taken over).
            waited = await _cli(tmp_path, "resume", RUN, "--db", location, *agent)
            assert waited.returncode == 13, waited.stderr
            lines = waited.stderr.decode().strip().splitlines()
            assert "waiting up to" in lines[0] and "--no-wait" in lines[0], lines
            assert "Traceback" not in waited.stderr.decode()

            # B in this process, while A still renews: refused at once, both ways.
            with anyio.fail_after(5), pytest.raises(RunLeasedError) as refused:
                await durable_agents.build().resume(RUN, store=store)
            assert refused.value.holder.split(":")[1] == str(child.pid)
            assert refused.value.expires_at > time.time()
            events: list[Event] = []
            with pytest.raises(RunLeasedError):  # the stream keeps its shape, then raises
                async with durable_agents.build().resume_stream(RUN, store=store) as run:
                    events.extend([e async for e in run])
            assert isinstance(events[0], RunStarted)
            assert isinstance(events[-1], RunFinished) and events[-1].status == "failed"
            assert isinstance(run.result.error, RunLeasedError)

            # Nothing the refused resumes carried was written: the question still waits.
            question = await store.get_request(request_id)
            assert question is not None and question.status == "pending"

            # Answering is not driving: A picks the answer up and finishes the run itself.
            answered = await _cli(tmp_path, "answer", request_id, "FastAPI", "--db", location)
            assert answered.returncode == 0, answered.stderr
            with anyio.fail_after(60):
                await child.wait()
        finally:
            if child.returncode is None:
                child.kill()
                await child.wait()
    assert child.returncode == 0
    record = await store.get_run(RUN)
    assert record is not None and record.status == "completed"
    assert record.output == "Orchestrator: built with FastAPI"
    assert await store.get_lease(RUN) is None  # released at the end
    assert durable_agents.read_lines("side_effects.txt") == ["scaffolded"]
    await store.aclose()


async def _killed_child(location: str) -> tuple[str, Lease, int]:
    """A child driving the run, SIGKILLed once parked: (request id, its lease, its pid)."""
    store = open_store(location)
    child = await _child(location, ttl=30.0)
    async with child:
        try:
            request_id, _ = await _parked(store)
        finally:
            child.send_signal(signal.SIGKILL)
            await child.wait()
    assert child.returncode == -signal.SIGKILL
    dead = await store.get_lease(RUN)
    await store.aclose()
    assert dead is not None and dead.holder.split(":")[1] == str(child.pid)
    assert dead.expires_at > time.time() + 10  # live for long: nobody waits it out
    return request_id, dead, child.pid


def _once_each() -> None:
    """Each side effect once, each model turn called once across both processes."""
    assert durable_agents.read_lines("side_effects.txt") == ["scaffolded"]
    assert durable_agents.read_lines("calls.txt") == durable_agents.EVERY_TURN


async def test_the_lease_of_a_killed_holder_is_taken_over_at_once(
    location: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HPD_TEST_DIR", str(tmp_path))
    request_id, dead, _ = await _killed_child(location)
    store = open_store(location)
    with anyio.fail_after(10):  # not the 30 s the dead holder's lease still has
        result = await durable_agents.build().resume(
            RUN, store=store, answers={request_id: "FastAPI"}
        )
    assert result.output == "Orchestrator: built with FastAPI"
    _once_each()
    record = await store.get_run(RUN)
    assert record is not None and record.status == "completed"
    assert await store.get_lease(RUN) is None
    await store.aclose()
    assert dead.fence > 0


async def test_the_cli_takes_a_killed_holders_run_over_at_once(
    location: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HPD_TEST_DIR", str(tmp_path))
    request_id, _, _ = await _killed_child(location)
    agent = ("--agent", "durable_agents:build")
    answer = ("--answer", f"{request_id}=FastAPI")
    done = await _cli(tmp_path, "resume", RUN, "--db", location, *agent, *answer, "--no-wait")
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().strip() == "Orchestrator: built with FastAPI"
    assert "waiting" not in done.stderr.decode()
    _once_each()


async def test_a_holder_elsewhere_is_waited_out(
    location: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lease of a holder on another machine (or an id without a place) is never judged
    gone: ``resume`` refuses at once without ``wait``, and waits it out with it."""
    monkeypatch.setenv("HPD_TEST_DIR", str(tmp_path))
    request_id, _, pid = await _killed_child(location)
    store = open_store(location, lease_ttl=1.0)
    # The dead holder's lease, re-taken under another machine's id for 1.5 s.
    elsewhere = f"elsewhere:{pid}:0a0b0c0d:0123456789ab:1"
    await _until_lapsed_or_taken(store, elsewhere)
    with pytest.raises(RunLeasedError):
        await durable_agents.build().resume(RUN, store=store, answers={request_id: "x"})
    with anyio.fail_after(20):
        result = await durable_agents.build().resume(
            RUN, store=store, answers={request_id: "FastAPI"}, wait=True
        )
    assert result.output == "Orchestrator: built with FastAPI"
    _once_each()
    await store.aclose()


async def _until_lapsed_or_taken(store: Store, holder: str) -> None:
    """Replace the run's lease with ``holder``'s, live for 1.5 s (as if taken elsewhere)."""
    lease = await store.get_lease(RUN)
    assert lease is not None
    if isinstance(store, SQLiteStore):
        conn = sqlite3.connect(store.path)
        with conn:
            conn.execute(
                "UPDATE hpd_leases SET holder = ?, expires_at = ? WHERE run_id = ?",
                (holder, time.time() + 1.5, RUN),
            )
        conn.close()
    else:
        import psycopg

        with psycopg.connect(cast_dsn(store)) as conn:
            conn.execute(
                "UPDATE hpd_leases SET holder = %s, expires_at = %s WHERE run_id = %s",
                (holder, time.time() + 1.5, RUN),
            )


def cast_dsn(store: Store) -> str:
    return str(store.dsn)


# -- the lease operations (every store's: hpd_agent.testing.store_contract) ---------------


async def test_racing_takers_one_wins(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    stores = [SQLiteStore(path) for _ in range(4)]  # four connections, as four processes
    won: list[str] = []
    refused: list[str] = []

    async def take(store: Store, holder: str) -> None:
        try:
            won.append((await store.take_lease("r", holder, 60)).holder)
        except RunLeasedError as e:
            refused.append(e.holder)

    async with anyio.create_task_group() as tg:
        for i, s in enumerate(stores):
            for j in range(3):
                tg.start_soon(take, s, f"h:{i}:{j}")
    assert len(won) == 1 and refused == won * 11
    for s in stores:
        await s.aclose()


async def test_an_old_store_gains_the_lease_table(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    SQLiteStore(path)
    with sqlite3.connect(path) as conn:  # as a store file made before leases existed
        conn.execute("DROP TABLE hpd_leases")
    store = SQLiteStore(path, create=False)
    assert (await store.take_lease("r", "h:1:a", 60)).holder == "h:1:a"
    await store.aclose()


def test_lease_ttl_must_be_positive(tmp_path: Path) -> None:
    for bad in (0, -1.0, float("nan"), float("inf")):
        with pytest.raises(UserError, match="lease_ttl"):
            SQLiteStore(tmp_path / "x.db", lease_ttl=bad)
        with pytest.raises(UserError, match="lease_ttl"):
            MemoryStore(lease_ttl=bad)


# -- helpers for the renewer's tests (test_lease_renewer) -------------------------------


async def changed(store: Store, run_id: str, was: Lease | None) -> Lease | None:
    """The run's lease once it differs from ``was`` (bounded)."""
    with anyio.fail_after(10):
        for _ in iter(int, 1):  # until it changes (the deadline bounds it)
            now = await store.get_lease(run_id)
            if now != was:
                return now
            await anyio.sleep(0.02)
    raise AssertionError("unreachable")


def asking() -> Agent:
    model = ScriptedModel([tool_call("ask_user", question="Go?"), text("went")])
    return Agent("Asker", model=model, tools=[ask_user()])


async def stolen_while_asking(run_with: Store, store: Store, run_id: str) -> RunLeasedError:
    """Run ``asking()`` with ``run_with``; when it asks, another holder takes its lease in
    ``store`` (as another process would after a stall past expiry). The run's error."""
    with anyio.fail_after(20), pytest.raises(RunLeasedError) as lost:
        async with asking().stream("go", store=run_with, run_id=run_id) as run:
            async for event in run:
                if isinstance(event, ClarificationRequest):
                    mine = await store.get_lease(run_id)
                    assert mine is not None
                    await store.release_lease(run_id, mine.holder)
                    await store.take_lease(run_id, "thief:9:z", 60)
    return lost.value
