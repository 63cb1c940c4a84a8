"""Typed questions: each kind's answer checks, the ``ctx.ask_*`` helpers, end to end."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from hpd_agent import (
    Agent,
    ClarificationRequest,
    ClarificationResolved,
    InvalidAnswerError,
    ToolCallFinished,
    ToolContext,
    UserError,
    tool,
)
from hpd_agent.events import dump_event, load_event
from hpd_agent.questions import (
    ActionQuestion,
    ChoiceQuestion,
    CustomQuestion,
    InputQuestion,
    check_answer,
    restore_question,
    validate_answer,
)
from hpd_agent.testing import ScriptedHuman, ScriptedModel, text, tool_call

FILES = ("src/app.py", "src/auth.py", "README.md")
RANGE_SCHEMA = {
    "type": "object",
    "properties": {"start": {"type": "integer"}, "end": {"type": "integer"}},
    "required": ["start", "end"],
    "additionalProperties": False,
}


# -- answer checks, kind by kind -----------------------------------------------------------------
@pytest.mark.parametrize(
    ("kind", "options", "data", "answer", "expected"),
    [
        ("text", None, None, "anything at all", "anything at all"),
        ("text", ("Express", "Fastify"), None, "  express ", "Express"),
        ("input", None, {"argument": "email", "tool": "send"}, "  a@b.io\n", "a@b.io"),
        ("choice", FILES, {"multiple": False}, "src/auth.py", "src/auth.py"),
        ("choice", FILES, {"multiple": False}, "readme.md", "README.md"),
        ("choice", FILES, {"multiple": False}, 0, "src/app.py"),
        ("choice", FILES, {"multiple": True}, [2, "src/app.py"], ["README.md", "src/app.py"]),
        ("confirm", None, None, True, True),
        ("confirm", None, None, False, False),
        ("confirm", None, None, " Yes ", True),
        ("confirm", None, None, "n", False),
        ("confirm", None, None, "FALSE", False),
        ("action", None, {"url": "https://x.io/auth", "label": "Sign in"}, True, True),
        ("action", None, {"url": "https://x.io/auth", "label": "Sign in"}, "done", True),
        ("action", None, {"url": "https://x.io/auth", "label": "Sign in"}, False, False),
        (
            "custom",
            None,
            {"name": "r", "payload": {}, "schema": RANGE_SCHEMA},
            {"start": 1, "end": 9},
            {"start": 1, "end": 9},
        ),
        ("custom", None, {"name": "r", "payload": {}, "schema": None}, ("any", 1), ["any", 1]),
    ],
)
def test_good_answers_come_back_canonical(
    kind: str, options: Any, data: Any, answer: Any, expected: Any
) -> None:
    assert check_answer(kind, answer, options=options, data=data) == expected


@pytest.mark.parametrize(
    ("kind", "options", "data", "answer", "reason"),
    [
        ("text", None, None, 42, "expected text"),
        ("text", ("Express", "Fastify"), None, "Koa", "not one of the options"),
        ("input", None, {"argument": "email", "tool": "send"}, "   ", "'email' is required"),
        ("input", None, {"argument": "email", "tool": "send"}, 7, "expected a text value"),
        ("choice", FILES, {"multiple": False}, "main.py", "not one of the options"),
        ("choice", FILES, {"multiple": False}, 3, "out of range"),
        ("choice", FILES, {"multiple": False}, -1, "out of range"),
        ("choice", FILES, {"multiple": False}, True, "got a bool"),
        ("choice", FILES, {"multiple": False}, ["README.md"], "not a list"),
        ("choice", FILES, {"multiple": True}, "README.md", "expected a list"),
        ("choice", FILES, {"multiple": True}, [0, "src/app.py"], "chosen twice"),
        ("choice", FILES, {"multiple": True}, [], "at least one"),
        ("choice", None, {"multiple": False}, "x", "no options"),
        ("confirm", None, None, "maybe", "expected yes or no"),
        ("confirm", None, None, 1, "expected yes or no"),
        ("action", None, {"url": "https://x.io"}, "later", r"True \(done\) or False"),
        (
            "custom",
            None,
            {"name": "r", "schema": RANGE_SCHEMA},
            {"start": 1},
            "'end' is a required",
        ),
        (
            "custom",
            None,
            {"name": "r", "schema": RANGE_SCHEMA},
            {"start": "a", "end": 2},
            "start does not match",
        ),
        ("custom", None, {"name": "r", "schema": None}, {1, 2}, "must be JSON"),
        ("custom", None, {"name": "r", "schema": None}, float("nan"), "must be JSON"),
        ("telepathy", None, None, "x", "unknown question kind"),
    ],
)
def test_bad_answers_say_why(kind: str, options: Any, data: Any, answer: Any, reason: str) -> None:
    with pytest.raises((ValueError, TypeError), match=reason):
        check_answer(kind, answer, options=options, data=data)


def _stored(**fields: Any) -> ClarificationRequest:
    """A request event as a store would load it: through its JSON form."""
    event = ClarificationRequest(
        run_id="run_1", agent_path=("A",), depth=0, request_id="req_1", question="?", **fields
    )
    loaded = load_event(dump_event(event))
    assert isinstance(loaded, ClarificationRequest)
    return loaded


def test_validate_answer_works_from_a_loaded_record() -> None:
    choice = _stored(question_kind="choice", options=FILES, data={"multiple": False})
    assert validate_answer(choice, 1) == "src/auth.py"
    assert validate_answer(choice, "README.md") == "README.md"
    with pytest.raises(InvalidAnswerError, match=r"req_1.*not one of the options") as info:
        validate_answer(choice, "main.py")
    assert info.value.request_id == "req_1"
    custom = _stored(
        question_kind="custom", data={"name": "r", "payload": {}, "schema": RANGE_SCHEMA}
    )
    assert validate_answer(custom, {"start": 1, "end": 2}) == {"start": 1, "end": 2}
    with pytest.raises(InvalidAnswerError, match="does not match the schema"):
        validate_answer(custom, {"start": 1, "end": "x"})
    confirm = _stored(question_kind="confirm")
    assert validate_answer(confirm, "yes") is True


def test_question_definitions_are_checked_when_asked() -> None:
    with pytest.raises(UserError, match="at least one option"):
        ChoiceQuestion(question="Pick", options=[])
    with pytest.raises(UserError, match="distinct"):
        ChoiceQuestion(question="Pick", options=["a", "a"])
    with pytest.raises(UserError, match="not one string"):
        ChoiceQuestion(question="Pick", options="abc")
    with pytest.raises(UserError, match=r"must be https://"):
        ActionQuestion(url="example.com/login")
    with pytest.raises(UserError, match="argument's name"):
        InputQuestion(argument="", tool="t")
    with pytest.raises(UserError, match="invalid JSON schema"):
        CustomQuestion(name="r", question="?", schema={"type": "no-such-type"})
    with pytest.raises(UserError, match="must be JSON"):
        CustomQuestion(name="r", question="?", payload={"when": object()})


# -- through a run: ctx.ask_* from a tool ------------------------------------------------------
def _one_call_agent(fn: Any, name: str = "Worker", **arguments: Any) -> Agent:
    t = tool(fn)
    model = ScriptedModel([tool_call(t.name, **arguments), text("done")])
    return Agent(name, model=model, tools=[t])


async def _tool_result(agent: Agent, human: ScriptedHuman) -> str:
    results: list[str] = []

    class Watch(ScriptedHuman):
        async def on_event(self, event: Any) -> None:
            if isinstance(event, ToolCallFinished):
                results.append(event.result)

    watch = Watch()
    watch.rules = human.rules
    result = await agent.run("go", handler=watch)
    assert result.status == "completed"
    human.asked = watch.asked
    return results[0]


async def pick_file(ctx: ToolContext) -> str:
    """Pick a file."""
    return await ctx.ask_choice("Pick a file", FILES)


async def pick_files(ctx: ToolContext) -> str:
    """Pick files."""
    return json.dumps(await ctx.ask_choice("Pick files", FILES, multiple=True))


async def send_mail(ctx: ToolContext, subject: str) -> str:
    """Send a mail.

    Args:
        subject: The subject.
    """
    to = await ctx.ask_input("recipient", "Who should get it?")
    return f"sent {subject!r} to {to}"


async def delete_all(ctx: ToolContext) -> str:
    """Delete everything."""
    if not await ctx.confirm("Delete 12 files?"):
        return "kept the files"
    return "deleted"


async def connect(ctx: ToolContext) -> str:
    """Connect the calendar."""
    done = await ctx.ask_action("https://auth.example.com/oauth?x=1", label="Sign in")
    return "connected" if done else "not connected"


async def pick_range(ctx: ToolContext) -> str:
    """Pick a range."""
    value = await ctx.ask_custom(
        "date_range", "Which days?", payload={"month": "May"}, schema=RANGE_SCHEMA
    )
    return f"{value['start']}-{value['end']}"


@pytest.mark.parametrize(
    "url",
    [
        "https://auth.example.com/oauth?x=1",
        "HTTPS://auth.example.com/",
        "http://localhost:8080/callback",
        "http://127.0.0.1/cb",
        "http://[::1]:9/cb",
    ],
)
def test_an_action_url_is_a_web_page(url: str) -> None:
    assert ActionQuestion(url=url).data == {"url": url, "label": "Open link"}


@pytest.mark.parametrize(
    "url",
    [
        "javascript:alert(1)",
        "JavaScript:alert(1)",
        "data:text/html,<script>alert(1)</script>",
        "file:///etc/passwd",
        "vbscript:msgbox(1)",
        "http://example.com/login",  # plain http leaves the machine
        "http://evil.example\\@localhost/",  # a browser goes to evil.example
        "http://user@localhost/",
        " https://auth.example.com/",
        "https://auth.example.com/\n",
        "https:auth.example.com",  # no host
        "https://[::1/",  # not a URL
        "mailto:a@b.c",
    ],
)
def test_an_action_url_that_is_not_a_web_page_is_refused(url: str) -> None:
    with pytest.raises(UserError, match=r"^an action question's URL must be https://"):
        ActionQuestion(url=url)


def test_a_refused_action_url_is_quoted_bounded() -> None:
    with pytest.raises(UserError) as caught:
        ActionQuestion(url="javascript:" + "x" * 2_000_000)
    assert len(str(caught.value)) < 400 and "truncated" in str(caught.value)


async def test_a_tool_asking_to_open_a_javascript_url_gets_an_error_result() -> None:
    async def hostile(ctx: ToolContext) -> str:
        """Ask the person to follow a link."""
        return str(await ctx.ask_action("javascript:window.__pwned=1", label="Click me"))

    human = ScriptedHuman()
    result = await _tool_result(_one_call_agent(hostile), human)
    assert result.startswith("Error: UserError: an action question's URL must be https://")
    assert human.asked == []  # nobody was shown the link


async def test_each_kind_reaches_a_scripted_human_and_returns_its_answer() -> None:
    cases: list[tuple[Agent, ScriptedHuman, str]] = [
        (_one_call_agent(pick_file), ScriptedHuman().choose("Pick a file", 1), "src/auth.py"),
        (
            _one_call_agent(pick_files),
            ScriptedHuman().choose("Pick files", ["README.md", 0]),
            '["README.md", "src/app.py"]',
        ),
        (
            _one_call_agent(send_mail, subject="Hi"),
            ScriptedHuman().provide("recipient", " ana@example.com "),
            "sent 'Hi' to ana@example.com",
        ),
        (_one_call_agent(delete_all), ScriptedHuman().confirm("Delete", False), "kept the files"),
        (_one_call_agent(delete_all), ScriptedHuman().confirm("Delete", "yes"), "deleted"),
        (
            _one_call_agent(connect),
            ScriptedHuman().complete_action("auth.example.com"),
            "connected",
        ),
        (
            _one_call_agent(pick_range),
            ScriptedHuman().answer_custom("date_range", {"start": 3, "end": 9}),
            "3-9",
        ),
    ]
    for agent, human, expected in cases:
        assert await _tool_result(agent, human) == expected
        human.assert_all_asked()


async def test_requests_carry_kind_data_and_options() -> None:
    seen: list[ClarificationRequest] = []
    for fn in (pick_files, send_mail, connect, pick_range):
        agent = _one_call_agent(fn, subject="s") if fn is send_mail else _one_call_agent(fn)
        human = ScriptedHuman(
            {"Pick": [0], "Who": "x@y.z", "Sign in": True, "Which": {"start": 1, "end": 2}}
        )
        await agent.run("go", handler=human)
        seen.extend(r for r in human.asked if isinstance(r, ClarificationRequest))
    files, mail, action, custom = seen
    assert (files.question_kind, files.options, files.data) == ("choice", FILES, {"multiple": True})
    assert (mail.question_kind, mail.data) == (
        "input",
        {"argument": "recipient", "tool": "send_mail"},
    )
    assert action.question_kind == "action"
    assert action.data == {"url": "https://auth.example.com/oauth?x=1", "label": "Sign in"}
    assert custom.question_kind == "custom"
    assert custom.data == {
        "name": "date_range",
        "payload": {"month": "May"},
        "schema": RANGE_SCHEMA,
    }


async def test_respond_refuses_a_bad_answer_and_keeps_the_request_open() -> None:
    agent = _one_call_agent(pick_file)
    async with agent.stream("go") as run:
        async for event in run:
            if isinstance(event, ClarificationRequest):
                with pytest.raises(InvalidAnswerError, match="not one of the options"):
                    await run.respond(event.request_id, "main.py")
                with pytest.raises(InvalidAnswerError, match="out of range"):
                    await run.respond(event.request_id, 7)
                assert [r.request_id for r in run.pending] == [event.request_id]
                assert await run.respond(event.request_id, "readme.md") == "README.md"
            if isinstance(event, ClarificationResolved):
                assert event.answer == "README.md"
            if isinstance(event, ToolCallFinished):
                assert event.result == "README.md"
    assert run.result.status == "completed"


async def test_a_sub_agent_tool_asks_a_typed_question_from_depth_one() -> None:
    worker = _one_call_agent(delete_all, name="Cleaner")
    boss = Agent(
        "Boss",
        model=ScriptedModel([tool_call("Cleaner", query="clean up"), text("ok")]),
        tools=[worker.as_tool()],
    )
    human = ScriptedHuman().confirm("Delete", True, agent="Boss > Cleaner")
    result = await boss.run("tidy", handler=human)
    assert result.status == "completed"
    (request,) = human.asked
    assert isinstance(request, ClarificationRequest)
    assert (request.agent_path, request.depth, request.question_kind) == (
        ("Boss", "Cleaner"),
        1,
        "confirm",
    )


async def test_an_unanswered_typed_question_becomes_a_tool_result_for_the_model() -> None:
    agent = _one_call_agent(pick_file)
    result = await agent.run("go")  # nobody listening: the question resolves as unavailable
    tool_result = result.messages[-2]
    assert "No user is available" in str(tool_result.content)  # type: ignore[union-attr]


# -- action questions resolved by a callback ----------------------------------------------------
async def test_action_resolved_by_the_app_calling_respond() -> None:
    agent = _one_call_agent(connect)
    async with agent.stream("go") as run:
        async for event in run:
            if isinstance(event, ClarificationRequest):
                assert event.question_kind == "action"
                # e.g. the OAuth callback handler of the app, by request id:
                await run.respond(event.request_id, True)
            if isinstance(event, ToolCallFinished):
                assert event.result == "connected"


async def test_action_resolved_by_a_resolver_before_the_human() -> None:
    callback_hit = anyio.Event()

    async def wait_for_callback() -> bool:
        await callback_hit.wait()
        return True

    async def connect_with_callback(ctx: ToolContext) -> str:
        """Connect."""
        ok = await ctx.ask_action("https://auth.example.com/o", resolver=wait_for_callback)
        return "connected" if ok else "not connected"

    agent = _one_call_agent(connect_with_callback)
    resolved: list[ClarificationResolved] = []
    async with agent.stream("go") as run:
        async for event in run:
            if isinstance(event, ClarificationRequest):
                callback_hit.set()  # the user finished the flow in the browser
            if isinstance(event, ClarificationResolved):
                resolved.append(event)
            if isinstance(event, ToolCallFinished):
                assert event.result == "connected"
    assert [(r.status, r.answer) for r in resolved] == [("answered", True)]


async def test_action_answered_by_the_human_cancels_the_resolver() -> None:
    never = anyio.Event()
    cancelled: list[bool] = []

    async def wait_forever() -> bool:
        try:
            await never.wait()
        except BaseException:
            cancelled.append(True)
            raise
        return True

    async def connect_with_callback(ctx: ToolContext) -> str:
        """Connect."""
        ok = await ctx.ask_action("https://auth.example.com/o", resolver=wait_forever)
        return "connected" if ok else "declined"

    human = ScriptedHuman().complete_action("auth.example.com", False)
    assert await _tool_result(_one_call_agent(connect_with_callback), human) == "declined"
    assert cancelled == [True]


async def test_a_failing_resolver_fails_the_tool_call_with_its_error() -> None:
    async def broken() -> bool:
        raise RuntimeError("callback server crashed")

    async def connect_with_callback(ctx: ToolContext) -> str:
        """Connect."""
        await ctx.ask_action("https://auth.example.com/o", resolver=broken)
        return "unreachable"

    agent = _one_call_agent(connect_with_callback)
    events: list[Any] = []
    async with agent.stream("go") as run:
        async for event in run:
            events.append(event)
    (finished,) = [e for e in events if isinstance(e, ToolCallFinished)]
    assert finished.is_error
    assert "callback server crashed" in finished.result
    (resolved,) = [e for e in events if isinstance(e, ClarificationResolved)]
    assert resolved.status == "cancelled"


def test_a_restored_question_checks_answers_like_the_original() -> None:
    stored = _stored(question_kind="choice", options=FILES, data={"multiple": True}, context="why")
    spec = restore_question(stored)
    assert spec.question_kind == "choice"
    assert spec.validate([1]) == ["src/auth.py"]
    with pytest.raises(ValueError, match="chosen twice"):
        spec.validate([1, 1])
    assert (spec.question, spec.context, spec.options, spec.data) == (
        "?",
        "why",
        FILES,
        {"multiple": True},
    )


async def test_a_resolver_answer_that_does_not_fit_is_an_error_not_ignored() -> None:
    async def confused() -> Any:
        return "maybe"

    async def connect_with_callback(ctx: ToolContext) -> str:
        """Connect."""
        await ctx.ask_action("https://auth.example.com/o", resolver=confused)
        return "unreachable"

    agent = _one_call_agent(connect_with_callback)
    async with agent.stream("go") as run:
        async for event in run:
            if isinstance(event, ToolCallFinished):
                assert event.is_error
                assert "InvalidAnswerError" in event.result


async def test_cancelling_the_run_ends_an_action_and_its_resolver() -> None:
    never = anyio.Event()

    async def wait_forever() -> bool:
        await never.wait()
        return True

    async def connect_with_callback(ctx: ToolContext) -> str:
        """Connect."""
        await ctx.ask_action("https://auth.example.com/o", resolver=wait_forever)
        return "unreachable"

    agent = _one_call_agent(connect_with_callback)
    statuses: list[str] = []
    async with agent.stream("go") as run:
        async for event in run:
            if isinstance(event, ClarificationRequest):
                run.cancel()
            if isinstance(event, ClarificationResolved):
                statuses.append(event.status)
    assert run.result.status == "cancelled"
    assert statuses == ["cancelled"]


async def test_the_ask_user_tool_still_asks_text_with_options() -> None:
    from hpd_agent import ask_user

    agent = Agent(
        "Coder",
        model=ScriptedModel(
            [
                tool_call("ask_user", question="Which framework?", options=["Express", "Fastify"]),
                text("ok"),
            ]
        ),
        tools=[ask_user()],
    )
    human = ScriptedHuman().answer("framework", " express ", kind="text")
    result = await agent.run("build", handler=human)
    (request,) = human.asked
    assert isinstance(request, ClarificationRequest)
    assert (request.question_kind, request.options, request.data) == (
        "text",
        ("Express", "Fastify"),
        None,
    )
    assert result.messages[-2].content == "Express"  # type: ignore[union-attr]


# -- untrusted schemas: nothing is fetched, size and depth are bounded ---------------------------
class _CountingServer:
    """A real HTTP server on 127.0.0.1 that serves a schema and counts every request."""

    def __init__(self) -> None:
        import http.server
        import threading

        hits = self.hits = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                hits.append(self.path)
                body = b'{"type": "string"}'
                self.send_response(200)
                self.send_header("Content-Type", "application/schema+json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/schema.json"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def schema_server() -> Any:
    server = _CountingServer()
    yield server
    server.close()


@pytest.mark.parametrize(
    "ref",
    [
        "https://example.com/schema.json",
        "file:///etc/passwd",
        "other.json#/definitions/x",
        "//example.com/x",
    ],
)
def test_custom_schema_refs_outside_the_schema_are_refused_when_asked(ref: str) -> None:
    with pytest.raises(UserError, match=f"\\$ref '{ref}' points outside the schema"):
        CustomQuestion(name="r", question="?", schema={"properties": {"a": {"$ref": ref}}})
    with pytest.raises(UserError, match="points outside the schema"):
        CustomQuestion(name="r", question="?", schema={"items": [{"$dynamicRef": ref}]})


def test_local_refs_still_work() -> None:
    schema = {
        "$defs": {"day": {"type": "integer", "minimum": 1}},
        "properties": {"start": {"$ref": "#/$defs/day"}},
    }
    question = CustomQuestion(name="r", question="?", schema=schema)
    assert question.validate({"start": 3}) == {"start": 3}
    with pytest.raises(ValueError, match="start does not match the schema"):
        question.validate({"start": 0})


def test_custom_schema_size_and_depth_are_bounded() -> None:
    from hpd_agent._values.schemas import MAX_SCHEMA_BYTES, MAX_SCHEMA_DEPTH

    big = {"description": "x" * MAX_SCHEMA_BYTES}
    with pytest.raises(UserError, match="more than the 65,536 allowed"):
        CustomQuestion(name="r", question="?", schema=big)
    deep: dict[str, Any] = {}
    node = deep
    for _ in range(100_000):  # far past the recursion limit
        node["items"] = {}
        node = node["items"]
    with pytest.raises(UserError, match=f"nested more than {MAX_SCHEMA_DEPTH} levels"):
        CustomQuestion(name="r", question="?", schema=deep)
    payload: list[Any] = []
    for _ in range(100_000):
        payload = [payload]
    with pytest.raises(UserError, match="the payload is nested more than"):
        CustomQuestion(name="r", question="?", payload={"p": payload})


def test_deeply_nested_answers_are_refused_not_crashed() -> None:
    answer: list[Any] = []
    for _ in range(100_000):
        answer = [answer]
    question = CustomQuestion(name="r", question="?")
    with pytest.raises(ValueError, match="the answer is nested more than"):
        question.validate(answer)


def test_a_stored_schema_with_a_remote_ref_fetches_nothing(schema_server: Any) -> None:
    from hpd_agent._values.schemas import schema_mismatch

    # As loaded from a store: it never went through CustomQuestion's checks.
    stored = _stored(
        question_kind="custom",
        data={"name": "r", "payload": {}, "schema": {"$ref": schema_server.url}},
    )
    with pytest.raises(InvalidAnswerError, match="points outside the schema"):
        validate_answer(stored, "text")
    # Even past that check, the validator's registry refuses to retrieve anything.
    problem = schema_mismatch({"properties": {"a": {"$ref": schema_server.url}}}, {"a": 1})
    assert problem is not None and "cannot be resolved" in problem
    assert schema_server.hits == []


async def test_respond_through_a_store_fetches_nothing(schema_server: Any, tmp_path: Any) -> None:
    from hpd_agent.store import RequestRecord, SQLiteStore, respond

    event = _stored(
        question_kind="custom",
        data={"name": "r", "payload": {}, "schema": {"$ref": schema_server.url}},
    )
    store = SQLiteStore(tmp_path / "runs.db")
    try:
        await store.add_request(RequestRecord.from_event(event))
        with pytest.raises(InvalidAnswerError, match=schema_server.url.replace(".", r"\.")):
            await respond(store, event.request_id, "text")
        record = await store.get_request(event.request_id)
        assert record is not None and record.status == "pending"
    finally:
        await store.aclose()
    assert schema_server.hits == []


# -- the schema kinds an MCP elicitation may carry, checked (formats too) ----------------
_ELICIT_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "properties": {
        "email": {"type": "string", "format": "email"},
        "site": {"type": "string", "format": "uri"},
        "day": {"type": "string", "format": "date"},
        "at": {"type": "string", "format": "date-time"},
        "name": {"type": "string", "minLength": 2, "maxLength": 5},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "ratio": {"type": "number"},
        "ok": {"type": "boolean"},
        "size": {"type": "string", "enum": ["s", "m"]},
        "tier": {"type": "string", "oneOf": [{"const": "a", "title": "A"}]},
        "tags": {"type": "array", "items": {"type": "string", "enum": ["x", "y"]}},
        "picks": {"type": "array", "items": {"anyOf": [{"const": "p", "title": "P"}]}},
    },
    "required": ["email"],
}


@pytest.mark.parametrize(
    ("field", "good", "bad"),
    [
        ("email", "ada@example.com", "not-an-email"),
        ("site", "https://example.com/a", "not a uri"),
        ("day", "2024-02-29", "2024-13-01"),
        ("at", "2024-02-29T10:00:00Z", "2024-02-29"),
        ("at", "2024-02-29T10:00:00+02:00", "2024-02-29T25:00:00Z"),
        ("name", "Ada", "A"),
        ("age", 36, 200),
        ("age", 36, 3.5),
        ("ratio", 0.5, "half"),
        ("ok", True, "yes"),
        ("size", "m", "xl"),
        ("tier", "a", "b"),
        ("tags", ["x", "y"], ["z"]),
        ("picks", ["p"], ["q"]),
    ],
)
def test_custom_schemas_check_every_kind_an_mcp_form_may_hold(
    field: str, good: Any, bad: Any
) -> None:
    question = CustomQuestion(name="form", question="?", schema=_ELICIT_SCHEMA)
    base = {"email": "ada@example.com"}
    assert question.validate({**base, field: good}) == {**base, field: good}
    with pytest.raises(ValueError, match=f"{field}(/0)? does not match the schema"):
        question.validate({**base, field: bad})
    with pytest.raises(ValueError, match="'email' is a required property"):
        question.validate({field: good} if field != "email" else {})
