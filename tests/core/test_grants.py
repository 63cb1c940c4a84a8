"""Remembered grants (``Approve(scope="always")``) in memory: the decision, what a grant
covers, this process's book for runs with no store, expiry, revocation, parallel calls."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from hpd_agent import (
    Agent,
    Approve,
    Event,
    PermissionRequest,
    PermissionResolved,
    UnknownGrantError,
    tool,
)
from hpd_agent.backend import Author
from hpd_agent.permissions import PROCESS_GRANTS, Grant, MemoryGrants, grant_id_for, to_decision
from hpd_agent.store import MemoryStore, StoreCapabilities, jsonable
from hpd_agent.testing import ScriptedHuman, ScriptedModel, text, tool_call

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def no_process_grants() -> Iterator[None]:
    # The book lasts for the process: each test starts and ends with it empty.
    PROCESS_GRANTS.clear()
    yield
    PROCESS_GRANTS.clear()


def deployer(*envs: str, parallel: bool = False) -> tuple[Agent, list[str]]:
    """An agent whose model deploys to each env (one call per turn, or all at once)."""
    deployed: list[str] = []

    @tool(requires_approval=True)
    def deploy(env: str, replicas: int = 1) -> str:
        """Deploy."""
        deployed.append(env)
        return f"deployed {env}"

    calls = [tool_call("deploy", env=e) for e in envs]
    script: list[Any] = [calls] if parallel else list(calls)
    model = ScriptedModel([*script, text("done")])
    return Agent("Deployer", model=model, tools=[deploy]), deployed


async def run_with(agent: Agent, human: ScriptedHuman) -> list[Event]:
    events: list[Event] = []
    async with agent.stream("go") as run:
        async for event in run:
            events.append(event)
            if isinstance(event, PermissionRequest) and not event.grant_id:
                await run.respond(event.request_id, human.reply_for(event))
    return events


# -- the decision ---------------------------------------------------------------------------
def test_approve_always_takes_a_match_and_a_ttl_and_nothing_else_does() -> None:
    given = {"env": "staging*"}
    approve = Approve(scope="always", match=given, ttl=60)
    given["env"] = "*"  # a later change to the caller's dict does not widen the grant
    assert approve.match == {"env": "staging*"} and approve.ttl == 60.0
    for bad in (
        {"scope": "run", "ttl": 5},
        {"scope": "once", "match": {"env": "x"}},
        {"scope": "forever"},
        {"scope": "always", "ttl": 0},
        {"scope": "always", "ttl": -1},
        {"scope": "always", "ttl": float("inf")},
        {"scope": "always", "ttl": True},
        {"scope": "always", "match": {}},
        {"scope": "always", "match": {"env": 3}},
        {"scope": "always", "match": ["env"]},
    ):
        with pytest.raises(ValueError):
            Approve(**bad)


def test_always_is_read_from_a_word_and_from_json_and_kept_as_json() -> None:
    assert to_decision("always") == Approve(scope="always")
    assert to_decision("Remember") == Approve(scope="always")
    assert to_decision("run") == Approve(scope="run")  # "for the run" keeps its words
    data = {"kind": "approve", "scope": "always", "match": {"env": "s*"}, "ttl": 30}
    assert to_decision(data) == Approve(scope="always", match={"env": "s*"}, ttl=30)
    with pytest.raises(ValueError):
        to_decision({"kind": "approve", "scope": "run", "ttl": 30})
    # What a store keeps: the old form for once and run, match and ttl only when given.
    assert jsonable(Approve()) == {"scope": "once", "kind": "approve"}
    assert jsonable(Approve(scope="run")) == {"scope": "run", "kind": "approve"}
    assert jsonable(Approve(scope="always", match={"env": "s*"}, ttl=30)) == data
    assert to_decision(jsonable(Approve(scope="always", ttl=5))) == Approve(scope="always", ttl=5)


def test_a_grant_covers_its_tool_at_its_path_with_fitting_arguments_while_live() -> None:
    grant = Grant(
        grant_id="g1",
        tool_name="deploy",
        agent_path=("Root", "Deployer"),
        match={"env": "staging-*", "replicas": "[12]"},
        created_at=100.0,
        until=200.0,
    )
    path = ("Root", "Deployer")
    assert grant.covers("deploy", {"env": "staging-eu", "replicas": 2}, path, 150.0)
    assert not grant.covers("deploy", {"env": "prod", "replicas": 2}, path, 150.0)
    assert not grant.covers("deploy", {"env": "staging-eu", "replicas": 3}, path, 150.0)
    assert not grant.covers("deploy", {"env": "staging-eu"}, path, 150.0)  # missing argument
    assert not grant.covers("deploy", {"env": "Staging-eu", "replicas": 1}, path, 150.0)
    assert not grant.covers("destroy", {"env": "staging-eu", "replicas": 1}, path, 150.0)
    assert not grant.covers("deploy", {"env": "staging-eu", "replicas": 1}, ("Deployer",), 150.0)
    assert not grant.covers("deploy", {"env": "staging-eu", "replicas": 1}, path, 200.0)  # expired
    assert grant.author == Author("grant:g1", "grant")


async def test_a_memory_book_finds_the_oldest_live_covering_grant_and_revokes() -> None:
    book = MemoryGrants()
    path = ("A",)
    young = Grant(grant_id="b", tool_name="t", agent_path=path, created_at=2.0)
    old = Grant(grant_id="a", tool_name="t", agent_path=path, created_at=1.0, until=50.0)
    assert await book.add_grant(young) is young
    assert await book.add_grant(old) is old
    assert await book.add_grant(Grant(grant_id="a", tool_name="x", agent_path=path, created_at=9))
    assert await book.find_grant("t", {}, path, now=10.0) == old
    assert await book.find_grant("t", {}, path, now=50.0) == young  # the old one expired
    revoked = await book.revoke_grant("b", by="alice")
    assert revoked.revoked_by == "alice" and revoked.revoked_at is not None
    assert await book.revoke_grant("b", by="bob") == revoked  # again: nothing changes
    assert await book.find_grant("t", {}, path, now=50.0) is None
    assert [g.grant_id for g in await book.list_grants(ended=True)] == ["a", "b"]
    with pytest.raises(UnknownGrantError):
        await book.revoke_grant("nope")


# -- runs -----------------------------------------------------------------------------------
async def test_an_always_grant_approves_later_runs_in_the_process_until_revoked() -> None:
    agent, deployed = deployer("staging-1")
    first = ScriptedHuman().approve("deploy", scope="always", match={"env": "staging-*"})
    await run_with(agent, first)
    assert len(first.asked) == 1
    [grant] = await PROCESS_GRANTS.list_grants()
    asked = first.asked[0]
    assert grant.grant_id == grant_id_for(asked.request_id)
    assert (grant.tool_name, grant.agent_path, grant.match) == (
        "deploy",
        ("Deployer",),
        {"env": "staging-*"},
    )
    assert grant.until is None and grant.request_id == asked.request_id

    # Another run: approved by the grant, not asked; the request and its end still appear.
    agent, deployed = deployer("staging-2")
    nobody = ScriptedHuman()
    events = await run_with(agent, nobody)
    assert deployed == ["staging-2"] and nobody.asked == []
    [request] = [e for e in events if isinstance(e, PermissionRequest)]
    [resolved] = [e for e in events if isinstance(e, PermissionResolved)]
    assert request.grant_id == grant.grant_id
    assert (resolved.request_id, resolved.status) == (request.request_id, "answered")
    assert (resolved.approved, resolved.scope) == (True, "once")

    # An argument the match does not cover asks.
    agent, deployed = deployer("prod")
    human = ScriptedHuman().deny("deploy")
    await run_with(agent, human)
    assert deployed == [] and len(human.asked) == 1

    # Revoked: it asks again.
    await PROCESS_GRANTS.revoke_grant(grant.grant_id)
    agent, deployed = deployer("staging-3")
    human = ScriptedHuman().approve("deploy")
    await run_with(agent, human)
    assert deployed == ["staging-3"] and len(human.asked) == 1


async def test_a_grant_with_a_ttl_lasts_that_long_and_an_expired_one_asks_again() -> None:
    agent, _ = deployer("staging")
    await run_with(agent, ScriptedHuman().approve("deploy", scope="always", ttl=60))
    [grant] = await PROCESS_GRANTS.list_grants()
    assert grant.until == pytest.approx(grant.created_at + 60)
    covered = ("deploy", {"env": "anything"}, ("Deployer",))
    assert await PROCESS_GRANTS.find_grant(*covered, now=grant.until - 1) == grant
    assert await PROCESS_GRANTS.find_grant(*covered, now=grant.until) is None

    PROCESS_GRANTS.clear()
    lapsed = Grant(
        grant_id="lapsed",
        tool_name="deploy",
        agent_path=("Deployer",),
        created_at=time.time() - 120,
        until=time.time() - 60,
    )
    await PROCESS_GRANTS.add_grant(lapsed)
    agent, deployed = deployer("staging")
    human = ScriptedHuman().approve("deploy")
    await run_with(agent, human)
    assert deployed == ["staging"] and len(human.asked) == 1


async def test_an_always_answer_approves_the_parallel_calls_its_grant_covers() -> None:
    agent, deployed = deployer("staging-a", "staging-b", "prod", parallel=True)
    events: list[Event] = []
    async with agent.stream("go") as run:
        async for event in run:
            events.append(event)
            if isinstance(event, PermissionRequest) and len(run.pending) == 3:
                first = next(p for p in run.pending if p.arguments["env"] == "staging-a")  # type: ignore[union-attr]
                always = Approve(scope="always", match={"env": "staging-*"})
                await run.respond(first.request_id, always)
                [prod] = run.pending
                await run.respond(prod.request_id, False)
    assert sorted(deployed) == ["staging-a", "staging-b"]
    resolved = {e.request_id: e for e in events if isinstance(e, PermissionResolved)}
    assert sorted((str(e.scope), e.approved) for e in resolved.values()) == [
        ("None", False),
        ("always", True),
        ("once", True),
    ]


async def test_a_session_keeping_no_grants_approves_the_one_call_only() -> None:
    class NoGrants(MemoryStore):
        def capabilities(self) -> StoreCapabilities:
            offered = super().capabilities()
            return StoreCapabilities(write_now=offered.write_now, leases=offered.leases)

    store = NoGrants()
    agent, deployed = deployer("a", "b")
    human = ScriptedHuman().approve("deploy", scope="always")
    async with agent.stream("go", store=store) as run:
        async for event in run:
            if isinstance(event, PermissionRequest):
                await run.respond(event.request_id, human.reply_for(event))
    assert deployed == ["a", "b"] and len(human.asked) == 2  # asked again for "b"
    assert await PROCESS_GRANTS.list_grants() == []  # not this process's book either
    await store.aclose()


# -- the audit trail ------------------------------------------------------------------------
async def test_a_grant_names_who_gave_it_and_answers_as_grant_id_on_channel_grant() -> None:
    from hpd_agent.hooks import Hook

    told: list[tuple[str, str | None, str | None]] = []

    class Watch(Hook):
        def request_resolved(
            self, event: Any, status: Any, answer: Any, author: Any = None
        ) -> None:
            told.append((event.request_id, author.by, author.channel))

    # alice answers "always" through the web page: the grant records her and the channel.
    agent, _ = deployer("staging-1")
    async with agent.stream("go", hooks=[Watch()]) as run:
        async for event in run:
            if isinstance(event, PermissionRequest):
                always = Approve(scope="always")
                await run.respond(event.request_id, always, by="alice", channel="web")
    [grant] = await PROCESS_GRANTS.list_grants()
    assert (grant.granted_by, grant.channel) == ("alice", "web")

    # The next run's call is approved by the grant, and says so wherever an author is told.
    agent, deployed = deployer("staging-2")
    async with agent.stream("go", hooks=[Watch()]) as run:
        events = [event async for event in run]  # nobody answers: the grant does
    [request] = [e for e in events if isinstance(e, PermissionRequest)]
    [resolved] = [e for e in events if isinstance(e, PermissionResolved)]
    assert deployed == ["staging-2"] and request.grant_id == grant.grant_id
    assert (resolved.answered_by, resolved.channel) == (f"grant:{grant.grant_id}", "grant")
    assert told == [
        (grant.request_id, "alice", "web"),
        (request.request_id, f"grant:{grant.grant_id}", "grant"),
    ]


async def test_parallel_calls_an_always_answer_covers_are_answered_by_its_grant() -> None:
    agent, deployed = deployer("staging-a", "staging-b", parallel=True)
    events: list[Event] = []
    async with agent.stream("go") as run:
        async for event in run:
            events.append(event)
            if isinstance(event, PermissionRequest) and len(run.pending) == 2:
                first = next(p for p in run.pending if p.arguments["env"] == "staging-a")  # type: ignore[union-attr]
                always = Approve(scope="always", match={"env": "staging-*"})
                await run.respond(first.request_id, always, by="alice")
    assert sorted(deployed) == ["staging-a", "staging-b"]
    [grant] = await PROCESS_GRANTS.list_grants()
    authors = {
        e.request_id: (e.scope, e.answered_by, e.channel)
        for e in events
        if isinstance(e, PermissionResolved)
    }
    assert sorted(authors.values(), key=str) == [
        ("always", "alice", "api"),
        ("once", f"grant:{grant.grant_id}", "grant"),
    ]


async def test_a_policy_refusing_bob_refuses_his_always_and_no_grant_is_written() -> None:
    from hpd_agent.exceptions import AnswerRefusedError
    from hpd_agent.governance import PathPolicy

    policy = PathPolicy({"alice": ["*"], "bob": ["*"]}, permissions={"deploy": ["alice"]})
    agent, deployed = deployer("prod")
    refused: list[str] = []
    async with agent.stream("go") as run:
        async for event in run:
            if isinstance(event, PermissionRequest):
                always = Approve(scope="always")
                with pytest.raises(AnswerRefusedError) as caught:
                    await run.respond(event.request_id, always, by="bob", policy=policy)
                refused.append(str(caught.value))
                assert await PROCESS_GRANTS.list_grants(ended=True) == []  # nothing written
                assert [p.request_id for p in run.pending] == [event.request_id]
                await run.respond(event.request_id, always, by="alice", policy=policy)
    assert deployed == ["prod"] and "only alice may decide 'deploy'" in refused[0]
    assert "'bob' may not answer request" in refused[0]
    [grant] = await PROCESS_GRANTS.list_grants(ended=True)
    assert (grant.granted_by, grant.channel) == ("alice", "api")
