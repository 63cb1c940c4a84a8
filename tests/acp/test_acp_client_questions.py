"""What an ACP agent asks during an ``ACPAgent`` call reaches the root run's stream: its
``session/request_permission`` as a ``PermissionRequest``, its form ``elicitation/create`` as
an ``acp.elicitation`` custom question, each with the path ``caller > name (> the remote's
path)``; the answers go back as the protocol says (items 17, 18, 20 of the specification),
against agents written with the official Python and TypeScript SDKs, on asyncio and trio."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from acp_client_harness import KINDS, acp_agent, children, logged, run_calls, steps

from hpd_agent import (
    Approve,
    ClarificationRequest,
    Decline,
    Deny,
    InvalidAnswerError,
    PermissionRequest,
)
from hpd_agent.acp import ELICITATION
from hpd_agent.events import Event
from hpd_agent.run import Run

pytestmark = pytest.mark.anyio

ALL = ["allow_once", "allow_always", "reject_once", "reject_always"]


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return request.param


def answering(answer: Any, seen: list[Event]) -> Any:
    """Answer every question with ``answer`` (a value, or a function of the event)."""

    async def respond(run: Run, event: Event) -> None:
        if isinstance(event, PermissionRequest | ClarificationRequest):
            seen.append(event)
            await run.respond(event.request_id, answer(event) if callable(answer) else answer)

    return respond


# -- permissions (item 17) ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("answer", "options", "selected"),
    [
        (Approve(scope="once"), ALL, "o-allow_once"),
        (Approve(scope="once"), ["allow_always", "reject_once"], "o-allow_always"),
        (Approve(scope="run"), ALL, "o-allow_always"),
        (Approve(scope="run"), ["allow_once", "reject_once"], "o-allow_once"),
        (Deny(reason="no"), ALL, "o-reject_once"),
        (Deny(), ["allow_once", "reject_always"], "o-reject_always"),
        (Decline(), ALL, "o-reject_once"),
        (Decline(), ["allow_once", "allow_always", "reject_always"], "o-reject_always"),
        (Deny(), ["allow_once", "allow_always"], "cancelled"),
    ],
)
async def test_a_permission_is_asked_at_the_root_and_its_answer_selects_an_option(
    kind: str, tmp_path: Path, answer: Any, options: list[str], selected: str
) -> None:
    tool = acp_agent(kind, tmp_path).as_tool()
    seen: list[Event] = []
    ask = {"title": "Edit main.py", "rawInput": {"path": "main.py"}, "options": options}
    out = await run_calls(
        tool, [steps({"permission": ask}, {"say": " after"})], answer=answering(answer, seen)
    )
    [request] = seen
    assert isinstance(request, PermissionRequest)
    assert request.agent_path == ("Root", "Agent")
    assert (request.tool_name, request.arguments) == ("Edit main.py", {"path": "main.py"})
    assert out.texts == [f"[permission {selected}] after"]
    assert logged(tmp_path)[-1] == f"permission {selected}"
    assert out.result.status == "completed" and children() == []


async def test_a_permission_without_title_or_object_input_is_named_by_its_call_id(
    kind: str, tmp_path: Path
) -> None:
    tool = acp_agent(kind, tmp_path).as_tool()
    seen: list[Event] = []
    ask = {"rawInput": ["not", "an", "object"]}
    out = await run_calls(tool, [steps({"permission": ask})], answer=answering(Approve(), seen))
    [request] = seen
    assert isinstance(request, PermissionRequest)
    assert (request.tool_name, request.arguments) == ("call-1", {})
    assert out.texts == ["[permission o-allow_once]"]


async def test_a_permission_ending_unanswered_is_the_cancelled_outcome(
    kind: str, tmp_path: Path
) -> None:
    tool = acp_agent(kind, tmp_path).as_tool()

    async def withdraw(run: Run, event: Event) -> None:
        if isinstance(event, PermissionRequest):
            run.cancel_request(event.request_id)

    ask = {"title": "deploy", "rawInput": {}}
    out = await run_calls(tool, [steps({"permission": ask}, {"say": " on"})], answer=withdraw)
    assert out.texts == ["[permission cancelled] on"]  # the agent's turn went on
    assert out.result.status == "completed" and children() == []


async def test_approved_for_the_run_is_not_asked_again_by_a_later_call(
    kind: str, tmp_path: Path
) -> None:
    tool = acp_agent(kind, tmp_path).as_tool()
    seen: list[Event] = []
    ask = steps({"permission": {"title": "run tests", "rawInput": {}}})
    other = steps({"permission": {"title": "push", "rawInput": {}}})
    out = await run_calls(tool, [ask], [ask], [other], answer=answering(Approve(scope="run"), seen))
    assert out.texts == ["[permission o-allow_always]"] * 3
    assert [e.tool_name for e in seen if isinstance(e, PermissionRequest)] == ["run tests", "push"]


# -- elicitations (item 18) ---------------------------------------------------------------------
FORM = {
    "type": "object",
    "properties": {
        "branch": {"type": "string", "minLength": 1},
        "force": {"type": "boolean"},
    },
    "required": ["branch"],
}


async def test_a_form_is_a_custom_question_checked_against_its_schema(
    kind: str, tmp_path: Path
) -> None:
    tool = acp_agent(kind, tmp_path).as_tool()
    seen: list[ClarificationRequest] = []
    refused: list[str] = []

    async def answer(run: Run, event: Event) -> None:
        if isinstance(event, ClarificationRequest):
            seen.append(event)
            with pytest.raises(InvalidAnswerError) as bad:
                await run.respond(event.request_id, {"branch": ""})
            refused.append(str(bad.value))
            # A property the form did not declare is not sent on.
            await run.respond(event.request_id, {"branch": "main", "force": True, "extra": 1})

    ask = {"message": "Which branch?", "schema": FORM}
    out = await run_calls(tool, [steps({"elicit": ask})], answer=answer)
    [question] = seen
    assert question.agent_path == ("Root", "Agent")
    assert question.question_kind == "custom" and question.question == "Which branch?"
    assert question.data["name"] == ELICITATION
    # As received: the Python SDK leaves out the default "type": "object".
    assert {"type": "object", **question.data["schema"]} == FORM
    assert refused and "branch" in refused[0]
    sent = json.loads(out.texts[0].removeprefix("[elicit ").removesuffix("]"))
    assert sent == {"action": "accept", "content": {"branch": "main", "force": True}}
    assert out.result.status == "completed" and children() == []


@pytest.mark.parametrize("how", ["decline", "cancel"])
async def test_a_declined_or_withdrawn_form(kind: str, tmp_path: Path, how: str) -> None:
    tool = acp_agent(kind, tmp_path).as_tool()

    async def answer(run: Run, event: Event) -> None:
        if isinstance(event, ClarificationRequest):
            if how == "decline":
                await run.respond(event.request_id, Decline())
            else:
                run.cancel_request(event.request_id)

    ask = {"message": "Which branch?", "schema": FORM}
    out = await run_calls(tool, [steps({"elicit": ask}, {"say": " on"})], answer=answer)
    assert out.texts == [f'[elicit {{"action": "{how}"}}] on']
    assert out.result.status == "completed"


async def test_a_url_elicitation_is_refused(kind: str, tmp_path: Path) -> None:
    tool = acp_agent(kind, tmp_path).as_tool()
    seen: list[Event] = []
    ask = {"message": "Sign in", "mode": "url"}
    out = await run_calls(tool, [steps({"elicit": ask})], answer=answering(True, seen))
    assert out.texts == ["[elicit error -32602]"] and seen == []


async def test_a_form_whose_schema_cannot_be_asked_is_refused(kind: str, tmp_path: Path) -> None:
    tool = acp_agent(kind, tmp_path).as_tool()
    seen: list[Event] = []
    # Larger than a custom question's schema may be (64 KiB).
    huge = {"type": "string", "enum": [f"option-{i:06}" for i in range(8_000)]}
    bad = {"type": "object", "properties": {"x": huge}}
    out = await run_calls(
        tool, [steps({"elicit": {"message": "?", "schema": bad}})], answer=answering({}, seen)
    )
    assert out.texts == ["[elicit error -32602]"] and seen == []


async def test_a_request_scoped_form_is_a_question_of_the_call(tmp_path: Path) -> None:
    # The TypeScript agent puts the id of the session/prompt it serves as requestId.
    tool = acp_agent("ts", tmp_path).as_tool()
    seen: list[Event] = []
    params = {"requestId": 0, "mode": "form", "message": "Name?", "requestedSchema": FORM}
    call = {"method": "elicitation/create", "params": params}
    out = await run_calls(tool, [steps({"call": call})], answer=answering({"branch": "b"}, seen))
    assert [e.agent_path for e in seen] == [("Root", "Agent")]
    assert out.texts == ['[call {"action":"accept","content":{"branch":"b"}}]']


# -- the remote's own path (item 20) -------------------------------------------------------------
@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (["Top", "Mid", "Leaf"], ("Root", "Agent", "Mid", "Leaf")),
        (["Top"], ("Root", "Agent")),
        ("Top > Mid", ("Root", "Agent")),
        (["Top", 3, "Leaf"], ("Root", "Agent")),
        (["Top", ""], ("Root", "Agent")),
    ],
)
async def test_an_hpd_remote_names_its_own_path(
    kind: str, tmp_path: Path, path: Any, expected: tuple[str, ...]
) -> None:
    tool = acp_agent(kind, tmp_path).as_tool()
    seen: list[Event] = []
    asks = steps(
        {"permission": {"title": "deploy", "rawInput": {}, "path": path}},
        {"elicit": {"message": "Which?", "schema": FORM, "path": path}},
    )
    await run_calls(tool, [asks], answer=answering(lambda e: _fitting(e), seen))
    assert [e.agent_path for e in seen] == [expected, expected]


def _fitting(event: Event) -> Any:
    return Approve() if isinstance(event, PermissionRequest) else {"branch": "x"}


# -- parallel calls ------------------------------------------------------------------------------
async def test_parallel_calls_ask_together_and_each_answer_reaches_its_asker(
    kind: str, tmp_path: Path
) -> None:
    tool = acp_agent(kind, tmp_path).as_tool()
    waiting: list[Any] = []

    async def answer_in_reverse(run: Run, event: Event) -> None:
        if isinstance(event, PermissionRequest | ClarificationRequest):
            waiting.append(event)
        if len(waiting) == 2:  # both outstanding at once: answered last first
            for e in reversed(waiting):
                given = Deny() if isinstance(e, PermissionRequest) else {"branch": "two"}
                await run.respond(e.request_id, given)
            waiting.append(None)

    one = steps({"permission": {"title": "one", "rawInput": {}}})
    two = steps({"elicit": {"message": "two?", "schema": FORM}})
    out = await run_calls(tool, [one, two], answer=answer_in_reverse)
    assert out.texts[0] == "[permission o-reject_once]"
    assert re.fullmatch(
        r'\[elicit \{"action": "accept", "content": \{"branch": "two"\}\}\]', out.texts[1]
    )
    assert len({line for line in logged(tmp_path) if line.startswith("initialize")}) == 1
