"""The OpenAI Agents SDK's framework overhead on W1-W5, with a scripted ``Model`` (no network).

    python benchmarks/peers/bench_openai_agents.py W1|W2|W3|W4|W5|STUB [options]

How each workload is written in the SDK's own API:

- W1/W5: one ``Agent`` whose model calls the ``noop`` function tool once per turn
  (``Runner.run(..., max_turns=...)`` high enough). ``W5 --per-run-agent`` gives each
  concurrent run its own ``agent.clone()``: the SDK keeps a registry of active runs per
  ``Agent`` that each turn scans, so 1000 runs of one agent cost O(runs) per turn.
- W2: one model turn with ``--fanout`` calls of ``noop``.
- W3: ``Agent.as_tool()``, three agents deep.
- W4 ``--variant hitl`` (default): the asking tool is ``function_tool(needs_approval=True)``;
  the run stops with ``result.interruptions``, the app approves them on
  ``result.to_state()`` and runs again from that state; the answer reaches the tool through
  the run context. ``--variant base``: the same tree without the approval gate.

Tracing is off (its default exporter would post to the vendor). The scripted model is an
``agents.models.interface.Model`` subclass; it decides from the last input item only, with
the turn number in the call id: O(1) and safe under concurrency.
"""

from __future__ import annotations

import sys

import _common as common  # first: environment, network guard

# isort: split

import asyncio
import gc
from collections.abc import Callable
from typing import Any

from agents import (
    Agent,
    RunContextWrapper,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

set_tracing_disabled(True)

FW = "openai-agents"
VERSIONS = common.pkg_versions("openai-agents", "openai", "pydantic")
MAX_TURNS = 100_000
ANSWER = "human said 42"

Last = tuple[str, Any] | None  # (call id, output) of the last input item, if a tool output
Policy = Callable[[Last], list[Any]]


# ----------------------------------------------------------------------------- scripted model
def call(name: str, call_id: str, arguments: str = "{}") -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(
        id=call_id, call_id=call_id, type="function_call", name=name, arguments=arguments
    )


def say(text: str) -> ResponseOutputMessage:
    content = ResponseOutputText(text=text, type="output_text", annotations=[], logprobs=[])
    return ResponseOutputMessage(
        id="msg", type="message", role="assistant", status="completed", content=[content]
    )


def last_output(items: Any) -> Last:
    if isinstance(items, str):
        return None
    item = items[-1]
    if isinstance(item, dict):
        if item.get("type") == "function_call_output":  # pyright: ignore[reportUnknownMemberType]
            return item["call_id"], item.get("output")  # pyright: ignore[reportUnknownMemberType]
        return None
    if getattr(item, "type", None) == "function_call_output":
        return item.call_id, item.output
    return None


class Scripted(Model):
    """A model whose reply is ``policy(last tool output or None)``."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy

    async def get_response(
        self, system_instructions: Any, input: Any, *args: Any, **kw: Any
    ) -> Any:
        return ModelResponse(
            output=self.policy(last_output(input)), usage=Usage(), response_id=None
        )

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the benchmarks do not stream")


def loop_policy(turns: int) -> Policy:
    def policy(last: Last) -> list[Any]:
        done = 0 if last is None else int(last[0][1:])
        return [say("done")] if done >= turns else [call("noop", f"c{done + 1}")]

    return policy


def fanout_policy(n: int) -> Policy:
    def policy(last: Last) -> list[Any]:
        return [say("done")] if last is not None else [call("noop", f"c{i}") for i in range(n)]

    return policy


def one_call_policy(tool_name: str, who: str, arguments: str = "{}") -> Policy:
    def policy(last: Last) -> list[Any]:
        if last is None:
            return [call(tool_name, f"{who}1", arguments)]
        return [say(f"{who} done: {last[1]}")]

    return policy


# ----------------------------------------------------------------------------- tools
@function_tool
async def noop() -> str:
    """Trivial tool returning a constant."""
    return "ok"


@function_tool(needs_approval=True)
async def ask_human(ctx: RunContextWrapper[dict[str, str]]) -> str:
    """Needs a human answer (approval-gated; the answer travels in the run context)."""
    return ctx.context["answer"]


@function_tool(name_override="ask_human")
async def ask_human_base(ctx: RunContextWrapper[dict[str, str]]) -> str:
    """Baseline: the same tool without the approval gate."""
    return ctx.context["answer"]


def loop_agent(turns: int) -> Agent[Any]:
    return Agent(name="loop", model=Scripted(loop_policy(turns)), tools=[noop])


# ----------------------------------------------------------------------------- W1, W2, W3, W5
async def w1(turns: int, runs: int) -> dict[str, Any]:
    agent = loop_agent(turns)
    warm = await Runner.run(loop_agent(10), "go", max_turns=MAX_TURNS)
    assert warm.final_output == "done"
    samples: list[float] = []
    for _ in range(runs):
        gc.collect()
        t0 = common.now()
        result = await Runner.run(agent, "go", max_turns=MAX_TURNS)
        samples.append((common.now() - t0) / turns * 1e6)
        assert result.final_output == "done"
    return {"us_per_turn": common.summarize(samples), "turns": turns}


async def w2(fanout: int, runs: int) -> dict[str, Any]:
    agent = Agent(name="fan", model=Scripted(fanout_policy(fanout)), tools=[noop])
    warm = Agent(name="fan", model=Scripted(fanout_policy(10)), tools=[noop])
    await Runner.run(warm, "go", max_turns=MAX_TURNS)
    totals: list[float] = []
    for _ in range(runs):
        gc.collect()
        t0 = common.now()
        result = await Runner.run(agent, "go", max_turns=MAX_TURNS)
        totals.append(common.now() - t0)
        assert result.final_output == "done"
        outputs = [i for i in result.new_items if type(i).__name__ == "ToolCallOutputItem"]
        assert len(outputs) == fanout, len(outputs)
    return {
        "total_ms": common.summarize([t * 1e3 for t in totals]),
        "us_per_call": common.summarize([t / fanout * 1e6 for t in totals]),
        "fanout": fanout,
    }


def build_nest3() -> Agent[Any]:
    grandchild = Agent(
        name="grandchild", model=Scripted(one_call_policy("noop", "g")), tools=[noop]
    )
    child = Agent(
        name="child",
        model=Scripted(one_call_policy("call_grandchild", "c", '{"input":"go"}')),
        tools=[grandchild.as_tool("call_grandchild", "grandchild agent")],
    )
    return Agent(
        name="root",
        model=Scripted(one_call_policy("call_child", "r", '{"input":"go"}')),
        tools=[child.as_tool("call_child", "child agent")],
    )


async def w3(repeats: int) -> dict[str, Any]:
    root = build_nest3()
    expect = "r done: c done: g done: ok"
    for _ in range(5):
        assert (await Runner.run(root, "go")).final_output == expect
    samples: list[float] = []
    for _ in range(repeats):
        t0 = common.now()
        output = (await Runner.run(root, "go")).final_output
        samples.append((common.now() - t0) * 1e3)
        assert output == expect, output
    return {"ms_per_run": common.summarize(samples), "repeats": repeats}


async def w5(concurrency: int, turns: int, per_run_agent: bool) -> dict[str, Any]:
    agent = loop_agent(turns)
    await Runner.run(agent, "go", max_turns=MAX_TURNS)
    agents = [agent.clone() if per_run_agent else agent for _ in range(concurrency)]
    gc.collect()
    rss0 = common.rss_now_mb()
    t0 = common.now()
    results = await asyncio.gather(*(Runner.run(a, "go", max_turns=MAX_TURNS) for a in agents))
    total = common.now() - t0
    assert all(r.final_output == "done" for r in results)
    return {
        "total_s": total,
        "peak_rss_mb": common.peak_rss_mb(),
        "rss_before_mb": rss0,
        "rss_after_mb": common.rss_now_mb(),
        "concurrency": concurrency,
        "turns": turns,
        "per_run_agent": per_run_agent,
    }


# ----------------------------------------------------------------------------- W4
def build_hitl(depth: int, hitl: bool) -> Agent[Any]:
    ask = ask_human if hitl else ask_human_base
    who = "r" if depth == 1 else "c"
    asker = Agent(name="asker", model=Scripted(one_call_policy("ask_human", who)), tools=[ask])
    if depth == 1:
        return asker
    return Agent(
        name="root",
        model=Scripted(one_call_policy("call_child", "r", '{"input":"go"}')),
        tools=[asker.as_tool("call_child", "child agent")],
    )


async def w4_once(root: Agent[Any], hitl: bool) -> tuple[str, float, float, float]:
    context: dict[str, str] = {}
    t0 = common.now()
    if not hitl:
        context["answer"] = ANSWER
        result = await Runner.run(root, "go", context=context)
        t1 = common.now()
        return result.final_output, t0, t1, t1
    paused = await Runner.run(root, "go", context=context)
    t_ask = common.now()
    assert paused.interruptions, "expected an approval interruption"
    state = paused.to_state()
    context["answer"] = ANSWER  # the human answers right away
    for item in paused.interruptions:
        state.approve(item)
    result = await Runner.run(root, state, context=context)
    t1 = common.now()
    assert not result.interruptions
    return result.final_output, t0, t_ask, t1


async def w4(repeats: int, depth: int, variant: str) -> dict[str, Any]:
    hitl = variant == "hitl"
    root = build_hitl(depth, hitl)
    expect = f"r done: {ANSWER}" if depth == 1 else f"r done: c done: {ANSWER}"
    for _ in range(5):
        assert (await w4_once(root, hitl))[0] == expect
    full: list[float] = []
    answered: list[float] = []
    for _ in range(repeats):
        output, t0, t_ask, t1 = await w4_once(root, hitl)
        assert output == expect, output
        full.append((t1 - t0) * 1e3)
        answered.append((t1 - t_ask) * 1e3)
    mechanism = (
        "needs_approval -> result.interruptions -> state.approve -> Runner.run(root, state)"
        if hitl
        else "no HITL (baseline)"
    )
    return {
        "ms_round_trip_full": common.summarize(full),
        "ms_answer_to_complete": common.summarize(answered),
        "depth": depth,
        "variant": variant,
        "mechanism": mechanism,
    }


def stub_cost(n: int = 20000) -> float:
    """µs per scripted response (policy plus ``ModelResponse``)."""
    policy = loop_policy(10**9)
    t0 = common.now()
    for i in range(n):
        ModelResponse(output=policy((f"c{i}", "ok")), usage=Usage(), response_id=None)
    return (common.now() - t0) / n * 1e6


def main(argv: list[str]) -> None:
    p = common.argument_parser("openai-agents: framework overhead with a scripted model")
    p.add_argument("--variant", choices=("hitl", "base"), default="hitl", help="W4")
    p.add_argument("--per-run-agent", action="store_true", help="W5: agent.clone() per run")
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
        metrics = run(w5(a.concurrency, a.w5_turns, a.per_run_agent))
    else:
        metrics = {"stub_us_per_call": stub_cost()}
    common.emit(FW, a.workload, metrics, VERSIONS)


if __name__ == "__main__":
    main(sys.argv[1:])
