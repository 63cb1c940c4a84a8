"""The ACP server (items 4-13 of docs/acp.md's server part) driven in this process by the official
Python SDK's client (``acp.ClientSideConnection``, unstable protocol on: it refuses
``elicitation/create`` otherwise), every message on the wire recorded in order."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import RequestError, embedded_text_resource, resource_block, resource_link_block
from acp import text_block as text
from acp_agents import FLAT, GATES, asker, broken, counted, echo, lead, looper, planner, top
from acp_harness import Answer, Editor, connected

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the SDK's client is asyncio's; the server runs there too


@pytest.fixture(autouse=True)
def counts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HPD_ACP_TEST_DIR", str(tmp_path))
    return tmp_path


def select(option: str) -> Answer:
    async def answer(params: dict[str, Any]) -> dict[str, Any]:
        return {"outcome": {"outcome": "selected", "optionId": option}}

    return answer


def accept(**content: Any) -> Answer:
    async def answer(params: dict[str, Any]) -> dict[str, Any]:
        return {"action": "accept", "content": content}

    return answer


def turn_text(editor: Editor, session_id: str, since: int) -> str:
    updates = editor.updates(session_id)[since:]
    return "".join(
        u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk"
    )


def results_of(editor: Editor, session_id: str) -> dict[str, dict[str, Any]]:
    """Each tool call's ``tool_call`` update and its last ``tool_call_update``, by title."""
    calls = {
        u["toolCallId"]: u for u in editor.updates(session_id) if u["sessionUpdate"] == "tool_call"
    }
    ends = {
        u["toolCallId"]: u
        for u in editor.updates(session_id)
        if u["sessionUpdate"] == "tool_call_update"
    }
    return {c["title"]: {"call": c, "end": ends.get(i)} for i, c in calls.items()}


def result_text(end: dict[str, Any]) -> str:
    [block] = end["content"]
    return block["content"]["text"]


# -- 4 initialize ------------------------------------------------------------------------------
async def test_initialize_says_version_one_and_load_session_only_with_a_store(
    tmp_path: Path,
) -> None:
    async with connected(echo, Editor()) as conn:
        answer = await conn.initialize(protocol_version=1)
        assert answer.protocol_version == 1
        assert answer.agent_capabilities is not None
        assert answer.agent_capabilities.load_session is False
        assert answer.agent_info is not None and answer.agent_info.name == "Echo"
    async with connected(echo, Editor(), store=str(tmp_path / "s.db")) as conn:
        answer = await conn.initialize(protocol_version=1)
        assert answer.agent_capabilities is not None
        assert answer.agent_capabilities.load_session is True


# -- 5, 6 sessions, prompts, stop reasons ------------------------------------------------------
async def test_each_session_continues_its_own_history_only() -> None:
    editor = Editor()
    async with connected(echo, editor) as conn:
        one = (await conn.new_session(cwd="/tmp")).session_id
        two = (await conn.new_session(cwd="/tmp")).session_id
        assert one != two
        for prompt in ("a", "b"):
            answer = await conn.prompt(session_id=one, prompt=[text(prompt)])
            assert answer.stop_reason == "end_turn"
        since = len(editor.updates(one))
        await conn.prompt(session_id=one, prompt=[text("c")])
        assert turn_text(editor, one, since) == "heard a | b | c"
        await conn.prompt(session_id=two, prompt=[text("x")])
        assert turn_text(editor, two, 0) == "heard x"
        # the answer streamed in pieces (the model's chunks), one chunk each
        assert len([u for u in editor.updates(two) if "content" in u]) > 1


async def test_a_prompt_is_its_text_its_links_and_embedded_text() -> None:
    editor = Editor()
    blocks = [
        text("one"),
        resource_link_block("x.py", "file:///src/x.py"),
        resource_block(embedded_text_resource("file:///notes.md", "two\nthree")),
    ]
    async with connected(echo, editor) as conn:
        session = (await conn.new_session(cwd="/tmp")).session_id
        await conn.prompt(session_id=session, prompt=blocks)
        assert turn_text(editor, session, 0) == "heard one\nfile:///src/x.py\ntwo\nthree"


async def test_an_unknown_session_is_not_found() -> None:
    async with connected(echo, Editor()) as conn:
        with pytest.raises(RequestError) as caught:
            await conn.prompt(session_id="sess_nope", prompt=[text("hi")])
        assert caught.value.code == -32002


async def test_a_prompt_while_the_turn_runs_is_refused() -> None:
    gate = GATES["db"] = anyio.Event()
    editor = Editor(form=accept(answer="SQLite"))
    try:
        async with connected(planner, editor) as conn:
            session = (await conn.new_session(cwd="/tmp")).session_id
            async with anyio.create_task_group() as tg:
                first: list[str] = []

                async def prompt() -> None:
                    answer = await conn.prompt(session_id=session, prompt=[text("x")])
                    first.append(answer.stop_reason)

                tg.start_soon(prompt)
                await editor.wait_for("session/update", 2)  # the survey runs, held
                with pytest.raises(RequestError) as caught:
                    await conn.prompt(session_id=session, prompt=[text("again")])
                assert "still running" in str(caught.value)
                gate.set()
            assert first == ["end_turn"]
            assert turn_text(editor, session, 0) == "Plan: The user chose SQLite."
    finally:
        GATES.clear()


async def test_stop_reasons_and_failures() -> None:
    async with connected(looper, Editor()) as conn:
        session = (await conn.new_session(cwd="/tmp")).session_id
        answer = await conn.prompt(session_id=session, prompt=[text("go")])
        assert answer.stop_reason == "max_turn_requests"
    async with connected(broken, Editor()) as conn:
        session = (await conn.new_session(cwd="/tmp")).session_id
        with pytest.raises(RequestError) as caught:
            await conn.prompt(session_id=session, prompt=[text("go")])
        assert "RuntimeError" in str(caught.value) and "the model broke" in str(caught.value)


# -- 7 streaming -------------------------------------------------------------------------------
async def test_tool_calls_of_the_tree_and_the_root_text_stream_before_the_response() -> None:
    editor = Editor(permission=select("approve_once"))
    async with connected(top, editor) as conn:
        session = (await conn.new_session(cwd="/tmp")).session_id
        await conn.prompt(session_id=session, prompt=[text("1")])
    updates = editor.updates(session)
    calls = [u for u in updates if u["sessionUpdate"] == "tool_call"]
    assert [c["title"] for c in calls] == [
        "Top: Mid",
        "Top > Mid: Leaf",
        "Top > Mid > Leaf: deploy",
    ]
    assert len({c["toolCallId"] for c in calls}) == 3
    deploy = calls[2]
    assert deploy["rawInput"] == {"target": "prod1"}
    assert deploy["status"] in ("pending", "in_progress")
    assert deploy["_meta"]["hpd_agent"] == {
        "agent_path": ["Top", "Mid", "Leaf"],
        "tool_name": "deploy",
    }
    ends = [u for u in updates if u["sessionUpdate"] == "tool_call_update"]
    assert [e["toolCallId"] for e in ends] == [c["toolCallId"] for c in reversed(calls)]
    assert [e["status"] for e in ends] == ["completed"] * 3
    assert [result_text(e) for e in ends] == [
        "deployed to prod1",
        "leaf: deployed to prod1",
        "mid: leaf: deployed to prod1",
    ]
    # only the root's text is the agent's message (the Leaf streamed its own in pieces)
    assert turn_text(editor, session, 0) == "top: mid: leaf: deployed to prod1"
    # each tool call announced before anything of it, every update before the response
    first_update = {c["toolCallId"]: updates.index(c) for c in calls}
    assert all(first_update[e["toolCallId"]] < updates.index(e) for e in ends)
    response = editor.response_index(_prompt_id(editor))
    last = max(i for i, (d, m) in enumerate(editor.wire) if m.get("method") == "session/update")
    assert last < response


def _prompt_id(editor: Editor) -> int:
    return next(
        m["id"] for d, m in editor.wire if d == "outgoing" and m.get("method") == "session/prompt"
    )


# -- 8, 9 questions as they come; permissions ----------------------------------------------------
async def test_parallel_questions_are_outstanding_together_and_answered_in_any_order() -> None:
    asked: list[dict[str, Any]] = []
    both = anyio.Event()
    slow_answered = anyio.Event()

    async def form(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params)
        if len(asked) == 2:
            both.set()
        await both.wait()
        if "colour" in params["message"]:
            await slow_answered.wait()  # the later question is answered first
            return {"action": "accept", "content": {"answer": "red"}}
        slow_answered.set()
        return {"action": "accept", "content": {"answer": "large"}}

    editor = Editor(form=form)
    async with connected(lead, editor) as conn:
        session = (await conn.new_session(cwd="/tmp")).session_id
        answer = await conn.prompt(session_id=session, prompt=[text("go")])
    assert answer.stop_reason == "end_turn"
    assert turn_text(editor, session, 0) == "fast got red / slow got large"
    assert sorted(p["message"] for p in asked) == [
        "Lead > Fast: Fast: which colour?",
        "Lead > Slow: Slow: which size?",
    ]


@pytest.mark.parametrize(
    ("option", "asked", "deployed", "says"),
    [
        ("approve_once", 2, ["deploy prod1", "deploy prod2"], "leaf: deployed to prod1"),
        ("approve_run", 1, ["deploy prod1", "deploy prod2"], "leaf: deployed to prod1"),
        ("deny", 2, [], "denied by the editor"),
        (None, 2, [], "declined"),
        ("bogus", 2, [], "not offered"),
    ],
)
async def test_permission_outcomes(
    option: str | None, asked: int, deployed: list[str], says: str
) -> None:
    async def cancelled(params: dict[str, Any]) -> dict[str, Any]:
        return {"outcome": {"outcome": "cancelled"}}

    editor = Editor(permission=cancelled if option is None else select(option))
    async with connected(top, editor) as conn:
        session = (await conn.new_session(cwd="/tmp")).session_id
        answer = await conn.prompt(session_id=session, prompt=[text("2")])
    assert answer.stop_reason == "end_turn"  # the turn goes on in every case
    requests = editor.received("session/request_permission")
    assert len(requests) == asked
    first = requests[0]["params"]
    deploys = [c for c in editor.updates(session) if c.get("title") == "Top > Mid > Leaf: deploy"]
    assert first["toolCall"]["toolCallId"] == deploys[0]["toolCallId"]
    assert first["toolCall"]["title"] == "Top > Mid > Leaf: deploy"
    assert first["toolCall"]["rawInput"] == {"target": "prod1"}
    assert first["toolCall"]["_meta"]["hpd_agent"]["agent_path"] == ["Top", "Mid", "Leaf"]
    assert [o["kind"] for o in first["options"]] == ["allow_once", "allow_always", "reject_once"]
    assert counted("effect") == deployed
    first_result = results_of(editor, session)["Top > Mid > Leaf: deploy"]
    assert says in result_text(first_result["end"]) or says in turn_text(editor, session, 0)


# -- 10 forms ----------------------------------------------------------------------------------
FORMS = [
    ("text", {"answer": {"type": "string", "title": "Answer"}}, {"answer": "Ada"}, '"Ada"'),
    (
        "text_options",
        {"answer": {"type": "string", "enum": ["tabs", "spaces"], "title": "Answer"}},
        {"answer": "spaces"},
        '"spaces"',
    ),
    (
        "input",
        {"answer": {"type": "string", "minLength": 1, "title": "Answer"}},
        {"answer": "bob"},
        '"bob"',
    ),
    (
        "choice",
        {"answer": {"type": "string", "enum": ["red", "green"], "title": "Answer"}},
        {"answer": "green"},
        '"green"',
    ),
    (
        "choices",
        {
            "answer": {
                "type": "array",
                "items": {"type": "string", "enum": ["red", "green", "blue"]},
                "minItems": 1,
                "title": "Answer",
            }
        },
        {"answer": ["blue", "red"]},
        '["blue", "red"]',
    ),
    ("confirm", {"answer": {"type": "boolean", "title": "Answer"}}, {"answer": True}, "true"),
    ("custom_flat", FLAT["properties"], {"name": "Ada", "age": 3}, '{"name": "Ada", "age": 3}'),
    (
        "custom_nested",
        {"answer": {"type": "string", "title": "Answer", "description": "the answer as JSON"}},
        {"answer": '{"range": {"from": 2}}'},
        '{"range": {"from": 2}}',
    ),
]


@pytest.mark.parametrize(("kind", "properties", "content", "effect"), FORMS)
async def test_questions_are_forms_by_kind(
    kind: str, properties: dict[str, Any], content: dict[str, Any], effect: str
) -> None:
    editor = Editor(form=accept(**content))
    async with connected(asker, editor) as conn:
        session = (await conn.new_session(cwd="/tmp")).session_id
        answer = await conn.prompt(session_id=session, prompt=[text(kind)])
    assert answer.stop_reason == "end_turn"
    [request] = editor.received("elicitation/create")
    params = request["params"]
    assert params["mode"] == "form" and params["sessionId"] == session
    assert params["requestedSchema"]["properties"] == properties
    assert params["_meta"]["hpd_agent"]["agent_path"] == ["Asker"]
    call = results_of(editor, session)["Asker: kinds"]["call"]
    assert params["toolCallId"] == call["toolCallId"]
    assert params["message"].startswith("Asker: ")
    assert counted("effect") == [f"{kind}={effect}"]


async def test_a_refused_answer_is_asked_again_with_the_reason() -> None:
    replies = iter([{"answer": "   "}, {"answer": "bob"}])

    async def form(params: dict[str, Any]) -> dict[str, Any]:
        return {"action": "accept", "content": next(replies)}

    editor = Editor(form=form)
    async with connected(asker, editor) as conn:
        session = (await conn.new_session(cwd="/tmp")).session_id
        await conn.prompt(session_id=session, prompt=[text("input")])
    first, second = (r["params"]["message"] for r in editor.received("elicitation/create"))
    assert "Your last answer was not accepted" not in first
    assert second.startswith(first + "\n(Your last answer was not accepted: ")
    assert "required" in second
    assert counted("effect") == ['input="bob"']


async def test_text_questions_carry_their_context() -> None:
    editor = Editor(form=accept(answer="Ada"))
    async with connected(asker, editor) as conn:
        session = (await conn.new_session(cwd="/tmp")).session_id
        await conn.prompt(session_id=session, prompt=[text("text")])
    [request] = editor.received("elicitation/create")
    assert request["params"]["message"] == "Asker: Your name?\nFor the greeting."


@pytest.mark.parametrize(("action", "says"), [("decline", "declined"), ("cancel", "cancel")])
async def test_decline_and_cancel_end_the_question_and_the_turn_goes_on(
    action: str, says: str
) -> None:
    async def form(params: dict[str, Any]) -> dict[str, Any]:
        return {"action": action}

    editor = Editor(form=form)
    async with connected(asker, editor) as conn:
        session = (await conn.new_session(cwd="/tmp")).session_id
        answer = await conn.prompt(session_id=session, prompt=[text("text")])
    assert answer.stop_reason == "end_turn"
    end = results_of(editor, session)["Asker: kinds"]["end"]
    assert says in result_text(end)
    assert counted("effect") == []
    assert turn_text(editor, session, 0).startswith("answer: ")


# -- 11 a client without forms -------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kind", "options", "pick", "effect"),
    [
        ("confirm", [("Yes", "allow_once"), ("No", "reject_once")], 1, "confirm=false"),
        ("choice", [("red", "allow_once"), ("green", "allow_once")], 1, 'choice="green"'),
        (
            "text_options",
            [("tabs", "allow_once"), ("spaces", "allow_once")],
            0,
            'text_options="tabs"',
        ),
    ],
)
async def test_without_forms_finite_questions_are_permission_requests(
    kind: str, options: list[tuple[str, str]], pick: int, effect: str
) -> None:
    async def permission(params: dict[str, Any]) -> dict[str, Any]:
        chosen = params["options"][pick]["optionId"]
        return {"outcome": {"outcome": "selected", "optionId": chosen}}

    editor = Editor(permission=permission)
    async with connected(asker, editor, forms=False) as conn:
        session = (await conn.new_session(cwd="/tmp")).session_id
        answer = await conn.prompt(session_id=session, prompt=[text(kind)])
    assert answer.stop_reason == "end_turn"
    assert editor.received("elicitation/create") == []
    [request] = editor.received("session/request_permission")
    params = request["params"]
    assert [(o["name"], o["kind"]) for o in params["options"]] == options
    call = results_of(editor, session)["Asker: kinds"]["call"]
    assert params["toolCall"]["toolCallId"] == call["toolCallId"]
    assert params["toolCall"]["title"].startswith("Asker: ")
    assert counted("effect") == [effect]


@pytest.mark.parametrize("kind", ["text", "input", "choices", "custom_flat", "action"])
async def test_without_forms_other_questions_end_unanswered_at_once(kind: str) -> None:
    editor = Editor()
    async with connected(asker, editor, forms=False) as conn:
        session = (await conn.new_session(cwd="/tmp")).session_id
        answer = await conn.prompt(session_id=session, prompt=[text(kind)])
    assert answer.stop_reason == "end_turn"
    assert editor.received("elicitation/create") == []
    assert editor.received("session/request_permission") == []
    assert counted("effect") == []
    end = results_of(editor, session)["Asker: kinds"]["end"]
    assert "cancelled" in result_text(end) or "unavailable" in result_text(end)


async def test_without_forms_a_dismissed_choice_ends_cancelled() -> None:
    editor = Editor()  # answers every permission request "cancelled"
    async with connected(asker, editor, forms=False) as conn:
        session = (await conn.new_session(cwd="/tmp")).session_id
        answer = await conn.prompt(session_id=session, prompt=[text("confirm")])
    assert answer.stop_reason == "end_turn"
    assert counted("effect") == []
    assert "cancelled" in result_text(results_of(editor, session)["Asker: kinds"]["end"])


# -- 12 cancel ---------------------------------------------------------------------------------
async def test_cancel_answers_the_prompt_at_once_and_a_late_reply_reaches_nobody() -> None:
    release = anyio.Event()
    approvals: list[str] = []

    async def permission(params: dict[str, Any]) -> dict[str, Any]:
        if not approvals:
            approvals.append("held")
            await release.wait()  # never answered before the turn is cancelled
        return {"outcome": {"outcome": "selected", "optionId": "approve_once"}}

    editor = Editor(permission=permission)
    async with connected(top, editor) as conn:
        session = (await conn.new_session(cwd="/tmp")).session_id
        async with anyio.create_task_group() as tg:
            stops: list[str] = []
            stopped = anyio.Event()

            async def prompt() -> None:
                answer = await conn.prompt(session_id=session, prompt=[text("1")])
                stops.append(answer.stop_reason)
                stopped.set()

            tg.start_soon(prompt)
            await editor.wait_for("session/request_permission")
            with anyio.fail_after(5):
                await conn.cancel(session_id=session)
                await stopped.wait()
        assert stops == ["cancelled"]
        release.set()
        assert counted("effect") == []
        # the session takes the next prompt
        answer = await conn.prompt(session_id=session, prompt=[text("1")])
        assert answer.stop_reason == "end_turn"
    assert counted("effect") == ["deploy prod1"]


# -- 13 sessions in a store ----------------------------------------------------------------------
async def test_a_stored_session_is_loaded_replayed_and_continued(tmp_path: Path) -> None:
    store = str(tmp_path / "sessions.db")
    async with connected(echo, Editor(), store=store) as conn:
        session = (await conn.new_session(cwd="/tmp/a")).session_id
        await conn.prompt(session_id=session, prompt=[text("a")])
    editor = Editor()
    async with connected(echo, editor, store=store) as conn:
        await conn.load_session(cwd="/tmp/b", session_id=session)
        replayed = [(u["sessionUpdate"], u["content"]["text"]) for u in editor.updates(session)]
        assert replayed == [("user_message_chunk", "a"), ("agent_message_chunk", "heard a")]
        since = len(editor.updates(session))
        await conn.prompt(session_id=session, prompt=[text("b")])
        assert turn_text(editor, session, since) == "heard a | b"
        with pytest.raises(RequestError) as caught:
            await conn.load_session(cwd="/tmp", session_id="sess_nope")
        assert caught.value.code == -32002


async def test_without_a_store_load_is_refused() -> None:
    async with connected(echo, Editor()) as conn:
        session = (await conn.new_session(cwd="/tmp")).session_id
        with pytest.raises(RequestError):
            await conn.load_session(cwd="/tmp", session_id=session)


async def test_a_turn_left_running_is_resumed_by_the_next_prompt(tmp_path: Path) -> None:
    store = str(tmp_path / "sessions.db")
    editor = Editor(form=_never)
    async with connected(planner, editor, store=store) as conn:
        session = (await conn.new_session(cwd="/tmp")).session_id
        async with anyio.create_task_group() as tg:
            tg.start_soon(_prompt_quietly, conn, session, "a plan")
            await editor.wait_for("elicitation/create")
            tg.cancel_scope.cancel()
    # the connection ended with the question open: the turn stays in the store
    editor = Editor(form=accept(answer="PostgreSQL"))
    async with connected(planner, editor, store=store) as conn:
        await conn.load_session(cwd="/tmp", session_id=session)
        since = len(editor.updates(session))
        answer = await conn.prompt(session_id=session, prompt=[text("and the tests")])
    assert answer.stop_reason == "end_turn"
    assert turn_text(editor, session, since) == (
        "Plan: The user chose PostgreSQL.Plan: The user chose PostgreSQL."
    )
    asked = [r["params"]["message"] for r in editor.received("elicitation/create")]
    assert asked == ["Planner > Clarifier: Which database should the plan assume?"]
    assert counted("effect") == ["survey db"]  # not again
    assert counted("model").count("Clarifier") == 3  # 2 before the stop, 1 after
    # the next turn ran on the resumed one's history (the Planner answered from it)
    assert counted("model").count("Planner") == 3
    editor = Editor()
    async with connected(planner, editor, store=store) as conn:
        await conn.load_session(cwd="/tmp", session_id=session)
    replayed = [(u["sessionUpdate"], u["content"]["text"]) for u in editor.updates(session)]
    assert replayed == [
        ("user_message_chunk", "a plan"),
        ("agent_message_chunk", "Plan: The user chose PostgreSQL."),
        ("user_message_chunk", "and the tests"),
        ("agent_message_chunk", "Plan: The user chose PostgreSQL."),
    ]


async def _never(params: dict[str, Any]) -> dict[str, Any]:
    await anyio.sleep_forever()
    raise AssertionError


async def _prompt_quietly(conn: Any, session: str, prompt: str) -> None:
    with contextlib.suppress(Exception):  # the connection ends under it
        await conn.prompt(session_id=session, prompt=[text(prompt)])
