"""``ACPAgent`` against ACP agents written with the official SDKs (Python and TypeScript), on
asyncio and trio: the handshake, one process per root run reaped before the result, one
session per call, the answer's text, stop reasons and failures as results, files inside
``cwd`` only, cancellation (items 14-16, 19, 21, 22 of the specification)."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import anyio
import pytest
from acp_client_harness import (
    KINDS,
    acp_agent,
    alive,
    arrived,
    children,
    children_running,
    logged,
    run_calls,
    steps,
)

from hpd_agent import Agent, Approve, PermissionRequest, ToolCallStarted, UserError
from hpd_agent.acp import ACPAgent
from hpd_agent.events import Event
from hpd_agent.run import Run
from hpd_agent.testing import ScriptedModel, text

pytestmark = pytest.mark.anyio


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return request.param


async def test_nothing_starts_before_a_call(kind: str, tmp_path: Path) -> None:
    tool = acp_agent(kind, tmp_path).as_tool()
    root = Agent("Root", model=ScriptedModel([text("no call")]), tools=[tool])
    result = await root.run("go")
    assert result.output == "no call"
    assert logged(tmp_path) == [] and children() == []


async def test_a_call_is_a_session_and_its_answer_is_the_streamed_text(
    kind: str, tmp_path: Path
) -> None:
    tool = acp_agent(kind, tmp_path).as_tool()
    out = await run_calls(tool, [steps({"say": "Hello, "}, {"say": "world."})])
    assert out.result.status == "completed"
    assert out.texts == ["Hello, world."] and not out.results[0].is_error
    first, second = logged(tmp_path)
    handshake = json.loads(first.removeprefix("initialize "))
    assert handshake["protocolVersion"] == 1
    caps = handshake["caps"]
    assert caps["fs"] == {"readTextFile": True, "writeTextFile": True}
    assert caps["terminal"] is False and caps["elicitation"] == {"form": {}}
    assert second == f"session/new {tmp_path}"
    assert out.children_at_finish == [] and children() == []


async def test_one_process_per_root_run_shared_by_parallel_calls(kind: str, tmp_path: Path) -> None:
    tool = acp_agent(kind, tmp_path).as_tool()
    pid = steps({"pid": True})
    out = await run_calls(tool, [pid, pid], [pid])
    pids = set(out.texts)
    assert len(out.texts) == 3 and len(pids) == 1
    assert sum(line.startswith("session/new") for line in logged(tmp_path)) == 3
    assert sum(line.startswith("initialize") for line in logged(tmp_path)) == 1
    # Reaped before the run's result was available (at RunFinished), gone now.
    assert out.children_at_finish == [] and not alive(int(pids.pop()))
    again = await run_calls(tool, [pid])
    assert again.texts[0] not in out.texts  # the next root run starts a new process
    assert children() == []


@pytest.mark.parametrize(
    ("stop", "expected"),
    [
        ("max_tokens", r"^Half\n\n\(The agent Agent stopped early: max_tokens\.\)$"),
        ("max_turn_requests", r"^Half\n\n\(The agent Agent stopped early: max_turn_requests\.\)$"),
        ("refusal", r"^Error: ACPAgentError: Agent ended its turn with 'refusal': Half$"),
        ("cancelled", r"^Error: ACPAgentError: Agent ended its turn with 'cancelled': Half$"),
    ],
)
async def test_stop_reasons(kind: str, tmp_path: Path, stop: str, expected: str) -> None:
    tool = acp_agent(kind, tmp_path).as_tool()
    out = await run_calls(tool, [steps({"say": "Half"}, {"stop": stop})])
    assert re.match(expected, out.texts[0]), out.texts[0]
    assert out.results[0].is_error is (stop in ("refusal", "cancelled"))
    assert out.result.status == "completed" and children() == []


async def test_an_error_response_is_an_error_result_naming_the_agent(
    kind: str, tmp_path: Path
) -> None:
    tool = acp_agent(kind, tmp_path).as_tool()
    out = await run_calls(tool, ["this is not JSON"])
    [result] = out.results
    assert result.is_error
    assert result.content.startswith(
        "Error: ACPAgentError: Agent: it answered the call with an error"
    )
    assert out.result.status == "completed" and children() == []


async def test_a_crash_is_an_error_result_and_the_next_call_starts_afresh(
    kind: str, tmp_path: Path
) -> None:
    tool = acp_agent(kind, tmp_path).as_tool()
    out = await run_calls(tool, [steps({"say": "going"}, {"exit": 3})], [steps({"pid": True})])
    crashed, after = out.results
    assert crashed.is_error
    assert crashed.content == (
        "Error: ACPAgentError: Agent: the agent process ended during the call (exit status 3)"
    )
    assert not after.is_error and after.content.isdigit()
    assert sum(line.startswith("initialize") for line in logged(tmp_path)) == 2
    assert out.result.output == "done" and children() == []


async def test_a_command_that_cannot_start_is_an_error_result(tmp_path: Path) -> None:
    tool = ACPAgent(str(tmp_path / "no-such-agent"), name="Ghost").as_tool()
    out = await run_calls(tool, ["hi"], ["hi again"], name="Ghost")
    for result in out.results:
        assert result.is_error
        assert result.content.startswith("Error: ACPAgentError: Ghost: cannot start ")
        assert "no-such-agent" in result.content
    assert out.result.status == "completed"


async def test_an_agent_that_is_not_acp_fails_the_handshake(tmp_path: Path) -> None:
    # cat echoes our initialize back as a request: we refuse it, it echoes the refusal.
    tool = ACPAgent("cat", name="Cat").as_tool()
    out = await run_calls(tool, ["hi"], name="Cat")
    [result] = out.results
    assert result.is_error and result.content.startswith("Error: ACPAgentError: Cat: ")
    assert out.result.status == "completed"


def test_the_public_names() -> None:
    import hpd_agent
    import hpd_agent.acp as acp

    assert acp.Decline is hpd_agent.Decline and acp.ELICITATION == "acp.elicitation"
    assert {"ACPAgent", "ACPAgentError", "Decline", "ELICITATION"} <= set(acp.__all__)


def test_names_and_arguments() -> None:
    assert ACPAgent("/usr/local/bin/claude-code-acp.js").name == "claude-code-acp"
    assert ACPAgent("gemini", ["--experimental-acp"]).name == "gemini"
    assert ACPAgent("my agent.exe").name == "my_agent"
    assert ACPAgent("x", name="Planner").name == "Planner"
    assert ACPAgent("x", cwd="rel").cwd == os.path.abspath("rel")
    assert ACPAgent("x").cwd == os.getcwd()
    for bad in (lambda: ACPAgent(""), lambda: ACPAgent("x", "y"), lambda: ACPAgent("x", name="")):
        with pytest.raises(UserError):
            bad()


async def test_the_tool_takes_a_query_and_is_named_after_the_agent(tmp_path: Path) -> None:
    agent = ACPAgent("x", name="Code Agent")
    [tool] = await agent.as_tool().resolve(_NoResources())
    assert tool.name == "Code_Agent" and tool.agent is agent
    assert set(tool.parameters["properties"]) == {"query"}
    [named] = await agent.as_tool("coder", "Writes code.").resolve(_NoResources())
    assert (named.name, named.description) == ("coder", "Writes code.")


class _NoResources:
    run_id = "r"

    async def enter(self, resource: object) -> object:
        raise AssertionError("nothing is started before a call")


async def test_the_environment_is_the_safe_one_plus_env(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HPD_TEST_SECRET", "s3cret")
    tool = acp_agent(kind, tmp_path, env={"HPD_GIVEN": "yes"}).as_tool()
    query = steps({"env": "HPD_GIVEN"}, {"say": "|"}, {"env": "HPD_TEST_SECRET"}, {"say": "|"})
    out = await run_calls(tool, [query + ""], [steps({"env": "PATH"})])
    assert out.texts[0] == "yes|<unset>|"
    assert out.texts[1] == os.environ["PATH"]


# -- files -----------------------------------------------------------------------------------
async def test_files_inside_cwd_are_served(kind: str, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("one\ntwo\nthree\nfour\n")
    tool = acp_agent(kind, tmp_path, cwd=work).as_tool()
    query = steps(
        {"write": {"path": str(work / "new" / "deep" / "f.txt"), "content": "made\n"}},
        {"read": {"path": str(work / "new" / "deep" / "f.txt")}},
        {"read": {"path": str(work / "notes.txt"), "line": 2, "limit": 2}},
        {"read": {"path": str(work / "notes.txt"), "line": 3}},
    )
    out = await run_calls(tool, [query])
    assert out.texts == ["[wrote][read made\n][read two\nthree\n][read three\nfour\n]"]
    assert (work / "new" / "deep" / "f.txt").read_text() == "made\n"


async def test_files_outside_cwd_are_refused(kind: str, tmp_path: Path) -> None:
    work, outside = tmp_path / "work", tmp_path / "outside"
    work.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    (work / "link").symlink_to(outside)
    (work / "file-link").symlink_to(outside / "secret.txt")
    tool = acp_agent(kind, tmp_path, cwd=work).as_tool()
    query = steps(
        {"read": {"path": str(outside / "secret.txt")}},
        {"read": {"path": str(work / "link" / "secret.txt")}},
        {"read": {"path": str(work / "file-link")}},
        {"read": {"path": str(work / ".." / "outside" / "secret.txt")}},
        {"read": {"path": "secret.txt"}},
        {"write": {"path": str(work / "link" / "planted.txt"), "content": "x"}},
        {"write": {"path": str(work / "file-link"), "content": "overwritten"}},
        {"read": {"path": str(work / "missing.txt")}},
    )
    out = await run_calls(tool, [query])
    found = re.findall(r"\[(\w+) (-?\d+)?", out.texts[0])
    assert [code for _, code in found] == ["-32602"] * 7 + ["-32002"], out.texts[0]
    assert "secret" not in out.texts[0].replace("secret.txt", "")
    assert (outside / "secret.txt").read_text() == "secret"
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


async def test_terminals_are_not_offered(kind: str, tmp_path: Path) -> None:
    tool = acp_agent(kind, tmp_path).as_tool()
    call = {"method": "terminal/create", "params": {"command": "ls"}}
    out = await run_calls(tool, [steps({"call": call})])
    assert out.texts[0].startswith("[error -32601 ")


async def test_requests_of_no_call_are_refused(kind: str, tmp_path: Path) -> None:
    tool = acp_agent(kind, tmp_path).as_tool()
    read = {
        "method": "fs/read_text_file",
        "params": {"sessionId": "other", "path": "/etc/hostname"},
    }
    out = await run_calls(tool, [steps({"call": read})])
    assert out.texts[0].startswith("[error -32602 ")


# -- cancelling --------------------------------------------------------------------------------
async def test_cancelling_the_run_cancels_the_session_and_its_questions(
    kind: str, tmp_path: Path
) -> None:
    tool = acp_agent(kind, tmp_path).as_tool()

    async def cancel_at_the_question(run: Run, event: Event) -> None:
        if isinstance(event, PermissionRequest):
            run.cancel()

    query = steps({"permission": {"title": "deploy", "rawInput": {}}}, {"wait_cancel": True})
    with anyio.fail_after(30):
        out = await run_calls(tool, [query], answer=cancel_at_the_question)
    assert out.result.status == "cancelled"
    lines = logged(tmp_path)
    assert sorted(x.split()[0] for x in lines[2:]) == ["cancel", "permission"], lines
    assert "permission cancelled" in lines
    # On the wire: session/cancel first, then the cancelled outcome (as ACP says).
    assert arrived(tmp_path)[-2:] == ["session/cancel", "response"]
    assert out.children_at_finish == [] and children() == []


async def test_cancelling_a_turn_that_waits_sends_session_cancel(kind: str, tmp_path: Path) -> None:
    tool = acp_agent(kind, tmp_path).as_tool()

    async def cancel_once_it_runs(run: Run, event: Event) -> None:
        if isinstance(event, PermissionRequest):  # the agent's turn is under way
            await run.respond(event.request_id, Approve())
            run.cancel()

    query = steps({"permission": {"title": "go", "rawInput": {}}}, {"wait_cancel": True})
    with anyio.fail_after(30):
        out = await run_calls(tool, [query], answer=cancel_once_it_runs)
    assert out.result.status == "cancelled"
    lines = logged(tmp_path)
    # The answer and the cancel race (the run is cancelled as the answer goes back).
    assert sorted(x.split()[0] for x in lines[2:]) == ["cancel", "permission"], lines
    assert "permission o-allow_once" in lines
    assert out.children_at_finish == [] and children() == []


async def test_cancelled_while_the_agent_starts_leaves_nothing(kind: str, tmp_path: Path) -> None:
    tool = acp_agent(kind, tmp_path).as_tool()

    async def cancel_when_started(run: Run, event: Event) -> None:
        if isinstance(event, ToolCallStarted):
            run.cancel()

    with anyio.fail_after(30):
        out = await run_calls(tool, [steps({"say": "hi"})], answer=cancel_when_started)
    assert out.result.status == "cancelled"
    assert out.children_at_finish == [] and children() == []


async def test_an_agent_that_ignores_stdin_closing_is_killed(tmp_path: Path) -> None:
    # A process that never exits on its own: stdin closed, then SIGTERM ignored, then SIGKILL.
    script = tmp_path / "stubborn.py"
    script.write_text(
        "import signal, sys, time, json\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "line = sys.stdin.readline()\n"
        "rid = json.loads(line)['id']\n"
        "print(json.dumps({'jsonrpc': '2.0', 'id': rid, 'result': {'protocolVersion': 1}}), flush=True)\n"
        "sys.stdin.readline()\n"
        "print(json.dumps({'jsonrpc': '2.0', 'id': rid + 1, 'result': {'sessionId': 's'}}), flush=True)\n"
        "sys.stdin.readline()\n"
        "print(json.dumps({'jsonrpc': '2.0', 'id': rid + 2, 'result': {'stopReason': 'end_turn'}}), flush=True)\n"
        "while True: time.sleep(1)\n"
    )
    tool = ACPAgent(sys.executable, [str(script)], name="Stubborn").as_tool()
    with anyio.fail_after(30):
        out = await run_calls(tool, ["hi"], name="Stubborn")
    assert out.texts == [""] and out.result.status == "completed"
    assert children_running(str(script)) == []
