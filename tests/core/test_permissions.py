"""Permission requests: approve once, approve for the run, deny; at any depth."""

from __future__ import annotations

import pytest

from hpd_agent import (
    Agent,
    Approve,
    Deny,
    Event,
    InvalidAnswerError,
    PermissionRequest,
    PermissionResolved,
    tool,
)
from hpd_agent.messages import ToolResultMessage
from hpd_agent.testing import ScriptedHuman, ScriptedModel, text, tool_call


def writer() -> tuple[list[str], object]:
    written: list[str] = []

    @tool(requires_approval=True)
    async def write_file(path: str, text: str) -> str:
        """Write a file."""
        written.append(path)
        return f"wrote {path}"

    return written, write_file


async def test_denied_tool_never_runs_and_model_sees_the_reason() -> None:
    written, write_file = writer()
    model = ScriptedModel([tool_call("write_file", path="/etc/passwd", text="x"), text("ok")])
    agent = Agent("A", model=model, tools=[write_file])  # type: ignore[list-item]
    human = ScriptedHuman().deny("write_file", reason="not that file")
    await agent.run("go", handler=human)
    assert written == []
    result = model.requests[1][-1]
    assert isinstance(result, ToolResultMessage) and not result.is_error
    assert result.content == "The user denied permission to run 'write_file'. Reason: not that file"
    request = human.asked[0]
    assert isinstance(request, PermissionRequest)
    assert (request.tool_name, request.arguments) == (
        "write_file",
        {"path": "/etc/passwd", "text": "x"},
    )


async def test_approve_once_asks_again_next_time() -> None:
    written, write_file = writer()
    model = ScriptedModel(
        [
            tool_call("write_file", path="a", text=""),
            tool_call("write_file", path="b", text=""),
            text("ok"),
        ]
    )
    human = ScriptedHuman().approve("write_file")
    await Agent("A", model=model, tools=[write_file]).run("go", handler=human)  # type: ignore[list-item]
    assert written == ["a", "b"]
    assert len(human.asked) == 2


async def test_approve_for_run_covers_later_and_parallel_calls() -> None:
    written, write_file = writer()
    model = ScriptedModel(
        [
            [
                tool_call("write_file", path="a", text=""),
                tool_call("write_file", path="b", text=""),
            ],
            tool_call("write_file", path="c", text=""),
            text("ok"),
        ]
    )
    agent = Agent("A", model=model, tools=[write_file])  # type: ignore[list-item]
    events: list[Event] = []
    async with agent.stream("go") as run:
        async for event in run:
            events.append(event)
            # Once both parallel calls wait, approving "a" for the run also lets "b" through.
            if isinstance(event, PermissionRequest) and len(run.pending) == 2:
                first = next(p for p in run.pending if p.arguments["path"] == "a")  # type: ignore[union-attr]
                await run.respond(first.request_id, Approve(scope="run"))
    assert sorted(written) == ["a", "b", "c"]
    asked = [e for e in events if isinstance(e, PermissionRequest)]
    resolved = [e for e in events if isinstance(e, PermissionResolved)]
    # The parallel call "b" was waiting too and got the run-wide approval; "c" never asked.
    assert sorted(e.arguments["path"] for e in asked) == ["a", "b"]
    assert all(e.approved and e.scope == "run" for e in resolved)


async def test_sub_agent_tool_and_sub_agent_itself_can_require_approval() -> None:
    written, write_file = writer()
    sub_model = ScriptedModel([tool_call("write_file", path="deep", text=""), text("sub ok")])
    sub = Agent("Coder", model=sub_model, tools=[write_file])  # type: ignore[list-item]
    root_model = ScriptedModel([tool_call("Coder", query="write"), text("root ok")])
    root = Agent("Root", model=root_model, tools=[sub.as_tool(requires_approval=True)])
    human = ScriptedHuman().approve("Coder").approve("write_file", agent="Root > Coder")
    result = await root.run("go", handler=human)
    assert result.output == "root ok"
    assert written == ["deep"]
    assert [(r.agent_path, r.tool_name) for r in human.asked] == [  # type: ignore[union-attr]
        (("Root",), "Coder"),
        (("Root", "Coder"), "write_file"),
    ]


async def test_policy_callable_decides_from_arguments() -> None:
    ran: list[str] = []

    @tool(requires_approval=lambda args: args["path"].startswith("/"))
    async def rm(path: str) -> str:
        """Remove."""
        ran.append(path)
        return "removed"

    model = ScriptedModel(
        [[tool_call("rm", path="tmp/x"), tool_call("rm", path="/usr")], text("ok")]
    )
    human = ScriptedHuman().deny("rm")
    await Agent("A", model=model, tools=[rm]).run("go", handler=human)
    assert ran == ["tmp/x"]
    assert [r.arguments["path"] for r in human.asked] == ["/usr"]  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("answer", "runs"),
    [
        (True, True),
        (False, False),
        ("yes", True),
        ("deny", False),
        ({"kind": "approve", "scope": "run"}, True),
        (Deny(reason="r"), False),
    ],
)
async def test_answer_forms(answer: object, runs: bool) -> None:
    written, write_file = writer()
    model = ScriptedModel([tool_call("write_file", path="p", text=""), text("ok")])
    async with Agent("A", model=model, tools=[write_file]).stream("go") as run:  # type: ignore[list-item]
        async for event in run:
            if isinstance(event, PermissionRequest):
                with pytest.raises(InvalidAnswerError):
                    await run.respond(event.request_id, "maybe")
                await run.respond(event.request_id, answer)
    assert (written == ["p"]) is runs


async def test_nobody_listening_means_tool_does_not_run() -> None:
    written, write_file = writer()
    model = ScriptedModel([tool_call("write_file", path="p", text=""), text("ok")])
    await Agent("A", model=model, tools=[write_file]).run("go")  # type: ignore[list-item]
    assert written == []
    assert "needs the user's approval" in model.requests[1][-1].content  # type: ignore[union-attr]
