"""pydantic-ai's framework overhead on W1-W5, with a scripted ``FunctionModel`` (no network).

    python benchmarks/peers/bench_pydantic_ai.py W1|W2|W3|W4|W5|STUB [options]

How each workload is written in pydantic-ai's own API:

- W1/W5: one ``Agent`` whose model calls the async ``noop`` tool once per turn.
- W2: one model turn with ``--fanout`` calls of ``noop``.
- W3: agents as tools the way pydantic-ai documents it (it has no ``as_tool``): a tool whose
  body awaits ``child.run(query, usage=ctx.usage)``, three agents deep.
- W4 ``--variant``:
  ``inline`` (default): the asking tool raises ``CallDeferred(kind="question")`` and the
  asking agent has the ``RequestInput`` capability, so its run waits in place for
  ``resolve_external_event(token, answer)``: works at any depth;
  ``deferred``: the run ends with ``DeferredToolRequests`` and a second run continues with
  the message history and ``DeferredToolResults`` (only at depth 1: a deferred call in a
  delegated child run does not reach the parent's caller);
  ``base``: the same agents, the tool answers by itself.

Model functions are ``async def`` (a sync one runs in a worker thread) and return explicit
usage (without it ``FunctionModel`` estimates tokens over the whole history on every call,
a cost of the test double, not of the framework). They decide from the last message part
only, with the turn number in the tool call id: O(1) and safe under concurrency.
"""

from __future__ import annotations

import sys

import _common as common  # first: environment, network guard

# isort: split

import asyncio
import gc
from typing import Any

from pydantic_ai import Agent, RunContext
from pydantic_ai.capabilities import RequestInput
from pydantic_ai.exceptions import CallDeferred
from pydantic_ai.external_events import resolve_external_event
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import DeferredToolRequests
from pydantic_ai.usage import RequestUsage, UsageLimits

FW = "pydantic-ai"
VERSIONS = common.pkg_versions("pydantic-ai-slim", "pydantic-graph", "pydantic")
UNLIMITED = UsageLimits(request_limit=None)
USAGE = RequestUsage(input_tokens=1, output_tokens=1)
ANSWER = "human said 42"


# ----------------------------------------------------------------------------- scripted models
def _reply(*parts: Any) -> ModelResponse:
    return ModelResponse(parts=list(parts), usage=USAGE)


def _returned(messages: list[ModelMessage]) -> ToolReturnPart | None:
    part = messages[-1].parts[-1]
    return part if isinstance(part, ToolReturnPart) else None


def loop_model(turns: int) -> FunctionModel:
    """``noop`` once per turn, ``turns`` times, then "done"."""

    async def step(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = _returned(messages)
        done = 0 if last is None else int(last.tool_call_id[1:])
        if done >= turns:
            return _reply(TextPart("done"))
        return _reply(ToolCallPart("noop", {}, tool_call_id=f"c{done + 1}"))

    return FunctionModel(step)


def fanout_model(n: int) -> FunctionModel:
    """One turn of ``n`` parallel ``noop`` calls, then "done"."""

    async def step(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if _returned(messages) is not None:
            return _reply(TextPart("done"))
        return _reply(*(ToolCallPart("noop", {}, tool_call_id=f"c{i}") for i in range(n)))

    return FunctionModel(step)


def one_call_model(tool_name: str, who: str, args: dict[str, Any] | None = None) -> FunctionModel:
    """One call of ``tool_name``, then "<who> done: <its result>"."""

    async def step(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = _returned(messages)
        if last is None:
            return _reply(ToolCallPart(tool_name, args or {}, tool_call_id=f"{who}1"))
        return _reply(TextPart(f"{who} done: {last.content}"))

    return FunctionModel(step)


async def noop() -> str:
    """Trivial tool returning a constant."""
    return "ok"


def loop_agent(turns: int) -> Agent[None, str]:
    return Agent(loop_model(turns), tools=[noop])


def delegate(parent: Agent[Any, Any], name: str, child: Agent[Any, Any]) -> None:
    """Register ``child`` as the tool ``name`` of ``parent`` (pydantic-ai's delegation)."""

    async def call(ctx: RunContext[None], q: str) -> str:
        return (await child.run(q, usage=ctx.usage)).output

    call.__name__ = name
    call.__doc__ = f"{name.removeprefix('call_')} agent"
    parent.tool(call)


# ----------------------------------------------------------------------------- W1, W2, W3, W5
async def w1(turns: int, runs: int) -> dict[str, Any]:
    agent = loop_agent(turns)
    assert (await loop_agent(10).run("go", usage_limits=UNLIMITED)).output == "done"
    samples: list[float] = []
    result = None
    for _ in range(runs):
        gc.collect()
        t0 = common.now()
        result = await agent.run("go", usage_limits=UNLIMITED)
        samples.append((common.now() - t0) / turns * 1e6)
        assert result.output == "done"
    assert result is not None and len(result.all_messages()) == 2 * turns + 2
    return {"us_per_turn": common.summarize(samples), "turns": turns}


async def w2(fanout: int, runs: int) -> dict[str, Any]:
    agent = Agent(fanout_model(fanout), tools=[noop])
    await Agent(fanout_model(10), tools=[noop]).run("go")
    totals: list[float] = []
    for _ in range(runs):
        gc.collect()
        t0 = common.now()
        result = await agent.run("go", usage_limits=UNLIMITED)
        totals.append(common.now() - t0)
        assert result.output == "done"
        returned = [
            p for m in result.all_messages() for p in m.parts if isinstance(p, ToolReturnPart)
        ]
        assert len(returned) == fanout, len(returned)
    return {
        "total_ms": common.summarize([t * 1e3 for t in totals]),
        "us_per_call": common.summarize([t / fanout * 1e6 for t in totals]),
        "fanout": fanout,
    }


def build_nest3() -> Agent[None, str]:
    grandchild = Agent(one_call_model("noop", "g"), tools=[noop])
    child = Agent(one_call_model("call_grandchild", "c", {"q": "go"}))
    root = Agent(one_call_model("call_child", "r", {"q": "go"}))
    delegate(child, "call_grandchild", grandchild)
    delegate(root, "call_child", child)
    return root


async def w3(repeats: int) -> dict[str, Any]:
    root = build_nest3()
    expect = "r done: c done: g done: ok"
    for _ in range(5):
        assert (await root.run("go")).output == expect
    samples: list[float] = []
    for _ in range(repeats):
        t0 = common.now()
        output = (await root.run("go")).output
        samples.append((common.now() - t0) * 1e3)
        assert output == expect, output
    return {"ms_per_run": common.summarize(samples), "repeats": repeats}


async def w5(concurrency: int, turns: int) -> dict[str, Any]:
    agent = loop_agent(turns)
    await agent.run("go")
    gc.collect()
    rss0 = common.rss_now_mb()
    t0 = common.now()
    results = await asyncio.gather(
        *(agent.run("go", usage_limits=UNLIMITED) for _ in range(concurrency))
    )
    total = common.now() - t0
    assert all(r.output == "done" for r in results)
    return {
        "total_s": total,
        "peak_rss_mb": common.peak_rss_mb(),
        "rss_before_mb": rss0,
        "rss_after_mb": common.rss_now_mb(),
        "concurrency": concurrency,
        "turns": turns,
    }


# ----------------------------------------------------------------------------- W4
MECHANISMS = {
    "inline": "CallDeferred(kind='question') + RequestInput capability: the run waits in place "
    "(wait_for_external_event) until resolve_external_event(token, answer)",
    "deferred": "CallDeferred(kind='question') -> DeferredToolRequests output -> "
    "run(message_history, deferred_tool_results)",
    "base": "no HITL (baseline)",
}


class _Asked:
    """When the 'human' was handed the question (the inline variant's request time)."""

    at = 0.0


async def _answer_at_once(ctx: Any, requests: Any, token: Any) -> None:
    _Asked.at = common.now()
    answers = {"calls": {call.tool_call_id: ANSWER for call in requests.calls}}
    # Resolved on the next loop iteration: the run has started waiting by then.
    asyncio.get_running_loop().call_soon(resolve_external_event, token, answers)


def build_hitl(depth: int, variant: str) -> Agent[None, Any]:
    capabilities = [RequestInput(ask=_answer_at_once)] if variant == "inline" else []
    output_type: Any = [str, DeferredToolRequests] if variant == "deferred" else str
    who = "r" if depth == 1 else "c"
    asker: Agent[None, Any] = Agent(
        one_call_model("ask_human", who), capabilities=capabilities, output_type=output_type
    )

    @asker.tool
    async def ask_human(ctx: RunContext[None]) -> str:  # pyright: ignore[reportUnusedFunction]
        """Needs a human answer."""
        if variant == "base":
            return ANSWER
        raise CallDeferred(kind="question", metadata={"question": "what?"})

    if depth == 1:
        return asker
    root: Agent[None, Any] = Agent(one_call_model("call_child", "r", {"q": "go"}))
    delegate(root, "call_child", asker)
    return root


async def w4_once(root: Agent[None, Any], variant: str) -> tuple[str, float, float, float]:
    t0 = common.now()
    first = await root.run("go")
    if variant != "deferred":
        t1 = common.now()
        return first.output, t0, (_Asked.at if variant == "inline" else t1), t1
    t_ask = common.now()
    requests = first.output
    assert isinstance(requests, DeferredToolRequests), requests
    call_id = requests.calls[0].tool_call_id
    assert requests.kind(call_id) == "question"
    answers = requests.build_results(calls={c.tool_call_id: ANSWER for c in requests.calls})
    second = await root.run(message_history=first.all_messages(), deferred_tool_results=answers)
    return second.output, t0, t_ask, common.now()


async def w4(repeats: int, depth: int, variant: str) -> dict[str, Any]:
    if variant == "deferred" and depth != 1:
        raise SystemExit("--variant deferred works at --depth 1 only (see the module docstring)")
    root = build_hitl(depth, variant)
    expect = f"r done: {ANSWER}" if depth == 1 else f"r done: c done: {ANSWER}"
    for _ in range(5):
        assert (await w4_once(root, variant))[0] == expect
    full: list[float] = []
    answered: list[float] = []
    for _ in range(repeats):
        output, t0, t_ask, t1 = await w4_once(root, variant)
        assert output == expect, output
        full.append((t1 - t0) * 1e3)
        answered.append((t1 - t_ask) * 1e3)
    return {
        "ms_round_trip_full": common.summarize(full),
        "ms_answer_to_complete": common.summarize(answered),
        "depth": depth,
        "variant": variant,
        "mechanism": MECHANISMS[variant],
    }


def stub_cost(n: int = 20000) -> float:
    """µs per call of the scripted model function alone."""
    model = loop_model(10**9)
    history: list[ModelMessage] = [
        ModelRequest(parts=[ToolReturnPart("noop", "ok", tool_call_id="c5")])
    ]

    async def go() -> float:
        t0 = common.now()
        for _ in range(n):
            await model.function(history, None)  # type: ignore[arg-type,misc]
        return (common.now() - t0) / n * 1e6

    return asyncio.run(go())


def main(argv: list[str]) -> None:
    p = common.argument_parser("pydantic-ai: framework overhead with a scripted model")
    p.add_argument("--variant", choices=tuple(MECHANISMS), default="inline", help="W4")
    a = p.parse_args(argv)
    common.calib_start()
    run = asyncio.run
    if a.workload == "W1":
        metrics = run(w1(a.turns, a.runs))
    elif a.workload == "W2":
        metrics = run(w2(a.fanout, a.runs))
    elif a.workload == "W3":
        metrics = run(w3(a.repeats))
    elif a.workload == "W4":
        metrics = run(w4(a.repeats, a.depth, a.variant))
    elif a.workload == "W5":
        metrics = run(w5(a.concurrency, a.w5_turns))
    else:
        metrics = {"stub_us_per_call": stub_cost()}
    common.emit(FW, a.workload, metrics, VERSIONS)


if __name__ == "__main__":
    main(sys.argv[1:])
