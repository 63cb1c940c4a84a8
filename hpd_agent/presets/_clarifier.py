"""``Clarifier``: before expensive work, ask the human focused questions, then agree a plan.

An LLM reads the request and answers JSON ``{"needs_clarification": bool,
"clarification_question": str}``; each question goes to the human through the run's request
machinery (a ``ClarificationRequest`` on the root stream), up to ``max_turns`` of them. With
``plan=True`` it then drafts a plan (a title and sections) and asks for approval: approve,
reject, or free-text feedback that regenerates the plan with the whole feedback history, up
to ``max_plan_iterations`` regenerations, after which the plan is approved automatically.

Put it in front of an agent with ``Agent(..., clarifier=Clarifier(...))``: the clarified
details and the approved plan go into that agent's instructions for the run, and a rejected
plan ends the run with status ``"rejected"``. Or call ``await clarifier.run(request)`` from a
tool.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

from .._values.vocabulary import APPROVE_WORDS, REJECT_WORDS, YES_WORDS
from ..exceptions import QuestionNotAnswered, UserError
from ..messages import AssistantMessage, Message, SystemMessage, UserMessage
from ..models._base import Model, ModelRequestParams, infer_model
from ..tools import ToolContext
from ._shared import find_json_object, frame, keywords, normalise_reply

__all__ = [
    "DEFAULT_APPROVE_WORDS",
    "DEFAULT_REJECT_WORDS",
    "DEFAULT_SKIP_WORDS",
    "ClarificationDecision",
    "Clarifier",
    "ClarifierResult",
    "DialogueTurn",
    "Plan",
    "parse_clarification",
    "parse_plan",
]

DEFAULT_APPROVE_WORDS: frozenset[str] = (APPROVE_WORDS - {"once", "allow"}) | {
    "proceed",
    "continue",
    "go ahead",
    "looks good",
}
"""Replies that approve a plan (the whole reply, after strip and lower case)."""
DEFAULT_REJECT_WORDS: frozenset[str] = (REJECT_WORDS - {"deny", "denied"}) | {"stop", "abort"}
"""Replies that reject a plan."""
DEFAULT_SKIP_WORDS: frozenset[str] = frozenset({"skip", "done", ""})
"""Replies that end the clarification questions early (the empty reply included)."""

CLARIFY_INSTRUCTIONS = """\
You scope a task before expensive work on it starts. Read the user's request and decide \
whether it is clear enough to act on. If something essential is ambiguous (scope, audience, \
depth, format, constraints), ask ONE short, focused question about the most important gap. \
Do not ask about what you can reasonably assume, and never repeat a question.

Answer with a JSON object only, no other text:
{"needs_clarification": true or false, "clarification_question": "the question, or empty"}"""

PLAN_INSTRUCTIONS = """\
You write the plan for a task: a short title and the sections (steps or parts) the work \
will have, in order. Use everything the user clarified. When the user gave feedback on \
earlier drafts, apply all of it, oldest first, unless later feedback overrides it.

Answer with a JSON object only, no other text:
{"title": "plan title", "sections": ["first section", "second section"]}"""

_TRUE = YES_WORDS | {"1"}


@dataclass(frozen=True, kw_only=True, slots=True)
class ClarificationDecision:
    """What the clarifying model decided on one turn.

    Attributes:
        needs_clarification: Whether to ask the human.
        question: The question to ask (None when no clarification is needed).
    """

    needs_clarification: bool
    question: str | None = None


_NO_CLARIFICATION = ClarificationDecision(needs_clarification=False)


def _as_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return value.strip().lower() in _TRUE
    return False


def parse_clarification(text: str | None) -> ClarificationDecision:
    """Read the model's ``{needs_clarification, clarification_question}`` answer.

    Survives prose around the JSON and code fences. Anything unreadable (garbage, no such
    object, a flag that is not clearly true, an empty question) gives the safe default: no
    clarification, so the work goes ahead instead of pestering the user or failing.
    """
    obj = find_json_object(text, keys=("needs_clarification", "clarification_question"))
    if obj is None or not _as_bool(obj.get("needs_clarification")):
        return _NO_CLARIFICATION
    question = obj.get("clarification_question")
    if not isinstance(question, str) or not question.strip():
        return _NO_CLARIFICATION
    return ClarificationDecision(needs_clarification=True, question=question.strip())


@dataclass(frozen=True, kw_only=True, slots=True)
class Plan:
    """A plan for the work: a title and its sections, in order.

    Attributes:
        title: What the work is.
        sections: Its parts or steps.
    """

    title: str
    sections: tuple[str, ...] = ()

    def to_markdown(self) -> str:
        """The plan as markdown: the title as a heading, the sections as a list."""
        lines = [f"# {self.title}"]
        lines.extend(f"{i}. {s}" for i, s in enumerate(self.sections, 1))
        return "\n".join(lines)


def _section_text(item: Any) -> str:
    if isinstance(item, str):
        return item.strip()
    if isinstance(item, Mapping):
        mapping = cast(Mapping[str, Any], item)
        for key in ("title", "name", "section"):
            if isinstance(mapping.get(key), str):
                return str(mapping[key]).strip()
    return ""


def parse_plan(text: str | None, *, fallback_title: str) -> Plan:
    """Read a plan from model text: JSON ``{title, sections}``, else a markdown outline.

    Never fails: without a title, ``fallback_title`` is used; without sections, there are none.
    """
    obj = find_json_object(text, keys=("title", "sections"))
    if obj is not None:
        title = obj.get("title")
        raw = obj.get("sections")
        items = cast(Sequence[Any], raw) if isinstance(raw, list) else ()
        found = tuple(s for s in (_section_text(i) for i in items) if s)
        name = title.strip() if isinstance(title, str) and title.strip() else fallback_title
        return Plan(title=name, sections=found)
    title = ""
    sections: list[str] = []
    for line in (text or "").splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("```"):
            continue
        bullet = stripped.lstrip("-*+ ").strip()
        numbered = stripped.split(".", 1)
        if stripped[0] in "-*+":
            sections.append(bullet)
        elif numbered[0].isdigit() and len(numbered) == 2:
            sections.append(numbered[1].strip())
        elif not title:
            title = stripped.lstrip("#").strip()
            if title.lower().startswith("title:"):
                title = title[6:].strip()
    return Plan(title=title or fallback_title, sections=tuple(s for s in sections if s))


@dataclass(frozen=True, kw_only=True, slots=True)
class DialogueTurn:
    """One clarifying question and the human's answer (None: it went unanswered)."""

    question: str
    answer: str | None


@dataclass(frozen=True, kw_only=True, slots=True)
class ClarifierResult:
    """What the clarifier learned and agreed with the human.

    Attributes:
        request: The request that was clarified.
        dialogue: The questions asked and their answers, in order.
        skipped: The human ended the questions early (skip, done, an empty reply).
        plan: The last plan drafted (None when planning is off).
        approved: The plan was approved (by the human, or automatically).
        auto_approved: It was approved automatically (feedback limit reached, or nobody
            answered under ``if_unanswered="approve"``).
        rejected: The human rejected the plan: the work should not go ahead.
        feedback_history: The human's feedback on the drafts, oldest first.
        feedback_applied: How many of them the final plan was drafted with (feedback given
            once the regeneration limit was reached is passed on, not applied).
    """

    request: str
    dialogue: tuple[DialogueTurn, ...] = ()
    skipped: bool = False
    plan: Plan | None = None
    approved: bool = False
    auto_approved: bool = False
    rejected: bool = False
    feedback_history: tuple[str, ...] = ()
    feedback_applied: int = 0

    @property
    def log(self) -> str:
        """The clarification dialogue as text (request, then each question and answer)."""
        lines = [f"Request: {self.request}"]
        for turn in self.dialogue:
            lines.append(f"Q: {turn.question}")
            lines.append(f"A: {turn.answer if turn.answer is not None else '(no answer)'}")
        return "\n".join(lines)

    def instructions(self) -> str:
        """What the main agent is told: the clarifications and the approved plan, as markdown.

        Empty when there is nothing to add (no answered question, no approved plan).
        """
        parts: list[str] = []
        answered = [t for t in self.dialogue if t.answer is not None]
        if answered:
            qa = "\n".join(f"- Q: {t.question}\n  A: {t.answer}" for t in answered)
            parts.append(f"## Clarifications from the user\n{qa}")
        if self.plan is not None and self.approved:
            body = self.plan.to_markdown().replace("# ", "### ", 1)
            parts.append(f"## Approved plan (follow it)\n{body}")
            pending = self.feedback_history[self.feedback_applied :]
            if pending:
                notes = "\n".join(f"- {f}" for f in pending)
                parts.append(f"## Also requested by the user (not yet in the plan)\n{notes}")
        return "\n\n".join(parts)


class Clarifier:
    """Asks focused questions before expensive work, then (optionally) agrees a plan.

    Args:
        model: The LLM that decides what to ask: a litellm model string or a ``Model``.
        planner_model: The LLM that drafts plans; defaults to ``model``.
        max_turns: Most questions asked (0: no questions).
        plan: Draft a plan and ask the human to approve it.
        max_plan_iterations: Most plan regenerations from feedback; past it, the latest plan
            is approved automatically.
        approve_words: Replies that approve the plan (whole reply, strip + lower case).
        reject_words: Replies that reject the plan.
        skip_words: Replies that end the questions early.
        instructions: The clarifying model's system prompt.
        plan_instructions: The planner's system prompt.
        if_unanswered: What an unanswered approval question means: ``"approve"`` (go ahead
            with the plan, marked auto-approved) or ``"reject"``.
        timeout: Seconds to wait for each answer; None waits as long as the run lives.
        name: The clarifier's name in agent paths (``("Main", "Clarifier")``) and events.
        model_settings: Provider settings for the clarifier's model requests.
    """

    def __init__(
        self,
        model: str | Model,
        *,
        planner_model: str | Model | None = None,
        max_turns: int = 3,
        plan: bool = False,
        max_plan_iterations: int = 10,
        approve_words: Iterable[str] = DEFAULT_APPROVE_WORDS,
        reject_words: Iterable[str] = DEFAULT_REJECT_WORDS,
        skip_words: Iterable[str] = DEFAULT_SKIP_WORDS,
        instructions: str = CLARIFY_INSTRUCTIONS,
        plan_instructions: str = PLAN_INSTRUCTIONS,
        if_unanswered: Literal["approve", "reject"] = "approve",
        timeout: float | None = None,
        name: str = "Clarifier",
        model_settings: Mapping[str, Any] | None = None,
    ) -> None:
        if max_turns < 0 or max_plan_iterations < 0:
            raise UserError("max_turns and max_plan_iterations must be 0 or more")
        if if_unanswered not in ("approve", "reject"):
            raise UserError(f"if_unanswered must be 'approve' or 'reject', got {if_unanswered!r}")
        self.approve_words = keywords(approve_words, "approve_words")
        self.reject_words = keywords(reject_words, "reject_words")
        self.skip_words = keywords(skip_words, "skip_words")
        both = self.approve_words & self.reject_words
        if both:
            raise UserError(f"words both approve and reject a plan: {sorted(both)}")
        self.name = name
        self.max_turns = max_turns
        self.plan = plan
        self.max_plan_iterations = max_plan_iterations
        self.instructions = instructions
        self.plan_instructions = plan_instructions
        self.if_unanswered = if_unanswered
        self.timeout = timeout
        self.model_settings: Mapping[str, Any] = dict(model_settings or {})
        self._model_source = model
        self._planner_source = planner_model
        self._model: Model | None = model if isinstance(model, Model) else None
        self._planner: Model | None = None

    @property
    def model(self) -> Model:
        """The clarifying model (a string is resolved on first use)."""
        if self._model is None:
            self._model = infer_model(self._model_source)
        return self._model

    @property
    def planner_model(self) -> Model:
        """The model that drafts plans: ``planner_model``, else ``model``."""
        if self._planner is None:
            source = self._planner_source
            self._planner = self.model if source is None else infer_model(source)
        return self._planner

    def __repr__(self) -> str:
        return f"Clarifier({self.name!r}, max_turns={self.max_turns}, plan={self.plan})"

    # -- running -------------------------------------------------------------------------------
    async def run(self, request: str, *, ctx: ToolContext | None = None) -> ClarifierResult:
        """Clarify ``request`` with the human, then agree a plan if planning is on.

        Args:
            request: The task to clarify.
            ctx: The call frame to ask from; defaults to the running tool's.

        Raises:
            UserError: Called outside any run (there is nobody to ask).
            ModelError: A model request failed.
        """
        return await _Session(self, frame(ctx, "Clarifier"), request).run()

    async def before_run(self, request: str, ctx: ToolContext) -> ClarifierResult:
        """Run as the first step of an agent's run (what ``Agent(clarifier=...)`` does).

        The agent gives the clarifier its own call frame under it (path
        ``(*agent_path, name)``), so its questions reach the run's stream like any agent's.
        """
        return await _Session(self, ctx, request).run()


class _Session:
    """One clarification: the dialogue, then the plan approval loop."""

    def __init__(self, clarifier: Clarifier, ctx: ToolContext, request: str) -> None:
        self.c = clarifier
        self.ctx = ctx
        self.request = request
        self.turn = 0
        self.dialogue: list[DialogueTurn] = []

    async def _complete(self, model: Model, messages: Sequence[Message]) -> str:
        params = ModelRequestParams(
            settings=self.c.model_settings,
            agent_name=self.c.name,
            agent_path=self.ctx.agent_path,
            turn=self.turn,
        )
        self.turn += 1
        # Through the run's hooks like any agent's call: a durable run journals it, so a
        # resume replays it instead of asking the model again.
        response = await self.ctx.request_model(model, messages, params)
        return response.text or ""

    async def _ask(self, question: str, context: str) -> str | None:
        try:
            return await self.ctx.ask(question, context=context, timeout=self.c.timeout)
        except QuestionNotAnswered:
            return None

    async def run(self) -> ClarifierResult:
        skipped = await self._clarify()
        if not self.c.plan:
            return ClarifierResult(
                request=self.request, dialogue=tuple(self.dialogue), skipped=skipped
            )
        return await self._agree_plan(skipped)

    async def _clarify(self) -> bool:
        """Ask up to ``max_turns`` questions; True when the human skipped the rest."""
        c = self.c
        if c.max_turns == 0:
            return False
        model = c.model
        messages: list[Message] = [
            SystemMessage(content=c.instructions),
            UserMessage(
                content=f"Request:\n{self.request}\n\nYou may ask at most {c.max_turns} question(s)."
            ),
        ]
        for asked in range(c.max_turns):
            reply = await self._complete(model, messages)
            decision = parse_clarification(reply)
            if not decision.needs_clarification or decision.question is None:
                return False
            question = decision.question
            answer = await self._ask(
                question,
                f"Question {asked + 1} of at most {c.max_turns} before the work starts; "
                "reply 'skip' to go ahead without more questions.",
            )
            if answer is None:
                # Nobody answered: go ahead on what is known rather than waiting again.
                self.dialogue.append(DialogueTurn(question=question, answer=None))
                return False
            if normalise_reply(answer) in c.skip_words:
                return True
            self.dialogue.append(DialogueTurn(question=question, answer=answer))
            left = c.max_turns - asked - 1
            messages.append(AssistantMessage(content=reply))
            messages.append(
                UserMessage(
                    content=f"{answer}\n\n(You may ask {left} more question(s). "
                    "Answer with the JSON object only.)"
                )
            )
        return False

    async def _draft(self, previous: Plan | None, feedback: Sequence[str]) -> Plan:
        c = self.c
        model = c.planner_model
        parts = [f"Task:\n{self.request}"]
        answered = [t for t in self.dialogue if t.answer is not None]
        if answered:
            parts.append(
                "Clarifications:\n" + "\n".join(f"Q: {t.question}\nA: {t.answer}" for t in answered)
            )
        if previous is not None:
            parts.append(f"Previous draft:\n{previous.to_markdown()}")
        if feedback:
            numbered = "\n".join(f"{i}. {f}" for i, f in enumerate(feedback, 1))
            parts.append(f"Feedback on the drafts, oldest first (apply all of it):\n{numbered}")
        messages: list[Message] = [
            SystemMessage(content=c.plan_instructions),
            UserMessage(content="\n\n".join(parts)),
        ]
        text = await self._complete(model, messages)
        return parse_plan(text, fallback_title=_title_from(self.request))

    async def _agree_plan(self, skipped: bool) -> ClarifierResult:
        c = self.c
        feedback: list[str] = []
        plan = await self._draft(None, feedback)
        applied = 0  # feedback entries the current plan was drafted with
        rounds = 0  # non-decisions so far: regenerations, and empty replies
        approved = auto = rejected = False
        while True:
            reply = await self._ask(
                f"Here is the proposed plan:\n\n{plan.to_markdown()}\n\nDo you approve this plan?",
                "Reply 'approve' to go ahead, 'reject' to stop, or say what to change.",
            )
            if reply is None:
                approved = auto = c.if_unanswered == "approve"
                rejected = not approved
                break
            word = normalise_reply(reply)
            if word in c.approve_words:
                approved = True
                break
            if word in c.reject_words:
                rejected = True
                break
            if word:
                feedback.append(reply.strip())
            if rounds >= c.max_plan_iterations:
                # The limit is reached: the plan the human last saw goes ahead; feedback it
                # does not reflect yet is passed on with it (see ``instructions``).
                approved = auto = True
                break
            rounds += 1
            if word:
                plan = await self._draft(plan, feedback)
                applied = len(feedback)
        return ClarifierResult(
            request=self.request,
            dialogue=tuple(self.dialogue),
            skipped=skipped,
            plan=plan,
            approved=approved,
            auto_approved=auto,
            rejected=rejected,
            feedback_history=tuple(feedback),
            feedback_applied=applied,
        )


def _title_from(request: str) -> str:
    first = request.strip().splitlines()[0] if request.strip() else "Plan"
    return first if len(first) <= 80 else first[:77] + "..."
