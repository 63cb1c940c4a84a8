"""``PathPolicy`` (who may answer which request, by agent path and tool) and ``load_policy``
(a policy named ``MODULE:ATTR`` on the command line)."""

from __future__ import annotations

import policies  # tests/governance/policies.py
import pytest

from hpd_agent.backend import check_policy
from hpd_agent.events import ClarificationRequest, PermissionRequest
from hpd_agent.exceptions import AnswerRefusedError, UserError
from hpd_agent.governance import PathPolicy, load_policy
from hpd_agent.store import RequestRecord


def _question(*path: str) -> RequestRecord:
    event = ClarificationRequest(
        run_id="r", agent_path=path, depth=len(path) - 1, request_id="q1", question="Which?"
    )
    return RequestRecord.from_event(event)


def _permission(tool_name: str, *path: str) -> RequestRecord:
    event = PermissionRequest(
        run_id="r",
        agent_path=path,
        depth=len(path) - 1,
        request_id="p1",
        tool_name=tool_name,
        arguments={"env": "prod"},
        tool_call_id="c1",
    )
    return RequestRecord.from_event(event)


def test_an_identity_answers_the_paths_its_globs_match() -> None:
    team = policies.TEAM
    assert team.allows("alice", _question("Orchestrator", "Researcher")) is True
    assert team.allows("bob", _question("Orchestrator", "WriterB")) is True
    assert team.allows("bob", _question("Ops")) is True
    refused = team.allows("bob", _question("Orchestrator", "Researcher"))
    assert isinstance(refused, str) and "Orchestrator > Writer*" in refused
    # Globs are matched case-sensitively on the whole path as people read it.
    assert isinstance(team.allows("bob", _question("orchestrator", "writer")), str)
    assert (
        isinstance(team.allows("bob", _question("Orchestrator", "Writer", "Deeper")), str) is False
    )


def test_an_identity_the_rules_do_not_name_answers_nothing() -> None:
    refused = policies.TEAM.allows("mallory", _question("Ops"))
    assert refused == "the policy does not name 'mallory'"


def test_a_listed_tool_needs_both_the_path_rule_and_the_tool_rule() -> None:
    team = policies.TEAM
    assert team.allows("alice", _permission("deploy", "Ops")) is True
    assert team.allows("bob", _permission("deploy", "Ops")) == "only alice may decide 'deploy'"
    assert team.allows("bob", _permission("restart", "Ops")) is True  # not listed: paths only
    assert isinstance(team.allows("bob", _permission("restart", "Orchestrator")), str)


def test_check_policy_says_why_and_needs_an_identity() -> None:
    with pytest.raises(AnswerRefusedError, match=r"'bob' may not answer request p1 \(Ops\)"):
        check_policy(policies.TEAM, "bob", _permission("deploy", "Ops"))
    with pytest.raises(AnswerRefusedError, match="needs an identity"):
        check_policy(policies.TEAM, None, _question("Ops"))
    check_policy(None, None, _question("Ops"))  # no policy: everyone may answer
    check_policy(policies.TEAM, "alice", _question("Ops"))

    class Falsy:
        def allows(self, identity: str, request: RequestRecord) -> bool | str:
            return ""

    with pytest.raises(AnswerRefusedError, match="the policy does not allow it"):
        check_policy(Falsy(), "alice", _question("Ops"))


@pytest.mark.parametrize("rules", [{"alice": "*"}, {"alice": [""]}, {"alice": [3]}])
def test_rules_that_are_not_lists_of_globs_are_refused(rules: dict[str, object]) -> None:
    with pytest.raises(UserError, match=r"rules\['alice'\]"):
        PathPolicy(rules)  # type: ignore[arg-type]
    with pytest.raises(UserError, match=r"permissions\['deploy'\]"):
        PathPolicy({"alice": ["*"]}, permissions={"deploy": rules["alice"]})  # type: ignore[dict-item]


def test_load_policy_takes_an_object_a_class_or_a_factory() -> None:
    assert load_policy("policies:TEAM") is policies.TEAM
    assert load_policy("policies:team") is policies.TEAM
    built = load_policy("policies:OnlyAlice")
    assert built.allows("bob", _question("Ops")) == "only alice answers here"


@pytest.mark.parametrize(
    ("ref", "said"),
    [
        ("policies", "expected MODULE:ATTR"),
        ("nowhere_at_all:X", "cannot load it: ModuleNotFoundError"),
        ("policies:NOPE", "cannot load it: AttributeError"),
        ("policies:NOT_A_POLICY", "is a int, not a policy"),
        ("policies:broken", "calling it failed: RuntimeError: no policy today"),
    ],
)
def test_load_policy_refuses_what_is_no_policy_in_one_line(ref: str, said: str) -> None:
    with pytest.raises(UserError) as refused:
        load_policy(ref)
    assert said in str(refused.value) and "\n" not in str(refused.value)
