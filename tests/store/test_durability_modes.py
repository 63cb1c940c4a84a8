"""Durability modes (``Agent.run(..., durability=)``): what a crash keeps and what reruns.

A real child process (``modes_crash.py``) runs one durable run in a mode and dies at each
write that makes part of it durable, before and after it (every cut point). This process
then reads what the store kept, resumes the run and checks, per docs/guarantees.md
("Durability modes"):

- in every mode, a tool runs again on resume exactly when its result was not committed,
  and a question visible in the store has every fact before it committed;
- ``"sync"``: at most the one tool whose result was being written runs again;
- ``"exit"``: nothing of the run is committed but for its question or at its end;
- ``"async"``: what is committed is the run's facts in order (a lost one loses all after).
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest

from hpd_agent import Agent, UserError, tool
from hpd_agent.store import MemoryStore, Store, open_store
from hpd_agent.testing import FunctionModel, text, tool_call

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import modes_crash  # noqa: E402

# Cut points reached by the run in each mode (at least; PostgreSQL sends ahead in "sync").
LEAST_CUTS = {"sync": 8, "async": 3, "exit": 2}


def _env() -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(HERE.parent)]),
        "HPD_AGENT_ALLOW_MODEL_REQUESTS": "0",
    }


def _effects(workdir: Path) -> Counter[str]:
    path = workdir / "effects.txt"
    return Counter(path.read_text().split()) if path.exists() else Counter()


async def _committed(store: Store, run_id: str) -> list[str]:
    """The ``work`` keys whose results the store kept, in the order the run made them."""
    journal = await store.journal(run_id)
    done = {e.value["result"] for e in journal.values() if e.kind == "tool"}
    return [k for k in modes_crash.KEYS if f"did {k}" in done]


async def _crash_then_resume(location: str, mode: str, cut: int, point: str, root: Path) -> bool:
    """One crash at ``cut``'s ``point``, then the checks; False if the run reached no such
    cut (it finished)."""
    workdir = root / f"{mode}-{point}-{cut}"
    workdir.mkdir()
    where = str(workdir / "runs.db") if location.endswith(".db") else location
    if where.endswith(".db"):
        await open_store(where).aclose()
    child = await anyio.run_process(
        [sys.executable, str(HERE / "modes_crash.py"), where, mode, str(cut), point, str(workdir)],
        env=_env(),
        check=False,
    )
    if child.returncode == 0:
        return False
    assert child.returncode == modes_crash.CRASHED, child.stderr.decode()[-2000:]
    run_id = workdir.name
    ran = _effects(workdir)
    store = open_store(where)
    try:
        record = await store.get_run(run_id)
        assert record is not None  # its start is committed before any cut
        committed = await _committed(store, run_id)
        asked = await store.list_requests(run_id=run_id, status=None)
        what = f"{mode} {point} cut {cut}: ran {dict(ran)}, committed {committed}"
        if asked:  # a visible question: every fact before it is committed
            assert committed[:2] == ["a", "b"], what
        if mode == "sync":
            assert len([k for k in ran if k not in committed]) <= 1, what
        elif mode == "exit" and record.status == "running":
            # Committed only for the question (with it, or just before it) or at the end.
            assert committed in ([], ["a", "b"]), what
        assert committed == list(modes_crash.KEYS[: len(committed)]), what  # in order
        if record.status == "running":
            agent = modes_crash.build(str(workdir))
            result = await agent.resume(run_id, store=store, handler=modes_crash.human())
            assert result.output == "done: blue", what
        else:
            assert record.status == "completed", what
        after = _effects(workdir)
        for key in modes_crash.KEYS:  # a tool runs again exactly when its result was lost
            assert after[key] == ran[key] + (0 if key in committed else 1), (key, what)
    finally:
        await store.aclose()
    return True


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize("mode", ["sync", "async", "exit"])
async def test_a_crash_at_every_cut_point_keeps_what_the_mode_promises(
    location: str, mode: str, tmp_path: Path
) -> None:
    for point in ("before", "after"):
        cut = 1
        while await _crash_then_resume(location, mode, cut, point, tmp_path):
            cut += 1
        assert cut - 1 >= LEAST_CUTS[mode], (point, cut)


def _counting_agent(calls: list[str], looking: Any = None) -> Agent:
    @tool
    async def work(key: str) -> str:
        """Work."""
        if looking is not None:
            await looking()
        calls.append(key)
        return f"did {key}"

    def turn(messages: Any, info: Any) -> Any:
        if info.turn < 2:
            return tool_call("work", _id=f"w{info.turn}", key=modes_crash.KEYS[info.turn])
        return text("done")

    return Agent("worker", model=FunctionModel(turn), tools=[work])


@pytest.mark.parametrize("mode", ["async", "exit"])
async def test_a_run_in_each_mode_is_journaled_by_its_end(mode: str, tmp_path: Path) -> None:
    calls: list[str] = []
    store = open_store(str(tmp_path / "runs.db"))
    try:
        result = await _counting_agent(calls).run("go", store=store, run_id="r", durability=mode)  # type: ignore[arg-type]
        assert result.output == "done"
        assert await _committed(store, "r") == ["a", "b"]
        record = await store.get_run("r")
        assert record is not None and record.status == "completed"
    finally:
        await store.aclose()


async def test_exit_mode_commits_nothing_before_the_end(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "runs.db"))
    seen: list[list[str]] = []

    async def looking() -> None:  # what the store holds while the run goes on
        seen.append(await _committed(store, "r"))

    agent = _counting_agent([], looking)
    try:
        await agent.run("go", store=store, run_id="r", durability="exit")
        assert seen == [[], []]
        assert await _committed(store, "r") == ["a", "b"]
    finally:
        await store.aclose()


async def test_the_store_default_mode_and_a_bad_one() -> None:
    store = MemoryStore()
    calls: list[str] = []
    agent = _counting_agent(calls)
    with pytest.raises(UserError, match="'sync', 'async', 'exit'"):
        await agent.run("go", store=store, durability="later")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="pass store="):
        await agent.run("go", durability="exit")
    store.run_durability = "fast"
    with pytest.raises(UserError, match="durability='fast': expected one of 'sync', 'async'"):
        await agent.run("go", store=store, run_id="r1")
    assert calls == []
    store.run_durability = "exit"
    assert (await agent.run("go", store=store, run_id="r2")).output == "done"
    assert await _committed(store, "r2") == ["a", "b"]
