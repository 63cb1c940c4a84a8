"""The cyclic GC tuned while a store drives many runs (``hpd_agent.store._crowd``).

A store object driving ``CROWD`` runs or more raises the collector's first threshold to
``GEN0`` and sets the host's thresholds back once it drives ``CALM`` or fewer; the opt-outs
(``gc_tuning=False``, ``HPD_AGENT_GC_TUNING=0``) leave them untouched; a host that set its
own thresholds meanwhile keeps them; and the SQLite file store groups its writes only with
the collector tuned.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

from hpd_agent import Agent, tool
from hpd_agent.messages import Message
from hpd_agent.models import ModelRequestParams
from hpd_agent.store import SQLiteStore, Store
from hpd_agent.store._crowd import CALM, CROWD, GEN0, Driving
from hpd_agent.testing import FunctionModel, text, tool_call

pytestmark = pytest.mark.anyio

HOST = (900, 7, 9)
"""The host process's own thresholds in these tests (none of CPython's defaults)."""


@pytest.fixture(autouse=True)
def host_thresholds() -> Iterator[None]:
    before = gc.get_threshold()
    gc.set_threshold(*HOST)
    try:
        yield
    finally:
        gc.set_threshold(*before)


async def _crowded_runs(store: Store, runs: int, prefix: str = "r") -> tuple[int, int, int]:
    """``runs`` agent runs on ``store`` held inside a tool until all are there; the
    collector's thresholds at that moment. The runs then finish."""
    gate = anyio.Event()
    arrived = anyio.Event()
    there = 0

    @tool
    async def hold() -> str:
        """Wait for the others."""
        nonlocal there
        there += 1
        if there == runs:
            arrived.set()
        await gate.wait()
        return "ok"

    def turn(messages: Sequence[Message], info: ModelRequestParams) -> Any:
        return tool_call("hold", _id="h") if info.turn == 0 else text("done")

    agent = Agent("crowd", model=FunctionModel(turn), tools=[hold], max_turns=3)
    outputs: list[object] = []

    async def one(i: int) -> None:
        outputs.append((await agent.run("go", store=store, run_id=f"{prefix}{i}")).output)

    async with anyio.create_task_group() as tg:
        for i in range(runs):
            tg.start_soon(one, i)
        await arrived.wait()
        during = gc.get_threshold()
        gate.set()
    assert outputs == ["done"] * runs
    return during


async def test_a_crowded_store_raises_gen0_and_sets_the_hosts_thresholds_back(
    tmp_path: Path,
) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    try:
        assert await _crowded_runs(store, CROWD) == (GEN0, HOST[1], HOST[2])
        assert gc.get_threshold() == HOST  # every run ended: the host's own again
        assert await _crowded_runs(store, CROWD - 1, "s") == HOST  # fewer: never touched
        assert store.capabilities().groups is store  # grouped, the collector tuned
    finally:
        await store.aclose()
    assert gc.get_threshold() == HOST


@pytest.mark.parametrize("how", ["argument", "environment"])
async def test_the_opt_out_leaves_the_collector_alone(
    how: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """And a SQLite file then commits each write at once, as grouping pays only tuned."""
    if how == "environment":
        monkeypatch.setenv("HPD_AGENT_GC_TUNING", "0")
        store = SQLiteStore(tmp_path / "runs.db")
    else:
        store = SQLiteStore(tmp_path / "runs.db", gc_tuning=False)
    try:
        assert await _crowded_runs(store, CROWD + 4) == HOST
        assert store.capabilities().groups is None
        assert getattr(store, "_group", None) is None  # no batch was ever made
    finally:
        await store.aclose()
    assert gc.get_threshold() == HOST


def _crowd(driving: Driving, prefix: str, n: int) -> None:
    for i in range(n):
        driving.add(f"{prefix}{i}")


def _calm(driving: Driving, prefix: str, n: int) -> None:
    for i in range(n):
        driving.discard(f"{prefix}{i}")


def test_two_crowded_stores_set_the_thresholds_back_when_the_last_calms() -> None:
    a, b = Driving(), Driving()
    _crowd(a, "a", CROWD)
    _crowd(b, "b", CROWD)
    assert gc.get_threshold() == (GEN0, HOST[1], HOST[2])
    _calm(a, "a", CROWD)
    assert gc.get_threshold() == (GEN0, HOST[1], HOST[2])  # b is still crowded
    _calm(b, "b", CROWD - CALM - 1)
    assert gc.get_threshold() == (GEN0, HOST[1], HOST[2])  # above CALM: no flip-flop
    b.discard(f"b{CROWD - CALM - 1}")
    assert gc.get_threshold() == HOST


def test_thresholds_the_host_set_meanwhile_are_kept() -> None:
    driving = Driving()
    _crowd(driving, "r", CROWD)
    assert gc.get_threshold() == (GEN0, HOST[1], HOST[2])
    gc.set_threshold(5_000, 20, 20)  # the host's own decision, while the store is crowded
    _calm(driving, "r", CROWD)
    assert gc.get_threshold() == (5_000, 20, 20)


@pytest.mark.parametrize("host", [(0, 10, 10), (100_000, 10, 10), "disabled"])
def test_a_host_that_tuned_or_disabled_the_collector_is_left_alone(
    host: tuple[int, int, int] | str,
) -> None:
    if host == "disabled":
        gc.disable()
        expected = HOST
    else:
        assert isinstance(host, tuple)
        gc.set_threshold(*host)
        expected = host
    try:
        driving = Driving()
        _crowd(driving, "r", CROWD)
        assert gc.get_threshold() == expected
        driving.close()
        assert gc.get_threshold() == expected
    finally:
        gc.enable()


def test_a_store_closed_while_crowded_sets_the_thresholds_back() -> None:
    driving = Driving()
    _crowd(driving, "r", CROWD)
    driving.close()
    assert gc.get_threshold() == HOST
    driving.close()  # twice: nothing more
    assert gc.get_threshold() == HOST
