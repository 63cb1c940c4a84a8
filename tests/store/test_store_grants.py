"""Remembered grants in a store (SQLite, PostgreSQL): an "always" approval given in one run
approves the next matching call in another run of another process, without asking, and
the store's audit trail still shows that request; ``hpd-agent grants revoke`` (or an
expiry) makes it ask again; a resumed run replays its grant's approval; the grants table is
made in a store an older version made."""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

import grant_agents
import pytest
from _pg import fresh_postgres, postgres_dsn  # noqa: F401  (fixtures)

from hpd_agent import Agent, PermissionRequest, PermissionResolved, ToolContext, tool
from hpd_agent.models import ModelRequestParams
from hpd_agent.permissions import Grant, GrantBook
from hpd_agent.store import Store, open_store
from hpd_agent.testing import FunctionModel, ScriptedHuman, text, tool_call

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
TESTS = Path(__file__).resolve().parents[1]


@pytest.fixture(params=["sqlite", "postgres"])
def location(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> str:
    monkeypatch.setenv("HPD_TEST_DIR", str(tmp_path))
    if request.param == "sqlite":
        return str(tmp_path / "runs.db")
    return str(request.getfixturevalue("fresh_postgres"))


def _env() -> dict[str, str]:
    # tests/governance: the policies --policy names.
    paths = [str(ROOT), str(TESTS), str(TESTS / "governance")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


async def _process(*args: str) -> tuple[int, str, str]:
    import anyio

    done = await anyio.run_process([sys.executable, *args], env=_env(), check=False)
    return done.returncode, done.stdout.decode(), done.stderr.decode()


async def _run_elsewhere(location: str, run_id: str, env: str) -> dict[str, Any]:
    """The Deployer run in another process with nobody to answer: what the store kept."""
    code, out, err = await _process(str(TESTS / "grant_agents.py"), location, run_id, env)
    assert code == 0, err
    return json.loads(out)


async def _cli(*args: str) -> tuple[int, str, str]:
    return await _process("-m", "hpd_agent.cli", *args)


def _book(store: Store) -> GrantBook:
    book = store.capabilities().grants
    assert book is not None
    return book


async def test_a_grant_approves_the_next_matching_call_in_another_process_until_revoked(
    location: str,
) -> None:
    store = open_store(location)
    human = ScriptedHuman().approve("deploy", scope="always", match={"env": "staging-*"})
    result = await grant_agents.build("staging-1").run("deploy", store=store, handler=human)
    assert result.status == "completed" and len(human.asked) == 1
    [grant] = await _book(store).list_grants()
    assert (grant.tool_name, grant.agent_path, grant.match) == (
        "deploy",
        ("Deployer",),
        {"env": "staging-*"},
    )
    await store.aclose()

    # Another process, another run: approved by the grant, nobody asked; the store keeps
    # the request, answered, and which grant approved it.
    elsewhere = await _run_elsewhere(location, "run_covered", "staging-2")
    assert elsewhere["status"] == "completed"
    [request] = elsewhere["requests"]
    assert request["grant_id"] == grant.grant_id and request["status"] == "answered"
    assert request["answer"] == {"scope": "once", "kind": "approve"}
    assert grant_agents.deploys() == ["staging-1", "staging-2"]

    # An argument the grant's match does not cover asks (nobody there: the run stops).
    elsewhere = await _run_elsewhere(location, "run_prod", "prod")
    assert elsewhere["status"] == "interrupted"
    assert [(r["grant_id"], r["status"]) for r in elsewhere["requests"]] == [(None, "pending")]

    # The command line lists it and revokes it; then the same call asks again.
    code, out, err = await _cli("grants", "list", "--store", location, "--json")
    assert code == 0, err
    assert [g["grant_id"] for g in json.loads(out)] == [grant.grant_id]
    code, out, err = await _cli("grants", "revoke", grant.grant_id, "--store", location)
    assert code == 0 and f"revoked grant {grant.grant_id}" in out, err
    elsewhere = await _run_elsewhere(location, "run_after_revoke", "staging-3")
    assert elsewhere["status"] == "interrupted"
    assert grant_agents.deploys() == ["staging-1", "staging-2"]


async def test_an_expired_grant_asks_again_and_a_ttl_sets_its_end(location: str) -> None:
    store = open_store(location)
    human = ScriptedHuman().approve("deploy", scope="always", ttl=3600)
    await grant_agents.build("staging").run("deploy", store=store, handler=human)
    [given] = await _book(store).list_grants()
    assert given.until == pytest.approx(given.created_at + 3600)
    await _book(store).revoke_grant(given.grant_id)
    lapsed = Grant(
        grant_id="lapsed",
        tool_name="deploy",
        agent_path=("Deployer",),
        created_at=time.time() - 120,
        until=time.time() - 60,
    )
    await _book(store).add_grant(lapsed)
    await store.aclose()
    elsewhere = await _run_elsewhere(location, "run_lapsed", "staging")
    assert elsewhere["status"] == "interrupted"
    assert [r["grant_id"] for r in elsewhere["requests"]] == [None]


async def test_a_resumed_run_replays_the_approval_its_grant_gave(location: str) -> None:
    ran: list[str] = []

    @tool
    async def release(ctx: ToolContext, version: str) -> str:
        """Release a version, once approved, to a region the human picks."""
        refused = await ctx.ask_permission("publish", {"version": version})
        if refused is not None:
            return refused
        region = await ctx.ask("Which region?")
        ran.append(f"{version}@{region}")
        return f"released {version} in {region}"

    def turn(messages: Any, info: ModelRequestParams) -> Any:
        # By turn: a resumed run replays turn 0 from its journal and calls turn 1.
        return tool_call("release", version="1.2") if info.turn == 0 else text("released")

    def releaser() -> Agent:
        return Agent("Releaser", model=FunctionModel(turn), tools=[release])

    store = open_store(location)
    given = Grant(grant_id="g-publish", tool_name="publish", agent_path=("Releaser",), created_at=1)
    await _book(store).add_grant(given)
    first = await releaser().run("go", store=store, on_unhandled="interrupt", run_id="run_rel")
    assert first.status == "interrupted"
    [question] = first.pending
    # The grant is revoked meanwhile: the approval it gave in the run's first life stands.
    await _book(store).revoke_grant("g-publish")
    events: list[Any] = []
    async with releaser().resume_stream(
        "run_rel", store=store, answers={question.request_id: "eu"}
    ) as run:
        async for event in run:
            events.append(event)
    assert run.result.output == "released" and ran == ["1.2@eu"]
    [asked] = [e for e in events if isinstance(e, PermissionRequest)]
    [resolved] = [e for e in events if isinstance(e, PermissionResolved)]
    assert asked.replayed and resolved.replayed and resolved.approved
    records = await store.list_requests(run_id="run_rel", status=None)
    assert [(r.kind, r.status) for r in records] == [
        ("permission", "answered"),
        ("text", "answered"),
    ]
    kept = records[0].event
    assert isinstance(kept, PermissionRequest) and kept.grant_id == "g-publish"
    await store.aclose()


async def test_the_grants_table_is_made_in_a_store_an_older_version_made(location: str) -> None:
    store = open_store(location)
    threads = store.capabilities().threads
    assert threads is not None
    await threads.write_thread("web", "t1", rows={"k": "v"})  # the side tables exist
    await store.aclose()
    _drop_grants(location)  # as a store made before grants existed

    store = open_store(location)
    human = ScriptedHuman().approve("deploy", scope="always")
    await grant_agents.build("staging").run("deploy", store=store, handler=human)
    assert [g.tool_name for g in await _book(store).list_grants()] == ["deploy"]
    threads = store.capabilities().threads
    assert threads is not None and await threads.read_thread("web", "t1") is not None
    await store.aclose()


def _drop_grants(location: str) -> None:
    if "://" not in location:
        with sqlite3.connect(location) as conn:
            conn.execute("DROP TABLE hpd_grants")
        return
    import psycopg

    with psycopg.connect(location, autocommit=True) as conn:
        conn.execute("DROP TABLE hpd_grants")


async def test_an_always_answer_given_through_the_store_is_remembered(location: str) -> None:
    """Answered from another process (``hpd-agent answer ... always``): the waiting run
    reads the answer and keeps the grant; the next run is not asked."""
    import anyio

    store = open_store(location)
    outcome: list[str] = []

    async def run_it() -> None:
        result = await grant_agents.build("staging").run("deploy", store=store, run_id="run_w")
        outcome.append(result.status)

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run_it)
            while not (pending := await store.list_requests(run_id="run_w")):
                await anyio.wait_all_tasks_blocked()
            code, _, err = await _cli("answer", pending[0].request_id, "always", "--db", location)
            assert code == 0, err
    assert outcome == ["completed"]
    [grant] = await _book(store).list_grants()
    assert grant.request_id == pending[0].request_id
    await store.aclose()
    elsewhere = await _run_elsewhere(location, "run_next", "prod")
    assert elsewhere["status"] == "completed"
    assert [r["grant_id"] for r in elsewhere["requests"]] == [grant.grant_id]


async def test_history_shows_the_person_who_said_always_and_the_grant_that_approved(
    location: str,
) -> None:
    """The audit trail of a grant: bob's "always" refused by the policy (no grant), alice's
    kept with the grant (who, which channel); the call it approves in another process is
    answered by ``grant:<id>`` on channel ``grant``; revoking names who revoked."""
    asking = await _run_elsewhere(location, "run_asks", "staging-1")
    assert asking["status"] == "interrupted"
    [asked] = asking["requests"]
    rid, policy = asked["request_id"], ("--policy", "policies:TEAM")
    code, _, err = await _cli("answer", rid, "always", "--db", location, "--as", "bob", *policy)
    assert code == 2 and "'bob' may not answer request" in err, err
    code, out, err = await _cli("grants", "list", "--store", location, "--all", "--json")
    assert (code, json.loads(out)) == (0, []), err
    code, _, err = await _cli("answer", rid, "always", "--db", location, "--as", "alice", *policy)
    assert code == 0, err

    # The run, resumed, reads alice's answer and keeps her grant.
    store = open_store(location)
    resumed = await grant_agents.build("staging-1").resume("run_asks", store=store)
    assert resumed.status == "completed"
    [grant] = await _book(store).list_grants()
    assert (grant.granted_by, grant.channel, grant.request_id) == ("alice", "cli", rid)
    await store.aclose()
    code, out, err = await _cli("grants", "list", "--store", location)
    assert code == 0, err
    assert out.splitlines()[0].split()[4:6] == ["BY", "VIA"]
    assert out.splitlines()[1].split()[4:6] == ["alice", "cli"]

    # Another process's run: approved by the grant, and recorded so.
    covered = await _run_elsewhere(location, "run_covered", "staging-2")
    assert covered["status"] == "completed"
    [approved] = covered["requests"]
    assert approved["grant_id"] == grant.grant_id
    author = f"grant:{grant.grant_id}"
    assert (approved["context"]["answered_by"], approved["context"]["channel"]) == (
        author,
        "grant",
    )
    code, out, err = await _cli("history", "run_covered", "--store", location, "--json")
    assert code == 0, err
    [item] = json.loads(out)
    assert (item["status"], item["answered_by"], item["channel"]) == ("answered", author, "grant")
    code, out, err = await _cli("history", "run_covered", "--store", location)
    assert f"by {author} via grant at " in out, err
    code, out, err = await _cli("history", "run_asks", "--store", location)
    assert " by alice via cli at " in out, err

    code, _, err = await _cli("grants", "revoke", grant.grant_id, "--db", location, "--as", "carol")
    assert code == 0, err
    code, out, err = await _cli("grants", "list", "--store", location, "--all")
    assert out.splitlines()[1].endswith("revoked by carol"), out
    code, out, err = await _cli("grants", "list", "--store", location, "--all", "--json")
    [ended] = json.loads(out)
    assert (ended["granted_by"], ended["channel"], ended["revoked_by"]) == ("alice", "cli", "carol")
