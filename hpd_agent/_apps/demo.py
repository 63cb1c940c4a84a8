"""The agents of ``hpd-agent demo`` and ``hpd-agent chat``.

The demo shows the headline in one screen. The Orchestrator sends a ResearchAgent and a
CodingAgent off in parallel on the user's task; the CodingAgent calls a Clarifier, two levels
down, which asks the user which framework to use in the middle of its turn; the ResearchAgent
asks where the data should live at the same time. Both questions wait together and are
answered out of order (the deeper one first): each answer goes back by request id into the
turn that asked, and the Clarifier, then the CodingAgent, go on from there; the CodingAgent
finally asks before ``write_file`` writes the code.

Offline (no model given) every agent is a ``FunctionModel`` that reads the conversation and
reacts to it, so the task and what the user types really change what happens next. Given a
litellm model string, the same agents run on that model with instructions that ask for the
same flow.
"""

from __future__ import annotations

import atexit
import dataclasses
import functools
import json
import re
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
from rich.console import Console
from rich.markup import escape

from ..agent import Agent
from ..clarification import ask_user
from ..events import (
    AgentFinished,
    ClarificationRequest,
    Event,
    PermissionRequest,
    RequestEvent,
    ToolCallFinished,
    ToolCallStarted,
)
from ..handlers import ConsoleHandler
from ..messages import AssistantMessage, Message, ToolCall, ToolResultMessage, Usage, UserMessage
from ..models import Model, ModelRequestParams, ModelResponse
from ..testing import FunctionModel
from ..testing._models import Step
from ..tools import Tool

__all__ = [
    "FRAMEWORKS",
    "STORES",
    "DemoConsole",
    "DemoModel",
    "chat_agent",
    "demo_agents",
    "write_file_tool",
]

FRAMEWORKS = ("Express", "FastAPI", "Django")
"""The choices the Clarifier asks the user for."""

STORES = ("SQLite", "PostgreSQL")
"""The choices the ResearchAgent asks the user for."""

DEFAULT_PROMPT = "Build a todo API"

_ORCHESTRATOR_INSTRUCTIONS = """You coordinate a small team to fulfil the user's task. In your first turn call both
ResearchAgent (where the task's data should live) and CodingAgent (build the task), in the
same turn so they work in parallel, passing each the task in full. Do not ask the user
anything yourself: the sub-agents ask what they need. When both have answered, end with a
two-sentence summary naming the framework, the data store and the file written."""

_CODING_INSTRUCTIONS = """You build code. First call Clarifier with the task, to settle which web framework to use:
never pick one yourself. Then write a short, working skeleton of the task in that framework
into a single file with write_file. Reply with one sentence naming the framework and the
file (or saying the file was not written, and why)."""

_CLARIFIER_INSTRUCTIONS = f"""You settle the decisions only the user can make. Ask the user with ask_user which web
framework to use for the task, with the options {", ".join(FRAMEWORKS)}. Reply with one
sentence that names the framework the user chose."""

_RESEARCH_INSTRUCTIONS = f"""You research where a task's data should live. Ask the user with ask_user, with the options
{", ".join(STORES)}, then reply with one sentence naming the choice and one reason for it."""


# -- offline models --------------------------------------------------------------------------
class DemoModel(Model):
    """An offline stand-in: a ``FunctionModel`` whose text streams word by word at a pace.

    Args:
        fn: Computes each turn from the conversation (see ``FunctionModel``).
        name: A label.
        pace: Seconds between streamed words (0 streams them as fast as possible).
    """

    def __init__(
        self,
        fn: Callable[[Sequence[Message], ModelRequestParams], Step],
        *,
        name: str,
        pace: float = 0.0,
    ) -> None:
        self.name = name
        self.pace = pace
        self._inner = FunctionModel(fn, name=name)

    async def request(
        self, messages: Sequence[Message], params: ModelRequestParams
    ) -> ModelResponse:
        """Compute the turn, then stream its text in word-sized pieces."""
        on_text = params.on_text
        response = await self._inner.request(messages, dataclasses.replace(params, on_text=None))
        text = response.text or ""
        if on_text is not None and text:
            for piece in re.findall(r"\S+\s*|\s+", text):
                on_text(piece)
                if self.pace:
                    await anyio.sleep(self.pace)  # pacing so a person can watch it stream
        words = len(text.split())
        return ModelResponse(
            text=response.text,
            tool_calls=response.tool_calls,
            usage=Usage(requests=1, input_tokens=_tokens(messages), output_tokens=words),
            streamed=on_text is not None and bool(text),
            finish_reason=response.finish_reason,
        )


def _tokens(messages: Sequence[Message]) -> int:
    total = 0
    for m in messages:
        content = getattr(m, "content", None)
        total += len(content.split()) if isinstance(content, str) else 0
    return total


def _results(messages: Sequence[Message]) -> list[ToolResultMessage]:
    return [m for m in messages if isinstance(m, ToolResultMessage)]


def _task(messages: Sequence[Message]) -> str:
    """The task this agent was given: its first user message."""
    return next((m.content for m in messages if isinstance(m, UserMessage)), DEFAULT_PROMPT)


def _named_in(text: str, names: Sequence[str]) -> str | None:
    """The one of ``names`` that ``text`` names (a word match, any case), if exactly one."""
    found = [n for n in names if re.search(rf"\b{n}\b", text, re.IGNORECASE)]
    return found[0] if len(found) == 1 else None


def _turn(text: str | None, *calls: tuple[str, dict[str, object]], turn: int) -> ModelResponse:
    return ModelResponse(
        text=text,
        tool_calls=tuple(
            ToolCall(id=f"call_{turn}_{i}", name=name, arguments=json.dumps(args))
            for i, (name, args) in enumerate(calls)
        ),
        usage=Usage(requests=1),
    )


def _orchestrator(messages: Sequence[Message], info: ModelRequestParams) -> Step:
    task = _task(messages)
    results = {r.name: r.content.strip() for r in _results(messages)}
    if not results:
        return _turn(
            f"Splitting {task!r}: the ResearchAgent looks at storage while the CodingAgent "
            "builds, in parallel.\n",
            ("ResearchAgent", {"query": task}),
            ("CodingAgent", {"query": task}),
            turn=info.turn,
        )
    return _turn(
        f"Done: {results.get('CodingAgent', '')} {results.get('ResearchAgent', '')}".rstrip(),
        turn=info.turn,
    )


def _research(messages: Sequence[Message], info: ModelRequestParams) -> Step:
    task = _task(messages)
    results = _results(messages)
    if not results:
        question = f"Where should the data of {task!r} live?"
        return _turn(
            None, ("ask_user", {"question": question, "options": list(STORES)}), turn=info.turn
        )
    store = _named_in(results[-1].content, STORES) or STORES[0]
    why = "one file, nothing to run" if store == "SQLite" else "many writers at once"
    return _turn(f"Data goes in {store} ({why}).", turn=info.turn)


def _clarifier(messages: Sequence[Message], info: ModelRequestParams) -> Step:
    task = _task(messages)
    results = _results(messages)
    if not results:
        question = f"Which web framework should {task!r} use?"
        return _turn(
            None,
            ("ask_user", {"question": question, "options": list(FRAMEWORKS)}),
            turn=info.turn,
        )
    chosen = _named_in(results[-1].content, FRAMEWORKS)
    if chosen is None:
        return _turn(
            f"The user named no framework ({results[-1].content.strip()!r}); use {FRAMEWORKS[0]}.",
            turn=info.turn,
        )
    return _turn(f"The user chose {chosen}.", turn=info.turn)


def _coder(messages: Sequence[Message], info: ModelRequestParams) -> Step:
    task = _task(messages)
    results = _results(messages)
    if not results:
        return _turn(
            f"Before I write code for {task!r}, the Clarifier settles the framework with you.\n",
            ("Clarifier", {"query": task}),
            turn=info.turn,
        )
    framework = _named_in(results[0].content, FRAMEWORKS) or FRAMEWORKS[0]
    filename, code = _code(framework, task)
    if len(results) == 1:
        return _turn(
            f"The Clarifier answered within my turn: {framework}. Writing {filename}.\n",
            ("write_file", {"path": filename, "text": code}),
            turn=info.turn,
        )
    outcome = results[-1].content
    if outcome.startswith("wrote"):
        return _turn(f"Built {task!r} with {framework} in {filename}.", turn=info.turn)
    return _turn(
        f"I did not write {filename} ({outcome.strip()}); the {framework} code is ready when "
        "you want it.",
        turn=info.turn,
    )


def _code(framework: str, task: str) -> tuple[str, str]:
    """The file the offline CodingAgent writes: a skeleton of ``task`` in ``framework``."""
    title = json.dumps(task)
    if framework == "Express":
        return "app.js", (
            f"// {task}: built with Express\n"
            'const express = require("express");\n\n'
            "const app = express();\napp.use(express.json());\nconst items = [];\n\n"
            f'app.get("/", (req, res) => res.json({{ task: {title} }}));\n'
            'app.get("/items", (req, res) => res.json(items));\n'
            'app.post("/items", (req, res) => {\n  items.push(req.body);\n'
            "  res.status(201).json(req.body);\n});\n\napp.listen(3000);\n"
        )
    if framework == "FastAPI":
        return "app.py", (
            f'"""{task}: built with FastAPI."""\n'
            "from typing import Any\n\nfrom fastapi import FastAPI\n\n"
            f"app = FastAPI(title={title})\nitems: list[dict[str, Any]] = []\n\n\n"
            '@app.get("/items")\ndef list_items() -> list[dict[str, Any]]:\n    return items\n\n\n'
            '@app.post("/items", status_code=201)\n'
            "def add_item(item: dict[str, Any]) -> dict[str, Any]:\n"
            "    items.append(item)\n    return item\n"
        )
    return "views.py", (
        f'"""{task}: built with Django (views; route them in urls.py)."""\n'
        "import json\n\nfrom django.http import JsonResponse\n"
        "from django.views.decorators.http import require_http_methods\n\n"
        "ITEMS: list[dict] = []\n\n\n"
        '@require_http_methods(["GET", "POST"])\ndef items(request):\n'
        '    if request.method == "POST":\n'
        "        ITEMS.append(json.loads(request.body))\n"
        "        return JsonResponse(ITEMS[-1], status=201)\n"
        "    return JsonResponse(ITEMS, safe=False)\n"
    )


# -- tools and agents --------------------------------------------------------------------------
def write_file_tool(workdir: Path) -> Tool:
    """A ``write_file`` tool confined to ``workdir``, which needs the user's approval."""
    root = workdir.resolve()

    async def write_file(path: str, text: str) -> str:
        """Write a text file in the work directory.

        Args:
            path: File name, relative to the work directory.
            text: The file's full content.
        """
        target = (root / path).resolve()
        if root != target and root not in target.parents:
            raise ValueError(f"{path!r} is outside the work directory")
        await anyio.Path(target.parent).mkdir(parents=True, exist_ok=True)
        await anyio.Path(target).write_text(text)
        return f"wrote {len(text.splitlines())} lines to {target.name}"

    return Tool(write_file, requires_approval=True)


def _temporary_workdir() -> Path:
    """A new temporary directory, removed when the process exits."""
    path = tempfile.mkdtemp(prefix="hpd-agent-demo-")
    atexit.register(functools.partial(shutil.rmtree, path, ignore_errors=True))
    return Path(path)


def demo_agents(
    model: str | None = None,
    *,
    workdir: str | None = None,
    pace: float = 0.0,
    api_base: str | None = None,
) -> Agent:
    """The demo's Orchestrator, with its ResearchAgent and CodingAgent (and its Clarifier).

    Args:
        model: A litellm model string for every agent; None runs offline scripted agents.
        workdir: Where ``write_file`` writes; a temporary directory, removed when the
            process exits, when omitted.
        pace: Offline only: seconds between streamed words, so a person can follow.
        api_base: With ``model``: the endpoint of an OpenAI-compatible server.
    """
    root = Path(workdir) if workdir else _temporary_workdir()
    root.mkdir(parents=True, exist_ok=True)

    def pick(fn: Callable[[Sequence[Message], ModelRequestParams], Step], name: str) -> str | Model:
        return model if model else DemoModel(fn, name=name, pace=pace)

    endpoint = api_base if model else None

    clarifier = Agent(
        "Clarifier",
        model=pick(_clarifier, "clarifier"),
        api_base=endpoint,
        instructions=_CLARIFIER_INSTRUCTIONS,
        tools=[ask_user()],
        description="Asks the user the decisions only they can make (the web framework).",
    )
    coder = Agent(
        "CodingAgent",
        model=pick(_coder, "coding"),
        api_base=endpoint,
        instructions=_CODING_INSTRUCTIONS,
        tools=[clarifier.as_tool(), write_file_tool(root)],
        description="Builds the task. Give it the task in full.",
    )
    researcher = Agent(
        "ResearchAgent",
        model=pick(_research, "research"),
        api_base=endpoint,
        instructions=_RESEARCH_INSTRUCTIONS,
        tools=[ask_user()],
        description="Finds out where the task's data should live.",
    )
    return Agent(
        "Orchestrator",
        model=pick(_orchestrator, "orchestrator"),
        api_base=endpoint,
        instructions=_ORCHESTRATOR_INSTRUCTIONS,
        tools=[researcher.as_tool(), coder.as_tool()],
    )


QUESTIONS_TOGETHER = 2
"""How many questions the offline demo raises at once (the ResearchAgent's, the Clarifier's)."""


class DemoConsole(ConsoleHandler):
    """The demo's console: parallel questions out of order, one screen, nothing twice.

    - The first ``together`` questions are gathered before the first is asked; then the
      deepest is asked first (at a terminal the person may pick another: see
      ``ConsoleHandler``'s ``pick``), so the order they are answered in is not the order
      they were asked in (answers go back by request id). The next one waits until the
      answered branch has gone on: finished, or asked something new, so the screen shows
      the sub-agent carrying on.
    - While the human is asked, the run's other events are held and shown after the
      answer, so a prompt is never broken up by streaming text.
    - Nothing is printed twice: a question is shown once (not also as its ``ask_user``
      call), and a sub-agent's answer streamed as it was written is not printed again as
      its tool call's result.

    Args:
        console: Where to print.
        together: How many questions to gather before asking the first (0: ask at once).
        **options: As for ``ConsoleHandler`` (``echo``, ``pick``, ``assume_yes``...).
    """

    def __init__(
        self, console: Console | None = None, *, together: int = 0, **options: Any
    ) -> None:
        super().__init__(console, **options)
        self._together = together
        self._gathered = together <= 1
        self._settling: tuple[str, ...] | None = None  # the branch we wait to see go on
        self._later: list[Event] = []
        self._streamed_calls: set[str] = set()

    async def on_event(self, event: Event) -> None:
        """Show the event, or hold it while the human is asked."""
        if self.busy:
            self._later.append(event)
            return
        await self._show(event)

    async def _show(self, event: Event) -> None:
        settling = self._settling
        if settling is not None and (
            isinstance(event, (ClarificationRequest, PermissionRequest))
            or (isinstance(event, AgentFinished) and event.agent_path == settling)
        ):
            self._settling = None
            # A new request wakes the queue itself once it has joined it (on_request, right
            # after this event): the next turn is then chosen with it among those waiting.
            if not isinstance(event, (ClarificationRequest, PermissionRequest)) or event.replayed:
                self._wake()
        if isinstance(event, AgentFinished) and event.tool_call_id and event.output:
            self._streamed_calls.add(event.tool_call_id)
        if isinstance(event, (ClarificationRequest, PermissionRequest)):
            return  # shown when it is asked
        if isinstance(event, ToolCallStarted) and event.tool_name == "ask_user":
            return  # the question itself is shown when it is asked
        if isinstance(event, ToolCallFinished) and not event.is_error:
            if event.tool_name == "ask_user":
                if self.left:
                    return  # the run is being cancelled: no turn goes on
                self._printer.line(
                    f"  [green]↳[/] {escape(self._printer.short(event.result))} [dim]goes back into[/] "
                    f"{self._printer.label(event.agent_path)}[dim]'s turn, which goes on[/]"
                )
                return
            if event.tool_call_id in self._streamed_calls:
                return  # the sub-agent's answer streamed just above
        await super().on_event(event)

    def _ready(self) -> bool:
        if not self._gathered and len(self._waiting) >= self._together:
            self._gathered = True
            askers = ", ".join(self._printer.label(r.agent_path) for r in self._waiting)
            order = "pick either" if self.pick and not self.assume_yes else "the deepest first"
            self._printer.line(
                f"[bold]{len(self._waiting)} questions wait at once[/] (asked by {askers}, in "
                f"that order). Answers go back by request id, not by order: {order}."
            )
        return self._gathered and self._settling is None

    async def on_request(self, request: RequestEvent) -> Any:
        """Ask in the demo's order; show what happened meanwhile once answered."""
        gathering = not self._gathered
        try:
            return await super().on_request(request)
        finally:
            if gathering and self._waiting and not self.left:
                self._settling = request.agent_path[:2]
            if not self.busy:
                later, self._later = self._later, []
                for event in later:
                    await self._show(event)


def _chat(messages: Sequence[Message], info: ModelRequestParams) -> Step:
    said = [m.content for m in messages if isinstance(m, UserMessage)]
    last = messages[-1]
    if isinstance(last, ToolResultMessage):
        question = said[-1] if said else ""
        return _turn(
            f"You wanted a {last.content.strip().lower()} answer to {question!r}. I am the "
            "offline model, so that is all I can say; run with --model for a real one.",
            turn=info.turn,
        )
    current = said[-1] if said else ""
    if current.rstrip().endswith("?"):
        return _turn(
            None,
            (
                "ask_user",
                {
                    "question": "Do you want a short or a detailed answer?",
                    "options": ["Short", "Detailed"],
                },
            ),
            turn=info.turn,
        )
    replies = sum(isinstance(m, AssistantMessage) and not m.tool_calls for m in messages)
    if len(said) == 1:
        return _turn(f"You said {current!r}. Ask me something ending in '?'.", turn=info.turn)
    return _turn(
        f"You said {current!r}. This is message {len(said)} of our chat "
        f"({replies} replies so far); your first was {said[0]!r}.",
        turn=info.turn,
    )


def chat_agent(
    model: str | None = None, *, pace: float = 0.0, api_base: str | None = None
) -> Agent:
    """The agent of ``hpd-agent chat``: one assistant that can ask the user.

    Args:
        model: A litellm model string; None uses an offline model that remembers the chat.
        pace: Offline only: seconds between streamed words.
        api_base: With ``model``: the endpoint of an OpenAI-compatible server.
    """
    return Agent(
        "Assistant",
        model=model if model else DemoModel(_chat, name="chat", pace=pace),
        api_base=api_base if model else None,
        instructions=(
            "You are a helpful assistant. When the request is ambiguous or a choice is the "
            "user's, ask with ask_user instead of guessing."
        ),
        tools=[ask_user()],
    )
