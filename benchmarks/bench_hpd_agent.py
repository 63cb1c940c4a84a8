"""hpd_agent framework-overhead benchmark with scripted models (no network, no LLM).

Same command line and ``RESULT_JSON`` contract as the peer benches in
``../shared/bench/peers`` (``bench_<framework>.py``), whose ``common`` module is imported
first (environment, network guard, timing, RSS, calibration kernel)::

    python benchmarks/bench_hpd_agent.py W1|W2|W3|W4|W5|EVENTS|PENDING|STUB [options]

Workloads (the peers' semantics, expressed in hpd_agent's own API):

- W1: one agent, a sequential tool loop (``--turns`` model turns, one noop tool call each).
- W2: one model turn with ``--fanout`` parallel calls of an async noop tool.
- W3: agents as tools, depth 3 (root -> child -> grandchild via ``Agent.as_tool``).
- W4: human in the loop: ``ask_user`` at depth ``--depth`` (1 or 2) answered with
  ``run.respond`` from a ``stream()`` loop; ``--variant base`` is the same tree whose tool
  answers by itself (no HITL); ``--variant store`` is the HITL round trip with the durable
  SQLite store (reports ``n/a`` while ``hpd_agent.store`` does not exist).
- W5: ``--concurrency`` concurrent ``run()`` s of ``--w5-turns`` turns each, with peak RSS.
- EVENTS: one root stream, ``--agents`` parallel sub-agents each streaming ``--chunks``
  text pieces; events/s seen by the consumer.
- PENDING: ``--pending`` questions pending at once (parallel ``ask_user`` calls); RSS per
  pending question, then every question is answered and the run must complete.
- STUB: the scripted model's own cost per call.

The scripted models decide the next step from the last message only (the turn number is in
the tool call id), like the peers' stubs: O(1), stateless, safe under concurrency.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

# The peers' harness lives next to the repository (../shared/bench/peers); it must be
# imported before anything else (it sets the environment and installs the network guard).
PEERS_DIR = Path(
    os.environ.get(
        "HPD_BENCH_PEERS", Path(__file__).resolve().parents[2] / "shared" / "bench" / "peers"
    )
)
if not (PEERS_DIR / "common.py").is_file():
    raise SystemExit(
        f"peer harness not found: {PEERS_DIR / 'common.py'} (set HPD_BENCH_PEERS to the "
        "directory holding the peers' common.py)"
    )
sys.path.insert(0, str(PEERS_DIR))
# Run from anywhere: import this checkout's hpd_agent, not an installed one.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import common  # noqa: E402  (must come first: env, telemetry off, network guard)

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import argparse  # noqa: E402
import gc  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from typing import Any  # noqa: E402

import anyio  # noqa: E402

from hpd_agent import Agent, ask_user, tool  # noqa: E402
from hpd_agent.events import (  # noqa: E402
    ClarificationRequest,
    RunFinished,
    TextDelta,
)
from hpd_agent.messages import (  # noqa: E402
    Message,
    ToolCall,
    ToolResultMessage,
    Usage,
)
from hpd_agent.models import ModelRequestParams, ModelResponse  # noqa: E402
from hpd_agent.testing import FunctionModel  # noqa: E402

FW = "hpd_agent"
VERSIONS = common.pkg_versions("hpd-agent", "anyio", "pydantic", "trio")
U = Usage(requests=1, input_tokens=1, output_tokens=1)
BIG = 10**9


# ----------------------------------------------------------------------------- scripted models
def _last_result(messages: Sequence[Message]) -> ToolResultMessage | None:
    last = messages[-1]
    return last if isinstance(last, ToolResultMessage) else None


def _calls(name: str, ids: Sequence[str], arguments: str = "{}") -> ModelResponse:
    return ModelResponse(
        tool_calls=tuple(ToolCall(id=i, name=name, arguments=arguments) for i in ids), usage=U
    )


def _text(content: str) -> ModelResponse:
    return ModelResponse(text=content, usage=U)


def loop_model(turns: int, tool_name: str = "noop") -> FunctionModel:
    """Call ``tool_name`` once per turn, ``turns`` times, then answer "done"."""

    async def loop(messages: Sequence[Message], info: ModelRequestParams) -> ModelResponse:
        last = _last_result(messages)
        n = 0 if last is None else int(last.tool_call_id[1:])
        if n >= turns:
            return _text("done")
        return _calls(tool_name, (f"c{n + 1}",))

    return FunctionModel(loop)


def fanout_model(
    n: int, tool_name: str = "noop", arguments: str | Callable[[int], str] = "{}"
) -> FunctionModel:
    """One turn of ``n`` parallel calls (``arguments``: one text, or one per call), then "done"."""
    ids = tuple(f"c{i}" for i in range(n))

    async def fanout(messages: Sequence[Message], info: ModelRequestParams) -> ModelResponse:
        if _last_result(messages) is not None:
            return _text("done")
        if isinstance(arguments, str):
            return _calls(tool_name, ids, arguments)
        calls = tuple(
            ToolCall(id=i, name=tool_name, arguments=arguments(k)) for k, i in enumerate(ids)
        )
        return ModelResponse(tool_calls=calls, usage=U)

    return FunctionModel(fanout)


def one_call_model(tool_name: str, arguments: str = "{}", who: str = "x") -> FunctionModel:
    """One call of ``tool_name``, then "<who> done: <its result>"."""

    async def one_call(messages: Sequence[Message], info: ModelRequestParams) -> ModelResponse:
        last = _last_result(messages)
        if last is None:
            return _calls(tool_name, (f"{who}1",), arguments)
        return _text(f"{who} done: {last.content}")

    return FunctionModel(one_call)


def streaming_text_model(pieces: int) -> FunctionModel:
    """Answers at once with ``pieces`` streamed text pieces of 8 characters."""
    body = "abcdefgh" * pieces

    async def speak(messages: Sequence[Message], info: ModelRequestParams) -> ModelResponse:
        return _text(body)

    return FunctionModel(speak, chunk_size=8)


@tool
async def noop() -> str:
    """Trivial tool returning a constant."""
    return "ok"


@tool(name="ask_human")
async def ask_human_nohitl() -> str:
    """Baseline: the same tool, answering by itself (no human)."""
    return "human said 42"


def loop_agent(turns: int) -> Agent:
    return Agent("loop", model=loop_model(turns), tools=[noop], max_turns=turns + 1)


# ----------------------------------------------------------------------------- workloads
async def w1(turns: int, runs: int) -> dict[str, Any]:
    agent = loop_agent(turns)
    r = await loop_agent(10).run("go")
    assert r.output == "done"
    samples: list[float] = []
    for _ in range(runs):
        gc.collect()
        t0 = common.now()
        r = await agent.run("go")
        dt = common.now() - t0
        assert r.output == "done", r
        samples.append(dt / turns * 1e6)
    # prompt + (assistant call + tool result) per turn + final answer
    assert len(r.messages) == 2 * turns + 2, len(r.messages)
    return {"us_per_turn": common.summarize(samples), "turns": turns}


async def w2(fanout: int, runs: int) -> dict[str, Any]:
    agent = Agent("fan", model=fanout_model(fanout), tools=[noop])
    await Agent("fan", model=fanout_model(10), tools=[noop]).run("go")
    tot: list[float] = []
    for _ in range(runs):
        gc.collect()
        t0 = common.now()
        r = await agent.run("go")
        dt = common.now() - t0
        assert r.output == "done"
        results = [m for m in r.messages if isinstance(m, ToolResultMessage)]
        assert len(results) == fanout, len(results)
        # results come back in the model's order, keyed by call id
        assert [m.tool_call_id for m in results] == [f"c{i}" for i in range(fanout)]
        assert all(m.content == "ok" and not m.is_error for m in results)
        tot.append(dt)
    return {
        "total_ms": common.summarize([t * 1e3 for t in tot]),
        "us_per_call": common.summarize([t / fanout * 1e6 for t in tot]),
        "fanout": fanout,
    }


def build_nest3() -> Agent:
    grandchild = Agent("grandchild", model=one_call_model("noop", who="g"), tools=[noop])
    child = Agent(
        "child",
        model=one_call_model("call_grandchild", '{"query":"go"}', who="c"),
        tools=[grandchild.as_tool("call_grandchild", "grandchild agent")],
    )
    return Agent(
        "root",
        model=one_call_model("call_child", '{"query":"go"}', who="r"),
        tools=[child.as_tool("call_child", "child agent")],
    )


async def w3(repeats: int) -> dict[str, Any]:
    root = build_nest3()
    r = None
    for _ in range(5):
        r = await root.run("go")
    assert r is not None and r.output == "r done: c done: g done: ok", r
    samples: list[float] = []
    for _ in range(repeats):
        t0 = common.now()
        r = await root.run("go")
        samples.append((common.now() - t0) * 1e3)
    assert r.output == "r done: c done: g done: ok"
    return {"ms_per_run": common.summarize(samples), "repeats": repeats}


def build_hitl(depth: int, hitl: bool) -> Agent:
    ask = ask_user(name="ask_human") if hitl else ask_human_nohitl
    question = '{"question":"what?"}' if hitl else "{}"
    who = "r" if depth == 1 else "c"
    asker = Agent("asker", model=one_call_model("ask_human", question, who=who), tools=[ask])
    if depth == 1:
        return asker
    return Agent(
        "root",
        model=one_call_model("call_child", '{"query":"go"}', who="r"),
        tools=[asker.as_tool("call_child", "child agent")],
    )


async def w4_once(root: Agent, hitl: bool, store: Any = None) -> tuple[str, float, float, float]:
    t0 = common.now()
    if not hitl:
        r = await root.run("go")
        t1 = common.now()
        return r.output or "", t0, t1, t1
    t_ask = 0.0
    kwargs: dict[str, Any] = {} if store is None else {"store": store}
    async with root.stream("go", **kwargs) as run:
        async for event in run:
            if isinstance(event, ClarificationRequest):
                t_ask = common.now()
                await run.respond(event.request_id, "human said 42")
            elif isinstance(event, RunFinished):
                assert event.status == "completed", event
    t1 = common.now()
    assert t_ask > 0.0, "no ClarificationRequest reached the root stream"
    return run.result.output or "", t0, t_ask, t1


def _sqlite_store(path: Path) -> Any:
    """The durable SQLite store, or None while ``hpd_agent.store`` does not exist."""
    if importlib.util.find_spec("hpd_agent.store") is None:
        return None
    import hpd_agent.store as store_mod

    factory = getattr(store_mod, "SQLiteStore", None)
    if factory is None:
        return None
    return factory(str(path))


async def w4(repeats: int, depth: int, variant: str) -> dict[str, Any]:
    hitl = variant != "base"
    store = None
    if variant == "store":
        import tempfile

        tmp = Path(tempfile.mkdtemp(prefix="hpd-bench-"))
        store = _sqlite_store(tmp / "runs.db")
        if store is None:
            return {
                "ms_round_trip_full": None,
                "ms_answer_to_complete": None,
                "depth": depth,
                "variant": variant,
                "available": False,
                "mechanism": "n/a: hpd_agent.store (SQLiteStore) is not in this build",
            }
    root = build_hitl(depth, hitl)
    expect = "r done: human said 42" if depth == 1 else "r done: c done: human said 42"
    out = ""
    for _ in range(5):
        out, *_ = await w4_once(root, hitl, store)
    assert out == expect, out
    full: list[float] = []
    resume: list[float] = []
    for _ in range(repeats):
        out, t0, ta, t1 = await w4_once(root, hitl, store)
        full.append((t1 - t0) * 1e3)
        resume.append((t1 - ta) * 1e3)
    assert out == expect, out
    mechanism = {
        "hitl": "ask_user -> ClarificationRequest on the root stream -> run.respond(id, answer); "
        "the asking tool waits mid-turn",
        "store": "as hitl, with the durable SQLite store journaling the run",
        "base": "no HITL (baseline)",
    }[variant]
    return {
        "ms_round_trip_full": common.summarize(full),
        "ms_answer_to_complete": common.summarize(resume),
        "depth": depth,
        "variant": variant,
        "available": True,
        "mechanism": mechanism,
    }


async def w5(concurrency: int, turns: int) -> dict[str, Any]:
    agent = loop_agent(turns)
    await agent.run("go")
    outputs: list[str | None] = [None] * concurrency

    async def one(i: int) -> None:
        outputs[i] = (await agent.run("go")).output

    gc.collect()
    rss0 = common.rss_now_mb()
    t0 = common.now()
    async with anyio.create_task_group() as tg:
        for i in range(concurrency):
            tg.start_soon(one, i)
    dt = common.now() - t0
    assert all(o == "done" for o in outputs)
    rss_end = common.rss_now_mb()
    peak = common.peak_rss_mb()
    return {
        "total_s": dt,
        "peak_rss_mb": peak,
        "rss_before_mb": rss0,
        "rss_after_mb": rss_end,
        "kb_per_run": (peak - rss0) * 1024 / concurrency,
        "concurrency": concurrency,
        "turns": turns,
    }


async def events_throughput(fanout: int, chunks: int, runs: int) -> dict[str, Any]:
    """One root stream; ``fanout`` parallel sub-agents, each streaming ``chunks`` pieces."""
    speaker = Agent("speaker", model=streaming_text_model(chunks))
    root = Agent(
        "root",
        model=fanout_model(fanout, "speaker", '{"query":"talk"}'),
        tools=[speaker.as_tool()],
    )
    rates: list[float] = []
    totals: list[int] = []
    for i in range(runs + 1):
        gc.collect()
        n = deltas = 0
        t0 = common.now()
        async with root.stream("go") as run:
            async for event in run:
                n += 1
                if isinstance(event, TextDelta) and event.depth == 1:
                    deltas += 1
        dt = common.now() - t0
        assert run.result.output == "done", run.result
        assert deltas == fanout * chunks, deltas
        if i:  # the first run is a warm-up
            rates.append(n / dt)
            totals.append(n)
    return {
        "events_per_s": common.summarize(rates),
        "us_per_event": common.summarize([1e6 / r for r in rates]),
        "events_per_run": totals[-1],
        "fanout": fanout,
        "chunks": chunks,
    }


def _question(i: int) -> str:
    # distinct questions: identical pending ones may be merged into one by the coordinator
    return json.dumps({"question": f"Which one for item {i}?"})


async def pending_memory(pending: int) -> dict[str, Any]:
    """RSS per question while ``pending`` questions wait at once, then answer them all."""
    root = Agent(
        "root", model=fanout_model(pending, "ask_user", _question), tools=[ask_user()], max_turns=3
    )
    # warm-up: one small run through the same path
    warm = Agent("root", model=fanout_model(3, "ask_user", _question), tools=[ask_user()])
    async with warm.stream("go") as run:
        async for event in run:
            if isinstance(event, ClarificationRequest):
                await run.respond(event.request_id, "a")
    gc.collect()
    rss0 = common.rss_now_mb()
    t0 = common.now()
    seen: list[str] = []
    rss_pending = 0.0
    t_all_pending = 0.0
    async with root.stream("go") as run:
        async for event in run:
            if isinstance(event, ClarificationRequest):
                seen.append(event.request_id)
                if len(seen) == pending:
                    t_all_pending = common.now()
                    assert len(run.pending) == pending, len(run.pending)
                    rss_pending = common.rss_now_mb()
                    for rid in seen:
                        await run.respond(rid, "yes")
    t1 = common.now()
    assert run.result.output == "done", run.result
    results = [m for m in run.result.messages if isinstance(m, ToolResultMessage)]
    assert len(results) == pending and all(m.content == "yes" for m in results)
    return {
        "kb_per_pending": (rss_pending - rss0) * 1024 / pending,
        "rss_before_mb": rss0,
        "rss_pending_mb": rss_pending,
        "peak_rss_mb": common.peak_rss_mb(),
        "s_to_all_pending": t_all_pending - t0,
        "s_answer_all_to_complete": t1 - t_all_pending,
        "pending": pending,
    }


def stub_cost(n: int = 20000) -> float:
    """µs per scripted-model call (what the fake model itself costs)."""
    model = loop_model(BIG)
    msgs = [ToolResultMessage(tool_call_id="c5", name="noop", content="ok")]
    params = ModelRequestParams()

    async def go() -> float:
        t0 = common.now()
        for _ in range(n):
            await model.request(msgs, params)
        return (common.now() - t0) / n * 1e6

    return anyio.run(go)


# ----------------------------------------------------------------------------- command line
WORKLOADS = ("W1", "W2", "W3", "W4", "W5", "EVENTS", "PENDING", "STUB")


def parse(argv: Sequence[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("workload", choices=WORKLOADS)
    p.add_argument("--turns", type=int, default=200, help="W1: model turns per run")
    p.add_argument("--fanout", type=int, default=200, help="W2: parallel calls")
    p.add_argument("--repeats", type=int, default=200, help="W3/W4: timed runs")
    p.add_argument("--runs", type=int, default=5, help="W1/W2/EVENTS: timed runs")
    p.add_argument("--concurrency", type=int, default=1000, help="W5: concurrent runs")
    p.add_argument("--w5-turns", type=int, default=5, help="W5: turns per run")
    p.add_argument("--depth", type=int, choices=(1, 2), default=2, help="W4: asker depth")
    p.add_argument("--variant", choices=("hitl", "base", "store"), default="hitl", help="W4")
    p.add_argument("--agents", type=int, default=100, help="EVENTS: parallel sub-agents")
    p.add_argument("--chunks", type=int, default=100, help="EVENTS: text pieces per sub-agent")
    p.add_argument("--pending", type=int, default=10_000, help="PENDING: questions at once")
    p.add_argument("--backend", choices=("asyncio", "trio"), default="asyncio")
    return p.parse_args(argv)


def main(argv: Sequence[str]) -> None:
    a = parse(argv)
    wl = a.workload
    common.calib_start()

    def go(fn: Any, *args: Any) -> dict[str, Any]:
        return anyio.run(fn, *args, backend=a.backend)

    if wl == "W1":
        m = go(w1, a.turns, a.runs)
    elif wl == "W2":
        m = go(w2, a.fanout, a.runs)
    elif wl == "W3":
        m = go(w3, a.repeats)
    elif wl == "W4":
        m = go(w4, a.repeats, a.depth, a.variant)
    elif wl == "W5":
        m = go(w5, a.concurrency, a.w5_turns)
    elif wl == "EVENTS":
        m = go(events_throughput, a.agents, a.chunks, a.runs)
    elif wl == "PENDING":
        m = go(pending_memory, a.pending)
    else:
        m = {"stub_us_per_call": stub_cost()}
    common.emit(FW, wl, m, VERSIONS, {"backend": a.backend})


if __name__ == "__main__":
    main(sys.argv[1:])
