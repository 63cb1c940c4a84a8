"""ConsoleHandler: what a person sees in the terminal, and how what they type is used."""

from __future__ import annotations

import dataclasses
import io
import json
import re
import threading
from collections.abc import Callable, Sequence
from typing import Any

import anyio
import pytest
from rich.console import Console

from hpd_agent import Agent, Approve, ConsoleHandler, Decline, Deny, ask_user, tool
from hpd_agent.events import ClarificationRequest, PermissionRequest
from hpd_agent.messages import Message, ToolResultMessage, last_user_text
from hpd_agent.models import ModelRequestParams
from hpd_agent.testing import FunctionModel, ScriptedModel, text, tool_call

# Marked here (not only by the conftest hook) so parametrized tests keep their parameters.
pytestmark = pytest.mark.anyio


class Screen(io.StringIO):
    """A terminal stand-in: records output and wakes waiters when a text appears on it."""

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._watch: list[tuple[str, threading.Event]] = []

    def write(self, s: str) -> int:
        with self._lock:
            n = super().write(s)
            value = self.getvalue()
            for needle, event in self._watch:
                if needle in value:
                    event.set()
        return n

    def appeared(self, needle: str) -> threading.Event:
        event = threading.Event()
        with self._lock:
            self._watch.append((needle, event))
            if needle in self.getvalue():
                event.set()
        return event

    def text(self) -> str:
        with self._lock:
            return self.getvalue()


class Keyboard:
    """Types lines when asked, like a person; records what was on screen at each prompt."""

    def __init__(self, screen: Screen, lines: Sequence[str | Callable[[], str]]) -> None:
        self.screen = screen
        self.lines = list(lines)
        self.seen: list[str] = []
        self.prompts: list[str] = []

    def __call__(self, prompt: str) -> str:
        self.prompts.append(prompt)
        self.seen.append(self.screen.text())
        if not self.lines:
            raise EOFError
        line = self.lines.pop(0)
        return line() if callable(line) else line


def console_for(screen: Screen) -> Console:
    return Console(file=screen, width=120, color_system=None, force_terminal=False)


def handler_for(
    lines: Sequence[str | Callable[[], str]], **kw: Any
) -> tuple[ConsoleHandler, Screen, Keyboard]:
    screen = Screen()
    keyboard = Keyboard(screen, lines)
    return ConsoleHandler(console_for(screen), input=keyboard, **kw), screen, keyboard


def tool_results(messages: Sequence[Message]) -> list[str]:
    return [m.content for m in messages if isinstance(m, ToolResultMessage)]


async def test_streams_text_and_tool_calls_labelled_with_the_agent_path() -> None:
    coder = Agent(
        "CodingAgent",
        model=ScriptedModel([text("Use bcrypt for the passwords.")], chunk_size=5),
    )
    orchestrator = Agent(
        "Orchestrator",
        model=ScriptedModel(
            [tool_call("CodingAgent", query="Build auth"), text("All done.")], chunk_size=4
        ),
        tools=[coder.as_tool()],
    )
    handler, screen, _ = handler_for([])
    result = await orchestrator.run("Build an auth system", handler=handler)
    assert result.output == "All done."
    out = screen.text()
    assert "Orchestrator > CodingAgent: Use bcrypt for the passwords." in out
    assert "Orchestrator → CodingAgent(query='Build auth')" in out
    assert "Orchestrator ← CodingAgent: Use bcrypt for the passwords." in out
    assert "Orchestrator: All done." in out
    assert out.index("Orchestrator → CodingAgent") < out.index("CodingAgent: Use bcrypt")


async def test_tool_arguments_show_as_names_and_values_or_as_the_text_sent() -> None:
    @tool
    def note(line: str, times: int = 1) -> str:
        """Notes a line."""
        return line * times

    calls = [tool_call("note", line="hi", times=2), tool_call("note", _raw='{"line": "cut')]
    agent = Agent("A", model=ScriptedModel([calls, text("ok")]), tools=[note])
    handler, screen, _ = handler_for([])
    await agent.run("go", handler=handler)
    out = screen.text()
    assert "A → note(line='hi', times=2)" in out  # parsed: the dict's names and values
    assert 'A → note({"line": "cut)' in out  # did not parse: the text as the model sent it


async def test_options_are_numbered_and_take_a_number_or_the_text() -> None:
    asks = [
        tool_call(
            "ask_user", question="Which framework?", options=["Express", "FastAPI", "Django"]
        ),
        tool_call("ask_user", question="Which database?", options=["Postgres", "SQLite"]),
        text("ok"),
    ]
    model = ScriptedModel(asks)
    agent = Agent("CodingAgent", model=model, tools=[ask_user()])
    handler, screen, keyboard = handler_for(["7", "2", "sqlite"])
    await agent.run("Build it", handler=handler)
    # The second request's tool result is the first answer, and so on.
    assert tool_results(model.requests[1]) == ["FastAPI"]
    assert tool_results(model.requests[2])[-1] == "SQLite"
    out = screen.text()
    assert "? CodingAgent asks: Which framework?" in out
    assert "1) Express" in out and "2) FastAPI" in out and "3) Django" in out
    assert "There is no option 7: type a number from 1 to 3" in out  # refused, asked again
    # Numbered from 1 on screen while the API counts from 0: the prompt says which, in the
    # words hpd-agent pending and the web page use (answer_prompt).
    shown = "  Choose one: type a number from 1 to {} (as listed: 1 is the first) or the value\n"
    assert shown.format(3) in out and shown.format(2) in out
    assert len(keyboard.prompts) == 3


def _two_askers(questions: dict[str, str]) -> tuple[Agent, dict[str, FunctionModel]]:
    """An orchestrator calling two sub-agents at once; each asks its own question."""
    models: dict[str, FunctionModel] = {}
    tools = []
    for name, question in questions.items():

        def fn(messages: Sequence[Message], info: ModelRequestParams, q: str = question) -> Any:
            answers = tool_results(messages)
            if not answers:
                return tool_call("ask_user", question=q)
            return text(f"{info.agent_name} got {answers[-1]}")

        models[name] = FunctionModel(fn, chunk_size=3)
        tools.append(Agent(name, model=models[name], tools=[ask_user()]).as_tool())

    def orchestrate(messages: Sequence[Message], info: ModelRequestParams) -> Any:
        results = tool_results(messages)
        if not results:
            return [tool_call(name, query="go") for name in questions]
        return text(" | ".join(results))

    return Agent("Orchestrator", model=FunctionModel(orchestrate), tools=tools), models


async def test_parallel_questions_are_asked_one_at_a_time_and_answered_by_id() -> None:
    orchestrator, _ = _two_askers({"Alpha": "Alpha's question?", "Beta": "Beta's question?"})
    screen = Screen()

    queued = screen.appeared("also needs you: queued")

    def answer_the_question_on_screen() -> str:
        # Both questions are pending once the second is announced as queued; only then
        # look: a single question must be on screen.
        queued.wait(timeout=20)
        keyboard.seen.append(screen.text())
        # Answer whichever question is shown last: answers must reach that asker.
        out = screen.text()
        last = max(("Alpha", "Beta"), key=lambda n: out.rfind(f"asks: {n}'s question?"))
        return f"answer for {last}"

    keyboard = Keyboard(screen, [answer_the_question_on_screen] * 2)
    handler = ConsoleHandler(console_for(screen), input=keyboard)
    result = await orchestrator.run("Ask both", handler=handler)
    assert result.output == "Alpha got answer for Alpha | Beta got answer for Beta"
    # When the first prompt appeared only one question was on screen; the other was queued.
    first = keyboard.seen[1]  # what was on screen once both questions were pending
    asked = [n for n in ("Alpha", "Beta") if f"asks: {n}'s question?" in first]
    assert len(asked) == 1
    assert "also needs you: queued" in first
    assert "asks: Alpha's question?" in keyboard.seen[-1]
    assert "asks: Beta's question?" in keyboard.seen[-1]
    assert re.search(r"\? Orchestrator > (Alpha|Beta) asks:", first)


async def test_other_agents_keep_streaming_while_a_question_waits() -> None:
    screen = Screen()
    writer_done = screen.appeared("Writer: chapter two is finished")

    def asker(messages: Sequence[Message], info: ModelRequestParams) -> Any:
        answers = tool_results(messages)
        if not answers:
            return tool_call("ask_user", question="Title?")
        return text(f"Titled {answers[-1]}")

    def writer(messages: Sequence[Message], info: ModelRequestParams) -> Any:
        done = tool_results(messages)
        if len(done) < 2:
            return tool_call("draft", chapter=len(done) + 1)
        return text("chapter two is finished")

    @tool
    def draft(chapter: int) -> str:
        """Draft a chapter.

        Args:
            chapter: Its number.
        """
        return f"chapter {chapter} drafted"

    asking = Agent("Asker", model=FunctionModel(asker), tools=[ask_user()])
    writing = Agent("Writer", model=FunctionModel(writer, chunk_size=4), tools=[draft])

    def orchestrate(messages: Sequence[Message], info: ModelRequestParams) -> Any:
        if not tool_results(messages):
            return [tool_call("Asker", query="x"), tool_call("Writer", query="y")]
        return text("done")

    orchestrator = Agent(
        "Root", model=FunctionModel(orchestrate), tools=[asking.as_tool(), writing.as_tool()]
    )

    def type_after_the_writer_finished() -> str:
        # The person is still thinking while the Writer works; if reading blocked the event
        # loop, the Writer could never finish and this bound would expire.
        return "Dune" if writer_done.wait(timeout=20) else "TIMED OUT"

    keyboard = Keyboard(screen, [type_after_the_writer_finished])
    result = await orchestrator.run(
        "go", handler=ConsoleHandler(console_for(screen), input=keyboard)
    )
    assert "Asker got" not in (result.output or "")
    out = screen.text()
    assert "Titled Dune" in out
    assert out.index("asks: Title?") < out.index("Writer: chapter two is finished")
    assert out.count("Root > Writer → draft") == 2


async def test_permission_prompt_offers_once_run_and_deny_with_reason() -> None:
    written: list[str] = []

    @tool(requires_approval=True)
    def write_file(path: str, text: str) -> str:
        """Write a file.

        Args:
            path: Where.
            text: What.
        """
        written.append(path)
        return f"wrote {path}"

    script = [
        tool_call("write_file", path="a.py", text="print(1)"),
        tool_call("write_file", path="b.py", text="print(2)"),
        tool_call("write_file", path="c.py", text="print(3)"),
        tool_call("write_file", path="d.py", text="print(4)"),
        text("finished"),
    ]
    model = ScriptedModel(script)
    agent = Agent("Coder", model=model, tools=[write_file])
    handler, screen, keyboard = handler_for(["1", "3", "not that one", "2"])
    await agent.run("write files", handler=handler)
    assert written == ["a.py", "c.py", "d.py"]
    results = tool_results(model.requests[-1])
    assert results[1] == "The user denied permission to run 'write_file'. Reason: not that one"
    out = screen.text()
    assert "? Coder wants to run write_file" in out
    assert "path: a.py" in out
    assert "1) approve once  2) approve for the run  3) deny" in out
    # approve for the run: d.py was never asked about
    assert keyboard.prompts == ["> ", "> ", "Reason (optional, sent to the agent): ", "> "]
    assert "path: d.py" not in out


def _question(
    kind: str, *, options: tuple[str, ...] | None = None, **data: Any
) -> ClarificationRequest:
    return ClarificationRequest(
        run_id="run_1",
        agent_path=("Root", "Sub"),
        depth=1,
        request_id=f"req_{kind}",
        question=f"A {kind} question",
        options=options,
        question_kind=kind,
        data=data or None,
    )


@pytest.mark.parametrize(
    ("request_", "typed", "expected", "shown"),
    [
        (_question("text"), ["", "anything at all"], "anything at all", "Please type an answer."),
        (_question("text", options=("Red", "Green")), ["green"], "Green", "1) Red"),
        (
            _question("input", argument="city", tool="weather"),
            ["Paris"],
            "Paris",
            "value for city of tool weather",
        ),
        (_question("confirm"), ["maybe", "y"], True, "Answer y or n."),
        (_question("confirm"), ["no"], False, "  Yes or no: type y or n\n"),
        (
            _question("choice", options=("Red", "Green", "Blue"), multiple=False),
            ["3"],
            "Blue",
            "2) Green",
        ),
        (
            _question("choice", options=("Red", "Green", "Blue"), multiple=True),
            ["1, blue"],
            ["Red", "Blue"],
            "one or more, separated by commas: a number from 1 to 3 (as listed: 1 is the first",
        ),
        (
            _question("action", url="https://example.test/auth", label="Sign in"),
            [""],
            True,
            "Sign in: https://example.test/auth",
        ),
        (
            _question("action", url="https://example.test/auth"),
            ["n"],
            False,
            "  Action needed: type y once it is done, or n to decline\n",
        ),
        (
            _question(
                "custom",
                name="deploy_target",
                payload={"regions": ["eu", "us"]},
                schema={"type": "object"},
            ),
            ["{not json", '{"region": "eu"}'],
            {"region": "eu"},
            "That is not valid JSON: Expecting property name",
        ),
    ],
)
async def test_each_question_kind_is_asked_and_parsed(
    request_: ClarificationRequest, typed: list[str], expected: Any, shown: str
) -> None:
    handler, screen, keyboard = handler_for(typed)
    assert await handler.on_request(request_) == expected
    out = screen.text()
    assert "? Root > Sub asks: A " in out
    assert shown in out
    assert len(keyboard.prompts) == len(typed)


async def test_assume_yes_answers_with_defaults_and_never_reads() -> None:
    def no_typing(prompt: str) -> str:
        raise AssertionError("assume_yes must not read input")

    screen = Screen()
    handler = ConsoleHandler(console_for(screen), input=no_typing, assume_yes=True)
    assert await handler.on_request(_question("text", options=("Express", "FastAPI"))) == "Express"
    assert await handler.on_request(_question("confirm")) is True
    assert await handler.on_request(_question("action", url="https://x.test")) is False
    assert await handler.on_request(_question("choice", options=("a", "b"), multiple=True)) == ["a"]
    permission = PermissionRequest(
        run_id="r",
        agent_path=("A",),
        depth=0,
        request_id="p",
        tool_name="rm",
        arguments={"path": "x"},
        tool_call_id="c",
    )
    assert await handler.on_request(permission) == Approve(scope="once")
    assert "(answered automatically: Express)" in screen.text()
    assert "(answered automatically: approve once)" in screen.text()


async def test_closed_input_falls_back_to_defaults_instead_of_hanging() -> None:
    model = ScriptedModel(
        [
            tool_call("ask_user", question="Which framework?", options=["Express", "FastAPI"]),
            tool_call("ask_user", question="Which database?", options=["Postgres", "SQLite"]),
            text("ok"),
        ]
    )
    agent = Agent("A", model=model, tools=[ask_user()])
    handler, screen, keyboard = handler_for([])  # the keyboard raises EOFError at once
    await agent.run("go", handler=handler)
    assert tool_results(model.requests[-1]) == ["Express", "Postgres"]
    assert "Input closed: answering with defaults from now on." in screen.text()
    assert len(keyboard.prompts) == 1  # closed input is not read again


async def test_a_read_abandoned_by_an_expired_question_is_adopted_by_the_next() -> None:
    screen = Screen()
    # Typed once the second question waits for its line (the adopted read's prompt is
    # echoed then), not merely shown: a line that comes while no question waits was meant
    # for the expired one and is dropped.
    second_shown = screen.appeared("asks: Second?\n  Question: type your answer\n> ")

    def model_fn(messages: Sequence[Message], info: ModelRequestParams) -> Any:
        results = tool_results(messages)
        if not results:
            return tool_call("quick_ask", question="First?")
        if len(results) == 1:
            return tool_call("ask_user", question="Second?")
        return text(" / ".join(results))

    agent = Agent(
        "A",
        model=FunctionModel(model_fn),
        tools=[ask_user(timeout=0.05, name="quick_ask"), ask_user()],
    )

    def type_once_the_second_question_shows() -> str:
        return "typed" if second_shown.wait(timeout=120) else "TIMED OUT"

    keyboard = Keyboard(screen, [type_once_the_second_question_shows])
    result = await agent.run("go", handler=ConsoleHandler(console_for(screen), input=keyboard))
    assert result.output is not None
    first, second = result.output.split(" / ")
    assert "did not answer" in first
    assert second == "typed"
    assert len(keyboard.prompts) == 1  # one reader thread served both questions
    assert "A's question ended: expired" in screen.text()


async def test_denied_permission_reason_is_sent_to_the_model_in_the_same_turn() -> None:
    @tool(requires_approval=True)
    def drop_table(name: str) -> str:
        """Drop a table.

        Args:
            name: Table.
        """
        raise AssertionError("must not run")

    def fn(messages: Sequence[Message], info: ModelRequestParams) -> Any:
        results = tool_results(messages)
        if not results:
            return tool_call("drop_table", name="users")
        return text(f"Understood: {results[-1]} (asked: {last_user_text(messages)})")

    agent = Agent("DBA", model=FunctionModel(fn), tools=[drop_table])
    handler, _, _ = handler_for(["deny: keep the users"])
    result = await agent.run("clean up", handler=handler)
    assert result.output == (
        "Understood: The user denied permission to run 'drop_table'. Reason: keep the users "
        "(asked: clean up)"
    )
    assert Deny(reason="x") != Approve()


async def test_parallel_agents_text_is_never_interleaved_word_by_word() -> None:
    from hpd_agent.models import Model, ModelResponse

    a_spoke, b_spoke = anyio.Event(), anyio.Event()

    class Alternating(Model):
        """Streams two pieces, handing over to the other agent's model in between."""

        def __init__(self, me: str, first: anyio.Event | None, then: anyio.Event) -> None:
            self.me, self.first, self.then = me, first, then

        async def request(
            self, messages: Sequence[Message], params: ModelRequestParams
        ) -> ModelResponse:
            assert params.on_text is not None
            if self.first is not None:
                await self.first.wait()
            params.on_text(f"{self.me} one, ")
            self.then.set()
            if self.first is None:
                await b_spoke.wait()
            params.on_text(f"{self.me} two.")
            return ModelResponse(text=f"{self.me} one, {self.me} two.", streamed=True)

    left = Agent("Left", model=Alternating("left", None, a_spoke))
    right = Agent("Right", model=Alternating("right", a_spoke, b_spoke))
    root = Agent(
        "Root",
        model=ScriptedModel(
            [[tool_call("Left", query="x"), tool_call("Right", query="y")], text("ok")]
        ),
        tools=[left.as_tool(), right.as_tool()],
    )
    handler, screen, _ = handler_for([])
    await root.run("go", handler=handler)
    out = screen.text()
    # Right spoke while Left held the floor: its words were held and shown as one line,
    # and no line mixes the two agents' words.
    assert "Root > Right: right one, right two.\n" in out
    assert "Root > Left: left one," in out
    for line in out.splitlines():
        assert not ("left" in line and "right" in line), line


async def test_streamed_text_wraps_between_words_at_the_console_width() -> None:
    sentence = "Streaming text arrives in small pieces that split words, yet lines break only between words."
    agent = Agent("Narrator", model=ScriptedModel([text(sentence)], chunk_size=3))
    screen = Screen()
    console = Console(file=screen, width=40, color_system=None, force_terminal=False)
    await agent.run("go", handler=ConsoleHandler(console, input=Keyboard(screen, [])))
    streamed = [line for line in screen.text().splitlines() if not line.startswith("▶")]
    assert len(streamed) >= 3
    assert all(len(line) <= 40 for line in streamed), streamed
    assert all(not line.endswith(" ") for line in streamed)
    assert " ".join(line.strip() for line in streamed) == f"Narrator: {sentence}"


async def test_failures_and_cancellation_are_shown() -> None:
    from hpd_agent.exceptions import ScriptExhaustedError

    handler, screen, _ = handler_for([])
    with pytest.raises(ScriptExhaustedError):
        await Agent("Broken", model=ScriptedModel([])).run("go", handler=handler)
    out = screen.text()
    # The root agent's failure is the run's: shown once.
    assert "Run failed: ScriptExhaustedError" in out
    assert out.count("ScriptExhaustedError") == 1, out

    from hpd_agent.handlers import serve

    handler, screen, _ = handler_for([])
    agent = Agent(
        "Waiter",
        model=ScriptedModel([tool_call("ask_user", question="Still there?")]),
        tools=[ask_user()],
    )
    async with agent.stream("go") as run:

        async def cancel_when_asked(event: Any) -> None:
            await original(event)
            if isinstance(event, ClarificationRequest):
                run.cancel()

        original = handler.on_event
        handler.on_event = cancel_when_asked  # type: ignore[method-assign]
        await serve(run, handler)
    out = screen.text()
    assert "Waiter's question ended: cancelled" in out
    assert "Run cancelled." in out


# Escape sequences and controls a hostile model or tool could send to take over the terminal:
# clear screen + retitle the window (OSC), colours (CSI), a one-byte CSI, bell, backspace
# over text, a carriage return that overwrites the line, and a right-to-left override.
_HOSTILE = "\x1b[2J\x1b]0;pwned\x07\x1b[31mred\x9b0m ok\x08\x08XX\rFAKE \u202eevil"
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


async def test_controls_from_models_and_tools_are_shown_not_obeyed() -> None:
    @tool
    async def fetch(url: str) -> str:
        """Fetch a page.

        Args:
            url: Where.
        """
        return "page " + _HOSTILE

    model = ScriptedModel(
        [
            tool_call("fetch", url=_HOSTILE),
            tool_call("ask_user", question="Pick " + _HOSTILE, options=["a\x1b[8m", "b"]),
            text("line one\r\nline two\t" + _HOSTILE),
        ],
        chunk_size=3,
    )
    agent = Agent("A", model=model, tools=[fetch, ask_user()])
    handler, screen, _ = handler_for(["1"])
    await agent.run("go", handler=handler)
    out = screen.text()
    assert _CONTROLS.search(out) is None, repr(_CONTROLS.findall(out))
    assert "\\x1b[2J\\x1b]0;pwned\\x07\\x1b[31mred\\x9b0m ok\\x08\\x08XXFAKE \\u202eevil" in out
    assert "line one\nline two " in out  # layout survives (rich expands the tab)
    assert "a\\x1b[8m" in out  # an option's hidden-text sequence is visible


def _writer_pair() -> Agent:
    """Root calls the sub-agent "Writer" twice in one turn (queries alpha and beta). Both
    calls stream in turns (alpha, beta, alpha, beta), then each asks about its own query;
    each call's final answer names its query and the answer it got."""
    from hpd_agent.messages import ToolCall
    from hpd_agent.models import Model, ModelResponse

    both = anyio.Event()
    turns = {"alpha": anyio.Event(), "beta": anyio.Event()}
    started: list[str] = []

    class Turns(Model):
        async def request(
            self, messages: Sequence[Message], params: ModelRequestParams
        ) -> ModelResponse:
            query = last_user_text(messages) or ""
            answers = tool_results(messages)
            if answers:
                return ModelResponse(text=f"{query} got {answers[-1]}")
            assert params.on_text is not None
            started.append(query)
            if len(started) == 2:
                both.set()
            await both.wait()  # both calls are live before either speaks
            if query == "beta":
                await turns["alpha"].wait()
            params.on_text(f"{query} one, ")
            turns[query].set()
            if query == "alpha":
                await turns["beta"].wait()
            params.on_text(f"{query} two.")
            ask = ToolCall(
                id="ask",
                name="ask_user",
                arguments=json.dumps({"question": f"detail for {query}?"}),
            )
            return ModelResponse(
                text=f"{query} one, {query} two.",
                tool_calls=(ask,),
                finish_reason="tool_calls",
                streamed=True,
            )

    writer = Agent("Writer", model=Turns(), tools=[ask_user()])

    def plan(messages: Sequence[Message], info: ModelRequestParams) -> Any:
        if not tool_results(messages):
            return [tool_call("Writer", query="alpha"), tool_call("Writer", query="beta")]
        return text(" | ".join(tool_results(messages)))

    return Agent("Root", model=FunctionModel(plan), tools=[writer.as_tool()])


async def test_two_calls_of_one_agent_stream_and_ask_each_in_its_own_place() -> None:
    root = _writer_pair()
    screen = Screen()

    def answer_the_question_on_screen() -> str:
        # Whichever call's question is shown last is the one being asked: name it.
        out = screen.text()
        asked = max(("alpha", "beta"), key=lambda q: out.rfind(f"asks: detail for {q}?"))
        return f"answer for {asked}"

    keyboard = Keyboard(screen, [answer_the_question_on_screen] * 2)
    result = await root.run("go", handler=ConsoleHandler(console_for(screen), input=keyboard))
    # Each answer reached the call that asked.
    assert result.output == "alpha got answer for alpha | beta got answer for beta"
    out = screen.text()
    # The two calls' text is never merged into one block: each has its own, labelled with
    # the call (its number and query), while they run side by side.
    label = {q: re.search(rf"Root > Writer #(\d) \({q}\)", out) for q in ("alpha", "beta")}
    assert label["alpha"] and label["beta"], out
    assert {label["alpha"].group(1), label["beta"].group(1)} == {"1", "2"}
    for q in ("alpha", "beta"):
        who = label[q].group(0)
        own = [line[len(who) + 2 :] for line in out.splitlines() if line.startswith(f"{who}: ")]
        assert " ".join(own) == f"{q} one, {q} two. {q} got answer for {q}"
        assert f"? {who} asks: detail for {q}?" in out
        assert f"{who} → ask_user(question='detail for {q}?')" in out
    for line in out.splitlines():
        if line.startswith("Root > Writer"):
            assert not ("alpha" in line and "beta" in line), line


async def test_a_question_declined_elsewhere_says_so() -> None:
    from hpd_agent.handlers import serve

    handler, screen, _ = handler_for([])
    agent = Agent(
        "Waiter",
        model=ScriptedModel([tool_call("ask_user", question="Your age?"), text("fine")]),
        tools=[ask_user()],
    )
    async with agent.stream("go") as run:

        async def decline_when_asked(event: Any) -> None:
            await original(event)
            if isinstance(event, ClarificationRequest):
                await run.respond(event.request_id, Decline())  # e.g. another UI

        original = handler.on_event
        handler.on_event = decline_when_asked  # type: ignore[method-assign]
        await serve(run, handler)
    assert run.result.output == "fine"
    out = screen.text()
    assert "Waiter's question was declined" in out
    assert "ended:" not in out


async def test_a_kind_of_the_apps_own_is_asked_by_its_label_schema_and_reader() -> None:
    from rating_kind import rate_plan

    model = ScriptedModel([tool_call("rate_plan"), text("done")])
    agent = Agent("Planner", model=model, tools=[rate_plan])
    handler, screen, keyboard = handler_for(["lots", "9", "****"])
    await agent.run("plan", handler=handler)
    assert tool_results(model.requests[-1]) == ["rated 4 of 5"]
    out = screen.text()
    assert "? Planner asks: How good was the plan?\n  Rate 1–5: type a whole number" in out
    assert "type a whole number from 1 to 5" in out
    assert "Rate from 1 to 5: type 4, 4/5 or ****." in out  # the kind's reader refused "lots"
    assert "9 is greater than the maximum of 5" in out  # checked here before it is sent
    assert len(keyboard.prompts) == 3


async def test_a_kind_unknown_here_is_asked_from_the_label_and_schema_it_carries() -> None:
    request = dataclasses.replace(
        _question("ticket.priority"), answer_schema={"enum": ["low", "high"]}, label="Priority"
    )
    handler, screen, _ = handler_for(["3", "2"])
    assert await handler.on_request(request) == "high"
    out = screen.text()
    assert "  1) low\n  2) high\n  Priority: type a number from 1 to 2" in out
    assert "There is no option 3: type a number from 1 to 2" in out


async def test_yes_answers_a_kind_of_the_apps_own_with_its_default_or_declines_it() -> None:
    screen = Screen()
    handler = ConsoleHandler(console_for(screen), input=lambda p: "", assume_yes=True)
    schema: dict[str, Any] = {"type": "integer", "minimum": 1, "maximum": 5}
    asked = dataclasses.replace(_question("rating"), answer_schema=schema, label="Rate 1–5")
    assert await handler.on_request(asked) == Decline()  # nobody can rate unattended
    with_default = dataclasses.replace(asked, answer_schema={**schema, "default": 3})
    assert await handler.on_request(with_default) == 3
    assert "(answered automatically: declined)" in screen.text()


async def test_a_long_multi_line_string_argument_is_folded_not_escaped() -> None:
    @tool(requires_approval=True)
    def write_file(path: str, text: str) -> str:
        """Write a file.

        Args:
            path: Where.
            text: What.
        """
        return f"wrote {path}"

    body = "".join(f"line {i}: {'x' * 20}\n" for i in range(1, 21))
    agent = Agent(
        "Coder",
        model=ScriptedModel([tool_call("write_file", path="a.py", text=body), text("ok")]),
        tools=[write_file],
    )
    handler, screen, _ = handler_for(["1"])
    await agent.run("write it", handler=handler)
    out = screen.text()
    # Before: one row, text='line 1: xxx\nline 2: ...' escaped and cut at 160 characters.
    assert "\\n" not in out
    row = "  Coder → write_file(path='a.py', text=…)\n"
    folded = f"    text: (20 lines)\n    │ line 1: {'x' * 20}\n    │ line 2: {'x' * 20}\n"
    assert row + folded + f"    │ line 3: {'x' * 20}\n    … (17 more lines)\n" in out
    # The permission request shows more of it (what is approved), folded the same way.
    assert f"  │ line 8: {'x' * 20}\n  … (12 more lines)\n" in out
    assert "line 9:" not in out


def _three_askers() -> Agent:
    """Root calls Alpha, Beta and Gamma at once; each asks its own question."""
    agents = []
    for name in ("Alpha", "Beta", "Gamma"):

        def fn(messages: Sequence[Message], info: ModelRequestParams, n: str = name) -> Any:
            answers = tool_results(messages)
            if not answers:
                return tool_call("ask_user", question=f"{n}'s question?")
            return text(f"{n} got {answers[-1]}")

        agents.append(Agent(name, model=FunctionModel(fn), tools=[ask_user()]).as_tool())

    def plan(messages: Sequence[Message], info: ModelRequestParams) -> Any:
        if not tool_results(messages):
            return [tool_call(n, query="go") for n in ("Alpha", "Beta", "Gamma")]
        return text(" | ".join(tool_results(messages)))

    return Agent("Root", model=FunctionModel(plan), tools=agents)


def _asked_last(out: str) -> str:
    return max(("Alpha", "Beta", "Gamma"), key=lambda n: out.rfind(f"? Root > {n} asks:"))


def _answer_once_both_others_wait(screen: Screen) -> Callable[[], str]:
    """Types the first answer once the two other questions are queued behind it."""

    def answer() -> str:
        asked = _asked_last(screen.text())
        for other in {"Alpha", "Beta", "Gamma"} - {asked}:
            screen.appeared(f"Root > {other} also needs you: queued").wait(timeout=20)
        return f"answer for {asked}"

    return answer


async def test_the_person_picks_which_waiting_question_to_answer_next() -> None:
    screen = Screen()
    listed: list[str] = []

    def pick(typed: str) -> Callable[[], str]:
        def choose() -> str:
            out = screen.text()
            listed.append(out[out.rindex("questions wait: which first?") :])
            return typed

        return choose

    def answer_what_is_asked() -> str:
        return f"answer for {_asked_last(screen.text())}"

    lines = [_answer_once_both_others_wait(screen), pick("7"), pick("2"), answer_what_is_asked]
    keyboard = Keyboard(screen, [*lines, answer_what_is_asked])
    handler = ConsoleHandler(console_for(screen), input=keyboard, pick=True)
    result = await _three_askers().run("ask all", handler=handler)
    # Every answer reached the agent whose question was on screen.
    assert result.output == (
        "Alpha got answer for Alpha | Beta got answer for Beta | Gamma got answer for Gamma"
    )
    # After the first answer two questions waited: listed, numbered, and the one typed
    # ("2") was asked next; a number not listed was refused first.
    assert keyboard.prompts == ["> ", "Answer which? [1] ", "Answer which? [1] ", "> ", "> "]
    second = re.search(r"  2\) Root > (\w+) asks: \1's question\?", listed[-1])
    assert second is not None, listed
    assert "Type a number from 1 to 2, or press Enter for 1." in screen.text()
    assert _asked_last(keyboard.seen[3]) == second.group(1)


async def test_an_exit_word_at_the_list_of_waiting_questions_leaves() -> None:
    screen = Screen()

    keyboard = Keyboard(screen, [_answer_once_both_others_wait(screen), "/quit", "never read"])
    handler = ConsoleHandler(console_for(screen), input=keyboard, pick=True)
    result = await _three_askers().run("ask all", handler=handler)
    assert result.status == "cancelled"
    assert keyboard.prompts == ["> ", "Answer which? [1] "]  # nothing more was asked
    assert "You left (/quit), so the run is cancelled" in screen.text()
    assert handler.left


async def test_questions_tool_rows_and_permission_arguments_wrap_to_the_width() -> None:
    @tool(requires_approval=True)
    def fetch(url: str) -> str:
        """Fetch a page.

        Args:
            url: Where.
        """
        return "fetched " + url

    long_word = "https://example.test/" + "a" * 50
    question = "Which of these very many words should the research agent use to search next?"
    inner = Agent(
        "ResearchAgent",
        model=ScriptedModel(
            [
                tool_call("ask_user", question=question, options=["first option", long_word]),
                tool_call("fetch", url=long_word),
                text("done"),
            ]
        ),
        tools=[ask_user(), fetch],
    )
    root = Agent(
        "Orchestrator",
        model=ScriptedModel([tool_call("ResearchAgent", query="look it up"), text("ok")]),
        tools=[inner.as_tool()],
    )
    screen = Screen()
    console = Console(file=screen, width=40, color_system=None, force_terminal=False)
    handler = ConsoleHandler(console, input=Keyboard(screen, ["2", "1"]))
    await root.run("go", handler=handler)
    lines = screen.text().splitlines()
    # Before: the question, its options, the tool row and the URL were one line each.
    assert [line for line in lines if len(line) > 40] == []
    at = lines.index("? Orchestrator > ResearchAgent asks:")
    assert lines[at + 1 : at + 3] == [
        "  Which of these very many words should",
        "  the research agent use to search next?",
    ]
    # A word too long for a line is cut across lines, nothing of it lost.
    flat = "".join(line.strip() for line in lines)
    assert flat.count(long_word) >= 4  # the option, the row, the argument, the result


async def test_an_answer_typed_at_the_console_is_the_os_users_on_channel_console() -> None:
    from hpd_agent.events import ClarificationResolved, Event
    from hpd_agent.governance import os_user
    from hpd_agent.hooks import Hook

    told: list[tuple[str | None, str | None]] = []

    class Watch(Hook):
        def request_resolved(
            self, event: Any, status: Any, answer: Any, author: Any = None
        ) -> None:
            told.append((author.by, author.channel))

    seen: list[Event] = []

    class Seeing(ConsoleHandler):
        async def on_event(self, event: Event) -> None:
            seen.append(event)
            await super().on_event(event)

    agent = Agent(
        "A", model=ScriptedModel([tool_call("ask_user", question="Colour?"), text("ok")]),
        tools=[ask_user()],
    )  # fmt: skip
    for kw, who in (({}, os_user()), ({"answered_by": "ops-desk"}, "ops-desk")):
        screen = Screen()
        handler = Seeing(console_for(screen), input=Keyboard(screen, ["red"]), **kw)
        await agent.run("go", handler=handler, hooks=[Watch()])
        agent.model.reset()  # type: ignore[attr-defined]
        resolved = [e for e in seen if isinstance(e, ClarificationResolved)][-1]
        assert (resolved.answered_by, resolved.channel, resolved.answer) == (who, "console", "red")
    assert told == [(os_user(), "console"), ("ops-desk", "console")]


async def test_permission_prompt_offers_always_a_remembered_grant_shown_when_it_approves() -> None:
    from hpd_agent.governance import os_user
    from hpd_agent.permissions import PROCESS_GRANTS

    written: list[str] = []

    @tool(requires_approval=True)
    def write_file(path: str) -> str:
        """Write a file."""
        written.append(path)
        return f"wrote {path}"

    PROCESS_GRANTS.clear()
    try:
        for path in ("a.py", "b.py"):  # two runs of the same agent, in this process
            model = ScriptedModel([tool_call("write_file", path=path), text("finished")])
            agent = Agent("Coder", model=model, tools=[write_file])
            handler, screen, keyboard = handler_for(["4"])
            await agent.run("write", handler=handler)
            out = screen.text()
            if path == "a.py":
                assert "4) always (remembered)" in out and keyboard.prompts == ["> "]
                assert "✓ write_file approved always (a remembered grant) (Coder)" in out
                [grant] = await PROCESS_GRANTS.list_grants()
                assert (grant.granted_by, grant.channel) == (os_user(), "console")
        # The second run was not asked: one line says which grant approved the call.
        assert keyboard.prompts == [] and written == ["a.py", "b.py"]
        assert f"✓ Coder runs write_file: approved by grant {grant.grant_id}" in out
    finally:
        PROCESS_GRANTS.clear()
