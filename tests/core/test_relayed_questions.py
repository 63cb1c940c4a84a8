"""``ctx.on_behalf_of``: a tool relays a question for another agent (a remote one): the
question carries that agent's path, and its request id comes from a key, so a resumed run
finds the same request however many questions the call relayed before."""

from __future__ import annotations

import hashlib
from pathlib import Path

import anyio
import pytest
from trio.testing import MockClock

from hpd_agent import Agent, ClarificationRequest, ToolContext, UserError, tool
from hpd_agent.store import SQLiteStore
from hpd_agent.testing import ScriptedModel, text, tool_call

pytestmark = pytest.mark.anyio


def _relaying_agent(keys: list[str], answers: list[str]) -> Agent:
    """An agent whose tool relays one question per key in ``keys`` (taken as it goes: what
    a remote still waits for), for the agent ("Remote", "Inner")."""

    @tool
    async def relay(ctx: ToolContext) -> str:
        """Relay the remote's questions."""
        while keys:
            key = keys[0]
            frame = ctx.on_behalf_of("Remote", "Inner", key=key)
            answers.append(await frame.ask(f"question {key}?"))
            keys.pop(0)
        return " ".join(answers)

    model = ScriptedModel([tool_call("relay"), text("done")])
    return Agent("Root", model=model, tools=[relay])


async def test_a_relayed_question_carries_the_agent_path_below_the_caller() -> None:
    agent = _relaying_agent(["k1"], [])
    seen: list[ClarificationRequest] = []
    root_ids: set[str] = set()
    async with agent.stream("go") as run:
        async for event in run:
            if event.agent_path == ("Root",):
                root_ids.add(event.invocation_id)
            if isinstance(event, ClarificationRequest):
                seen.append(event)
                await run.respond(event.request_id, "yes")
    assert run.result.status == "completed"
    (question,) = seen
    assert question.agent_path == ("Root", "Remote", "Inner")
    assert question.depth == 2
    assert question.question == "question k1?"
    # Its own invocation: not the root agent's call.
    assert question.invocation_id not in root_ids


async def test_the_same_key_gives_the_same_request_id() -> None:
    ids: dict[str, str] = {}

    @tool
    async def peek(ctx: ToolContext) -> str:
        """Peek at ids."""
        ids["a"] = ctx.on_behalf_of("R", key="a").next_request_id()
        ids["a again"] = ctx.on_behalf_of("R", key="a").next_request_id()
        ids["b"] = ctx.on_behalf_of("R", key="b").next_request_id()
        ids["other path"] = ctx.on_behalf_of("S", key="a").next_request_id()
        ids["own"] = ctx.next_request_id()
        return "ok"

    agent = Agent("Root", model=ScriptedModel([tool_call("peek"), text("done")]), tools=[peek])
    await agent.run("go")
    assert ids["a"] == ids["a again"]
    assert len({ids["a"], ids["b"], ids["other path"], ids["own"]}) == 4


async def test_a_resumed_run_finds_the_answer_by_key_not_by_count(tmp_path: Path) -> None:
    # Life 2 answers "a" and parks on "b". Life 3 relays only "b" (what the remote still
    # waits for), first: it must find b's stored answer. A request id counted per call
    # would be a's, and replay a's answer instead.
    keys = ["a", "b"]
    answers: list[str] = []
    agent = _relaying_agent(keys, answers)
    store = SQLiteStore(tmp_path / "runs.db")
    try:
        first = await agent.run("go", store=store, on_unhandled="interrupt")
        (a,) = first.pending
        second = await agent.resume(
            first.run_id, store=store, answers={a.request_id: "ans a"}, on_unhandled="interrupt"
        )
        assert second.status == "interrupted"
        (b,) = second.pending
        assert b.question == "question b?" and keys == ["b"]
        answers.clear()
        done = await agent.resume(first.run_id, store=store, answers={b.request_id: "ans b"})
    finally:
        await store.aclose()
    assert done.status == "completed"
    assert answers == ["ans b"]


async def test_names_must_be_given() -> None:
    errors: list[str] = []

    @tool
    async def bad(ctx: ToolContext) -> str:
        """Misuse."""
        for names in [(), ("",), ("ok", 3)]:
            try:
                ctx.on_behalf_of(*names, key="k")  # type: ignore[arg-type]
            except UserError as e:
                errors.append(str(e))
        return "ok"

    agent = Agent("Root", model=ScriptedModel([tool_call("bad"), text("done")]), tools=[bad])
    await agent.run("go")
    assert len(errors) == 3


# Virtual time (trio's MockClock jumps as soon as every task waits): no real waiting.
@pytest.mark.parametrize(
    "anyio_backend",
    [pytest.param(("trio", {"clock": MockClock(autojump_threshold=0)}), id="trio-mockclock")],
)
async def test_waiting_for_a_relayed_answer_does_not_count_against_the_tool_timeout(
    anyio_backend: object,
) -> None:
    @tool(timeout=0.2)
    async def relay(ctx: ToolContext) -> str:
        """Relay and wait."""
        return await ctx.on_behalf_of("Remote", key="k").ask("wait for me?")

    agent = Agent("Root", model=ScriptedModel([tool_call("relay"), text("done")]), tools=[relay])
    async with agent.stream("go") as run:
        async for event in run:
            if isinstance(event, ClarificationRequest):
                await anyio.sleep(10)  # virtual: the clock jumps past the tool's 0.2 s
                await run.respond(event.request_id, "here")
    tool_results = [m.content for m in run.result.messages if m.kind == "tool"]
    assert tool_results == ["here"]


# Names and keys come from the remote: each pair below was one request id, joined with "/"
# and "#" unescaped.
_COLLIDING = [
    ((("a",), "x#y"), (("a#x",), "y")),
    ((("p/q",), "k"), (("p", "q"), "k")),
]


@pytest.mark.parametrize(("one", "other"), _COLLIDING, ids=["hash-in-key", "slash-in-name"])
async def test_names_and_keys_that_join_alike_give_distinct_request_ids(
    one: tuple[tuple[str, ...], str], other: tuple[tuple[str, ...], str]
) -> None:
    ids: list[str] = []

    @tool
    async def peek(ctx: ToolContext) -> str:
        """Peek at ids."""
        for names, key in (one, other):
            ids.append(ctx.on_behalf_of("R", *names, key=key).next_request_id())
        return "ok"

    agent = Agent("Root", model=ScriptedModel([tool_call("peek"), text("done")]), tools=[peek])
    await agent.run("go")
    assert ids[0] != ids[1]


async def test_plain_names_and_keys_keep_the_request_ids_they_had() -> None:
    # Journals of durable runs replay answers by request id: the form an unambiguous
    # relayed question had is kept (blake2b of "<call path>>names/joined#key?<n>").
    seen: dict[str, tuple[str, str]] = {}

    @tool
    async def peek(ctx: ToolContext) -> str:
        """Peek at ids."""
        for names, key in [(("R",), "k"), (("R", "In ner>x"), "req_1/2?#>%")]:
            frame = ctx.on_behalf_of(*names, key=key)
            old = f"{ctx.call_path}>{'/'.join(names)}#{key}?0"
            seen[old] = (frame.next_request_id(), frame.call_path + "?0")
        return "ok"

    agent = Agent("Root", model=ScriptedModel([tool_call("peek"), text("done")]), tools=[peek])
    await agent.run("go")
    for old, (request_id, path) in seen.items():
        assert path == old
        assert request_id == "req_" + hashlib.blake2b(old.encode(), digest_size=8).hexdigest()


async def test_a_relayed_question_below_a_relayed_one_has_an_id_of_its_own() -> None:
    ids: list[str] = []

    @tool
    async def peek(ctx: ToolContext) -> str:
        """Peek at ids."""
        ids.append(ctx.on_behalf_of("A", key="k").on_behalf_of("B", key="j").next_request_id())
        ids.append(ctx.on_behalf_of("A", key="k>B#j").next_request_id())
        return "ok"

    agent = Agent("Root", model=ScriptedModel([tool_call("peek"), text("done")]), tools=[peek])
    await agent.run("go")
    assert ids[0] != ids[1]


@pytest.mark.parametrize(
    "anyio_backend",
    [pytest.param(("trio", {"clock": MockClock(autojump_threshold=0)}), id="trio-mockclock")],
)
@pytest.mark.parametrize(("one", "other"), _COLLIDING, ids=["hash-in-key", "slash-in-name"])
async def test_a_remote_whose_questions_join_alike_gets_both_answered(
    anyio_backend: object, one: tuple[tuple[str, ...], str], other: tuple[tuple[str, ...], str]
) -> None:
    # As a remote's relay does: both questions asked at once, each in a task of its own.
    @tool
    async def relay(ctx: ToolContext) -> str:
        """Relay two questions at once."""
        got: list[str] = []

        async def ask(names: tuple[str, ...], key: str) -> None:
            question = f"{'/'.join(names)} {key}?"
            got.append(await ctx.on_behalf_of("Remote", *names, key=key).ask(question))

        async with anyio.create_task_group() as tg:
            for names, key in (one, other):
                tg.start_soon(ask, names, key)
        return ", ".join(sorted(got))

    agent = Agent("Root", model=ScriptedModel([tool_call("relay"), text("done")]), tools=[relay])
    asked: list[ClarificationRequest] = []
    # Virtual time: a run that waits forever fails here at once, with no real waiting.
    with anyio.fail_after(3600):
        async with agent.stream("go") as run:
            async for event in run:
                if isinstance(event, ClarificationRequest):
                    asked.append(event)
                    if len(asked) == 2:
                        for question in asked:
                            await run.respond(question.request_id, f"ans {question.question}")
    assert run.result.status == "completed"
    assert len({q.request_id for q in asked}) == 2
    (result,) = [m.content for m in run.result.messages if m.kind == "tool"]
    assert result == ", ".join(sorted(f"ans {q.question}" for q in asked))
