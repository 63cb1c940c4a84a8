"""The store contract (``store_contract``): remembered grants, for a store that keeps them."""

from __future__ import annotations

import pytest

from ..agent import Agent
from ..events import PermissionRequest
from ..exceptions import UnknownGrantError
from ..permissions import Grant, GrantBook
from ..store import Store
from ..tools import tool
from ._human import ScriptedHuman
from ._models import ScriptedModel, text, tool_call

__all__ = [
    "test_store_a_grant_approves_a_later_run_without_asking",
    "test_store_grants_are_kept_once_found_by_what_they_cover_and_revoked",
]


def _book(store: Store) -> GrantBook:
    offered = store.capabilities().grants
    if offered is None:
        pytest.skip("the store keeps no grants (StoreCapabilities.grants)")
    return offered


def _grant(grant_id: str, created_at: float, **fields: object) -> Grant:
    given: dict[str, object] = {"tool_name": "deploy", "agent_path": ("Ops", "Deployer")}
    return Grant(grant_id=grant_id, created_at=created_at, **{**given, **fields})  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_store_grants_are_kept_once_found_by_what_they_cover_and_revoked(
    contract_store: Store,
) -> None:
    book = _book(contract_store)
    path = ("Ops", "Deployer")
    staging = _grant(
        "g-staging", 10.0, match={"env": "staging-*"}, granted_by="alice", channel="web"
    )
    anything = _grant("g-any", 20.0, until=100.0, request_id="req_1")
    assert await book.add_grant(staging) == staging
    assert await book.add_grant(anything) == anything
    # The same id again (a replayed run) keeps the grant as first kept.
    assert await book.add_grant(_grant("g-staging", 30.0, tool_name="other")) == staging
    assert await book.find_grant("deploy", {"env": "staging-eu"}, path, now=50.0) == staging
    assert await book.find_grant("deploy", {"env": "prod"}, path, now=50.0) == anything
    assert await book.find_grant("deploy", {"env": "prod"}, path, now=100.0) is None  # expired
    assert await book.find_grant("deploy", {"env": "staging-eu"}, ("Deployer",), now=50.0) is None
    assert await book.find_grant("destroy", {"env": "staging-eu"}, path, now=50.0) is None
    assert [g.grant_id for g in await book.list_grants(ended=True)] == ["g-staging", "g-any"]
    revoked = await book.revoke_grant("g-staging", by="bob")
    assert (revoked.grant_id, revoked.revoked_by) == ("g-staging", "bob")
    assert revoked.revoked_at is not None
    assert await book.revoke_grant("g-staging", by="carol") == revoked  # once
    assert await book.find_grant("deploy", {"env": "staging-eu"}, path, now=50.0) == anything
    assert "g-staging" not in [g.grant_id for g in await book.list_grants()]
    assert [g.grant_id for g in await book.list_grants(ended=True)] == ["g-staging", "g-any"]
    with pytest.raises(UnknownGrantError):
        await book.revoke_grant("g-nope")


@pytest.mark.anyio
async def test_store_a_grant_approves_a_later_run_without_asking(contract_store: Store) -> None:
    book = _book(contract_store)
    deployed: list[str] = []

    @tool(requires_approval=True)
    def deploy(env: str) -> str:
        """Deploy."""
        deployed.append(env)
        return "deployed"

    def deployer(env: str) -> Agent:
        model = ScriptedModel([tool_call("deploy", env=env), text("done")])
        return Agent("Deployer", model=model, tools=[deploy])

    human = ScriptedHuman(by="ci").approve("deploy", scope="always", match={"env": "staging*"})
    await deployer("staging-1").run("go", store=contract_store, handler=human)
    [grant] = await book.list_grants()
    assert (grant.granted_by, grant.channel) == ("ci", "api")  # the always answer's author
    nobody = ScriptedHuman()
    result = await deployer("staging-2").run(
        "go", store=contract_store, handler=nobody, run_id="run_covered"
    )
    assert result.status == "completed" and nobody.asked == []
    assert deployed == ["staging-1", "staging-2"]
    [record] = await contract_store.list_requests(run_id="run_covered", status=None)
    event = record.event
    assert isinstance(event, PermissionRequest) and event.grant_id == grant.grant_id
    assert record.status == "answered"
    # The audit trail: answered by the grant, on channel "grant".
    assert (record.answered_by, record.channel) == (f"grant:{grant.grant_id}", "grant")
