"""``hooks.add_hook_factory``: how an integration (tracing) takes part in every root run
without being called and without the core importing it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from hpd_agent import Agent
from hpd_agent import hooks as hooks_module
from hpd_agent.hooks import (
    AgentInvocation,
    AgentOutcome,
    CallNext,
    Hook,
    add_hook_factory,
    install,
    process_hooks,
    uninstall,
)
from hpd_agent.testing import ScriptedModel, text


class Names(Hook):
    """Records the agent runs it wraps."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def wrap_agent(
        self, invocation: AgentInvocation, call_next: CallNext[AgentInvocation, AgentOutcome]
    ) -> AgentOutcome:
        self.seen.append(invocation.agent_name)
        return await call_next(invocation)


@pytest.fixture
def no_factories(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The test's factories only (the process's own, tracing's, come back after it)."""
    monkeypatch.setattr(hooks_module, "_factories", [])
    yield


def _agent() -> Agent:
    return Agent("A", model=ScriptedModel([text("ok")]))


async def test_a_factory_is_asked_at_every_root_run_start(no_factories: None) -> None:
    hook, asked = Names(), []
    wanted = [False]

    def factory() -> Hook | None:
        asked.append(1)
        return hook if wanted[0] else None

    add_hook_factory(factory)
    add_hook_factory(factory)  # twice: no effect
    await _agent().run("go")
    assert len(asked) == 1 and hook.seen == []
    wanted[0] = True
    await _agent().run("go")
    assert len(asked) == 2 and hook.seen == ["A"]


def test_factory_hooks_come_after_the_installed_ones(no_factories: None) -> None:
    installed_hook, made = Names(), Names()
    add_hook_factory(lambda: made)
    install(installed_hook)
    try:
        assert process_hooks() == [installed_hook, made]
    finally:
        uninstall(installed_hook)
    assert process_hooks() == [made]


async def test_a_failing_factory_is_logged_and_the_run_goes_on(
    no_factories: None, caplog: pytest.LogCaptureFixture
) -> None:
    def broken() -> Hook | None:
        raise RuntimeError("probe bug")

    add_hook_factory(broken)
    assert (await _agent().run("go")).output == "ok"
    (record,) = [r for r in caplog.records if r.name == "hpd_agent.hooks"]
    assert record.exc_info is not None and isinstance(record.exc_info[1], RuntimeError)
