"""The agents of ``hpd-agent demo`` and ``hpd-agent chat``.

The demo is the seed scenario: the Orchestrator sends a ResearchAgent and a CodingAgent off
in parallel; the CodingAgent answers "Which framework: Express, FastAPI or Django?"; the
Orchestrator asks the user (mid-turn); the CodingAgent builds with the answer and writes the
code with a permission-gated ``write_file``.

Offline (no model given) every agent is a ``FunctionModel`` that reads the conversation and
reacts to it, so what the user types really changes what happens next. Given a litellm model
string, the same agents run on that model with instructions that ask for the same flow.
"""

from __future__ import annotations

import dataclasses
import json
import re
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import anyio

from .agent import Agent
from .clarification import ask_user
from .messages import AssistantMessage, Message, ToolCall, ToolResultMessage, Usage, UserMessage
from .models import Model, ModelRequestParams, ModelResponse
from .testing import FunctionModel
from .testing._models import Step
from .tools import Tool

__all__ = ["FRAMEWORKS", "DemoModel", "chat_agent", "demo_agents", "write_file_tool"]

FRAMEWORKS = ("Express", "FastAPI", "Django")
"""The choices the CodingAgent asks the user for."""

FRAMEWORK_QUESTION = "Which framework: Express, FastAPI or Django?"

DEFAULT_PROMPT = "Build an auth system"

_ORCHESTRATOR_INSTRUCTIONS = """\
You coordinate a small team to fulfil the user's request. Call ResearchAgent for background
and CodingAgent to build, in the same turn so they work in parallel. When a sub-agent answers
with a question only the user can decide, ask the user with ask_user (offering the choices as
options), then call that sub-agent again with the user's answer spelled out. End with a short
summary of what was built and where."""

_CODING_INSTRUCTIONS = f"""\
You build code. If the request does not name the web framework to use, do not pick one:
reply with exactly this question and nothing else: {FRAMEWORK_QUESTION}
Once the framework is named, write the code into a single file with write_file (a short,
working auth app: register, login, a protected route, hashed passwords), then reply with a
two-sentence summary naming the framework and the file."""

_RESEARCH_INSTRUCTIONS = """\
You research best practices. Reply with three short bullet points relevant to the task."""


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


def _framework_in(text: str) -> str | None:
    """The framework named in ``text`` (a word match, any case), if exactly one is."""
    found = [f for f in FRAMEWORKS if re.search(rf"\b{f}\b", text, re.IGNORECASE)]
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
    prompt = next((m.content for m in messages if isinstance(m, UserMessage)), DEFAULT_PROMPT)
    results = _results(messages)
    if not results:
        return _turn(
            "I'll have the ResearchAgent look into best practices while the CodingAgent "
            "starts building.\n",
            ("ResearchAgent", {"query": f"Best practices for this task: {prompt}"}),
            ("CodingAgent", {"query": prompt}),
            turn=info.turn,
        )
    last = results[-1]
    coding = [r for r in results if r.name == "CodingAgent"]
    if last.name == "ask_user":
        chosen = _framework_in(last.content)
        note = ""
        if chosen is None:
            chosen = FRAMEWORKS[0]
            note = f" (no usable answer, so I'll go with {chosen})"
        return _turn(
            f"You chose {chosen}{note}. Back to the CodingAgent.\n",
            (
                "CodingAgent",
                {"query": f"{prompt}. Use {chosen}: the user chose {chosen}."},
            ),
            turn=info.turn,
        )
    if coding and coding[-1].content.rstrip().endswith("?"):
        return _turn(
            "The CodingAgent needs a decision only you can make.\n",
            (
                "ask_user",
                {
                    "question": coding[-1].content.strip(),
                    "context": "The CodingAgent builds the auth system with it.",
                    "options": list(FRAMEWORKS),
                },
            ),
            turn=info.turn,
        )
    research = next((r.content for r in results if r.name == "ResearchAgent"), "")
    built = coding[-1].content if coding else "Nothing was built."
    return _turn(
        f"Summary: {built}\nResearch notes the build follows: {research}",
        turn=info.turn,
    )


def _coder(workdir: Path) -> Callable[[Sequence[Message], ModelRequestParams], Step]:
    def coder(messages: Sequence[Message], info: ModelRequestParams) -> Step:
        query = next((m.content for m in messages if isinstance(m, UserMessage)), "")
        framework = _framework_in(query)
        if framework is None:
            return _turn(FRAMEWORK_QUESTION, turn=info.turn)
        filename, code = _CODE[framework]
        results = _results(messages)
        if not results:
            return _turn(
                f"Building the auth system with {framework}: register, login and a "
                f"protected route, passwords hashed. Writing {filename}.\n",
                ("write_file", {"path": filename, "text": code}),
                turn=info.turn,
            )
        outcome = results[-1].content
        if outcome.startswith("wrote"):
            return _turn(
                f"Built the auth system with {framework} in {filename}: /register, /login "
                f"and a protected /me route, with hashed passwords and signed tokens.",
                turn=info.turn,
            )
        return _turn(
            f"I did not write {filename} ({outcome}). The {framework} code is ready "
            "whenever you want it written.",
            turn=info.turn,
        )

    return coder


def _researcher(messages: Sequence[Message], info: ModelRequestParams) -> Step:
    return _turn(
        "Hash passwords with argon2id or bcrypt; issue short-lived signed tokens and rotate "
        "refresh tokens; rate-limit login attempts and never log credentials.",
        turn=info.turn,
    )


_CODE: dict[str, tuple[str, str]] = {
    "Express": (
        "auth.js",
        """// Auth system built with Express
const express = require("express");
const bcrypt = require("bcrypt");
const jwt = require("jsonwebtoken");

const app = express();
app.use(express.json());
const users = new Map();
const SECRET = process.env.JWT_SECRET;

app.post("/register", async (req, res) => {
  users.set(req.body.username, await bcrypt.hash(req.body.password, 12));
  res.status(201).end();
});

app.post("/login", async (req, res) => {
  const hash = users.get(req.body.username);
  if (!hash || !(await bcrypt.compare(req.body.password, hash))) return res.status(401).end();
  res.json({ token: jwt.sign({ sub: req.body.username }, SECRET, { expiresIn: "15m" }) });
});

app.get("/me", (req, res) => {
  try {
    const token = (req.headers.authorization || "").replace("Bearer ", "");
    res.json({ user: jwt.verify(token, SECRET).sub });
  } catch {
    res.status(401).end();
  }
});

app.listen(3000);
""",
    ),
    "FastAPI": (
        "auth_app.py",
        '''"""Auth system built with FastAPI."""
import os

import jwt
from fastapi import Depends, FastAPI, HTTPException
from fastapi.security import OAuth2PasswordBearer, OAuth2PasswordRequestForm
from passlib.hash import argon2

app = FastAPI()
users: dict[str, str] = {}
SECRET = os.environ["JWT_SECRET"]
oauth2 = OAuth2PasswordBearer(tokenUrl="login")


@app.post("/register", status_code=201)
def register(form: OAuth2PasswordRequestForm = Depends()) -> None:
    users[form.username] = argon2.hash(form.password)


@app.post("/login")
def login(form: OAuth2PasswordRequestForm = Depends()) -> dict[str, str]:
    hashed = users.get(form.username)
    if hashed is None or not argon2.verify(form.password, hashed):
        raise HTTPException(401)
    return {"access_token": jwt.encode({"sub": form.username}, SECRET), "token_type": "bearer"}


@app.get("/me")
def me(token: str = Depends(oauth2)) -> dict[str, str]:
    try:
        return {"user": jwt.decode(token, SECRET, algorithms=["HS256"])["sub"]}
    except jwt.PyJWTError:
        raise HTTPException(401) from None
''',
    ),
    "Django": (
        "auth_views.py",
        '''"""Auth system built with Django (views for django.contrib.auth)."""
from django.contrib.auth import authenticate, login
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.http import HttpResponse, JsonResponse
from django.views.decorators.http import require_POST


@require_POST
def register(request):
    User.objects.create_user(request.POST["username"], password=request.POST["password"])
    return HttpResponse(status=201)


@require_POST
def login_view(request):
    user = authenticate(request, username=request.POST["username"], password=request.POST["password"])
    if user is None:
        return HttpResponse(status=401)
    login(request, user)
    return HttpResponse(status=204)


@login_required
def me(request):
    return JsonResponse({"user": request.user.username})
''',
    ),
}


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
        return f"wrote {len(text.splitlines())} lines to {target}"

    return Tool(write_file, requires_approval=True)


def demo_agents(
    model: str | None = None, *, workdir: str | None = None, pace: float = 0.0
) -> Agent:
    """The demo's Orchestrator, with its CodingAgent and ResearchAgent as tools.

    Args:
        model: A litellm model string for every agent; None runs offline scripted agents.
        workdir: Where ``write_file`` writes; a new temporary directory when omitted.
        pace: Offline only: seconds between streamed words, so a person can follow.
    """
    root = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="hpd-agent-demo-"))
    root.mkdir(parents=True, exist_ok=True)

    def pick(fn: Callable[[Sequence[Message], ModelRequestParams], Step], name: str) -> str | Model:
        return model if model else DemoModel(fn, name=name, pace=pace)

    coder = Agent(
        "CodingAgent",
        model=pick(_coder(root), "coding"),
        instructions=_CODING_INSTRUCTIONS,
        tools=[write_file_tool(root)],
        description="Builds code. Give it the task and every decision already made.",
    )
    researcher = Agent(
        "ResearchAgent",
        model=pick(_researcher, "research"),
        instructions=_RESEARCH_INSTRUCTIONS,
        description="Researches best practices for a task.",
    )
    orchestrator = Agent(
        "Orchestrator",
        model=pick(_orchestrator, "orchestrator"),
        instructions=_ORCHESTRATOR_INSTRUCTIONS,
        tools=[researcher.as_tool(), coder.as_tool(), ask_user()],
    )
    return orchestrator


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


def chat_agent(model: str | None = None, *, pace: float = 0.0) -> Agent:
    """The agent of ``hpd-agent chat``: one assistant that can ask the user.

    Args:
        model: A litellm model string; None uses an offline model that remembers the chat.
        pace: Offline only: seconds between streamed words.
    """
    return Agent(
        "Assistant",
        model=model if model else DemoModel(_chat, name="chat", pace=pace),
        instructions=(
            "You are a helpful assistant. When the request is ambiguous or a choice is the "
            "user's, ask with ask_user instead of guessing."
        ),
        tools=[ask_user()],
    )
