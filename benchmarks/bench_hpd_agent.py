"""hpd_agent framework-overhead benchmark with scripted models (no network, no LLM).

Same command line and ``RESULT_JSON`` contract as the peer benches in ``benchmarks/peers/``
(``bench_<framework>.py``), whose ``_common`` module it imports first (environment, network
guard, timing, RSS, calibration kernel)::

    python benchmarks/bench_hpd_agent.py W1|W2|W3|W4|W5|EVENTS|PENDING|STUB [options]
        [--store none|memory|sqlite|postgres] [--dsn DSN]

Workloads (the peers' semantics, expressed in hpd_agent's own API):

- W1: one agent, a sequential tool loop (``--turns`` model turns, one noop tool call each).
- W2: one model turn with ``--fanout`` parallel calls of an async noop tool.
- W3: agents as tools, depth 3 (root -> child -> grandchild via ``Agent.as_tool``).
- W4: human in the loop: ``ask_user`` at depth ``--depth`` (1 or 2) answered with
  ``run.respond`` from a ``stream()`` loop; ``--variant base`` is the same tree whose tool
  answers by itself (no HITL); ``--variant store`` is the HITL round trip with the durable
  store (``--store``, default SQLite).
- W5: ``--concurrency`` concurrent ``run()`` s of ``--w5-turns`` turns each, with peak RSS.
- EVENTS: one root stream, ``--agents`` parallel sub-agents each streaming ``--chunks``
  text pieces; events/s seen by the consumer.
- PENDING: ``--pending`` questions pending at once (parallel ``ask_user`` calls); RSS per
  pending question, then every question is answered and the run must complete.
- STUB: the scripted model's own cost per call.

``--store`` journals W1, W4 and W5 in a store: ``sqlite`` a new file (``sqlite-os``: with
``durability="os"``, an fsync per commit), ``postgres`` a new
database on ``--dsn``'s server (a private server is started when no DSN is given; see
``peers/_postgres.py``), ``memory`` the ``MemoryStore``. ``W1 --variant journal`` times W1
with the store and without, alternating in one process, and reports the journal's cost per
turn (``journal_us_per_turn``: the difference, pair by pair).

The scripted models decide the next step from the last message only (the turn number is in
the tool call id), like the peers' stubs: O(1), stateless, safe under concurrency.
"""

from __future__ import annotations

import sys
from pathlib import Path

# The shared harness is benchmarks/peers/_common.py; it must be imported before anything
# else (it sets the environment and installs the network guard). Run from anywhere: import
# this checkout's hpd_agent, not an installed one.
_HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(_HERE / "peers"), str(_HERE.parent)]

import _common as common  # noqa: E402  (must come first: env, telemetry off, network guard)

# isort: split
import argparse  # noqa: E402
import contextlib  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import AsyncIterator, Callable, Iterator, Sequence  # noqa: E402
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
from hpd_agent.store import MemoryStore, SQLiteStore, Store  # noqa: E402
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


def loop_model(turns: int, tool_name: str = "noop", *, yields: bool = False) -> FunctionModel:
    """Call ``tool_name`` once per turn, ``turns`` times, then answer "done"; with
    ``yields``, each call first lets the event loop run other tasks (as a real model's
    network round trip does), so concurrent runs really run at once."""

    async def loop(messages: Sequence[Message], info: ModelRequestParams) -> ModelResponse:
        if yields:
            await anyio.lowlevel.checkpoint()
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


def loop_agent(turns: int, *, yields: bool = False) -> Agent:
    return Agent("loop", model=loop_model(turns, yields=yields), tools=[noop], max_turns=turns + 1)


# ----------------------------------------------------------------------------- workloads
@contextlib.asynccontextmanager
async def open_store(kind: str, dsn: str | None) -> AsyncIterator[Store | None]:
    """The store named by ``--store`` on fresh storage (None for ``none``); closed after."""
    if kind == "none":
        yield None
        return
    with contextlib.ExitStack() as stack:
        if kind == "memory":
            store: Store = MemoryStore()
        elif kind in ("sqlite", "sqlite-os"):
            tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="hpd-bench-"))
            durability = "os" if kind == "sqlite-os" else "process"
            store = SQLiteStore(Path(tmp) / "runs.db", durability=durability)
        else:
            import _postgres

            from hpd_agent.store import PostgresStore

            store = PostgresStore(stack.enter_context(_postgres.database(dsn)))
        try:
            yield store
        finally:
            await store.aclose()


async def w1(turns: int, runs: int, kind: str = "none", dsn: str | None = None) -> dict[str, Any]:
    agent = loop_agent(turns)
    async with open_store(kind, dsn) as store:
        r = await loop_agent(10).run("go", store=store)
        assert r.output == "done"
        samples: list[float] = []
        for _ in range(runs):
            gc.collect()
            t0 = common.now()
            r = await agent.run("go", store=store)
            dt = common.now() - t0
            assert r.output == "done", r
            samples.append(dt / turns * 1e6)
    # prompt + (assistant call + tool result) per turn + final answer
    assert len(r.messages) == 2 * turns + 2, len(r.messages)
    return {"us_per_turn": common.summarize(samples), "turns": turns, "store": kind}


async def w1_journal(turns: int, runs: int, kind: str, dsn: str | None) -> dict[str, Any]:
    """W1 with the store and without, alternating in one process: the journal's cost."""
    agent = loop_agent(turns)
    async with open_store(kind, dsn) as store:
        await agent.run("go", store=store)
        await agent.run("go")
        on: list[float] = []
        off: list[float] = []
        for _ in range(runs):
            for with_store, out in ((store, on), (None, off)):
                gc.collect()
                t0 = common.now()
                r = await agent.run("go", store=with_store)
                out.append((common.now() - t0) / turns * 1e6)
                assert r.output == "done", r
    return {
        "us_per_turn": common.summarize(on),
        "us_per_turn_in_memory": common.summarize(off),
        "journal_us_per_turn": common.summarize([x - y for x, y in zip(on, off, strict=True)]),
        "turns": turns,
        "store": kind,
    }


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
        r = await root.run("go", store=store)
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


async def w4(
    repeats: int, depth: int, variant: str, kind: str = "none", dsn: str | None = None
) -> dict[str, Any]:
    hitl = variant != "base"
    root = build_hitl(depth, hitl)
    expect = "r done: human said 42" if depth == 1 else "r done: c done: human said 42"
    out = ""
    full: list[float] = []
    resume: list[float] = []
    async with open_store(kind, dsn) as store:
        for _ in range(5):
            out, *_ = await w4_once(root, hitl, store)
        assert out == expect, out
        for _ in range(repeats):
            out, t0, ta, t1 = await w4_once(root, hitl, store)
            full.append((t1 - t0) * 1e3)
            resume.append((t1 - ta) * 1e3)
    assert out == expect, out
    mechanism = {
        "hitl": "ask_user -> ClarificationRequest on the root stream -> run.respond(id, answer); "
        "the asking tool waits mid-turn",
        "base": "no HITL (baseline)",
    }["base" if not hitl else "hitl"]
    if store is not None:
        mechanism += f", the {kind} store journaling the run"
    return {
        "ms_round_trip_full": common.summarize(full),
        "ms_answer_to_complete": common.summarize(resume),
        "depth": depth,
        "variant": variant,
        "store": kind,
        "mechanism": mechanism,
    }


@contextlib.contextmanager
def collector_time() -> Iterator[dict[str, float]]:
    """The cyclic GC's collections while the block runs: ``n``, ``full`` (generation 2)
    and ``s`` (seconds in them), counted by a ``gc.callbacks`` hook."""
    seen = {"n": 0, "full": 0, "s": 0.0}
    started = [0.0]

    def hook(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started[0] = common.now()
            return
        seen["n"] += 1
        seen["full"] += info["generation"] == 2
        seen["s"] += common.now() - started[0]

    gc.callbacks.append(hook)
    try:
        yield seen
    finally:
        gc.callbacks.remove(hook)


async def w5(
    concurrency: int,
    turns: int,
    kind: str = "none",
    dsn: str | None = None,
    interleaved: bool = False,
) -> dict[str, Any]:
    agent = loop_agent(turns, yields=interleaved)
    outputs: list[str | None] = [None] * concurrency
    async with open_store(kind, dsn) as store:
        await agent.run("go", store=store)

        async def one(i: int) -> None:
            outputs[i] = (await agent.run("go", store=store)).output

        gc.collect()
        rss0 = common.rss_now_mb()
        thresholds = gc.get_threshold()
        with collector_time() as collector:
            t0, c0 = common.now(), time.process_time()
            async with anyio.create_task_group() as tg:
                for i in range(concurrency):
                    tg.start_soon(one, i)
            dt, cpu = common.now() - t0, time.process_time() - c0
    assert all(o == "done" for o in outputs)
    assert gc.get_threshold() == thresholds, "the store left the collector tuned"
    rss_end = common.rss_now_mb()
    peak = common.peak_rss_mb()
    return {
        "total_s": dt,
        "cpu_s": cpu,  # the process's CPU time (not a PostgreSQL server's): steadier under load
        "peak_rss_mb": peak,
        "rss_before_mb": rss0,
        "rss_after_mb": rss_end,
        "kb_per_run": (peak - rss0) * 1024 / concurrency,
        "concurrency": concurrency,
        "turns": turns,
        "store": kind,
        "interleaved": interleaved,
        # The cyclic GC's collections during the runs and the time they took.
        "gc_s": collector["s"],
        "gc_collections": collector["n"],
        "gc_full": collector["full"],
        # Group commits of the store (``hpd_agent.store._group``), when it made any.
        "group_commits": getattr(getattr(store, "_group", None), "batches", 0),
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
STORES = ("none", "memory", "sqlite", "sqlite-os", "postgres")


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
    p.add_argument(
        "--variant",
        choices=("hitl", "base", "store", "journal", "interleaved"),
        default="hitl",
        help="W4: hitl, base, store (hitl with --store, default sqlite); W1: journal; W5: "
        "interleaved (each model call yields to the event loop once, as a real model's "
        "network round trip does, so the runs really run at once)",
    )
    p.add_argument("--store", choices=STORES, default=None, help="W1/W4/W5: journal there")
    p.add_argument("--dsn", default=None, help="--store postgres: the server (default: start one)")
    p.add_argument("--agents", type=int, default=100, help="EVENTS: parallel sub-agents")
    p.add_argument("--chunks", type=int, default=100, help="EVENTS: text pieces per sub-agent")
    p.add_argument("--pending", type=int, default=10_000, help="PENDING: questions at once")
    p.add_argument("--backend", choices=("asyncio", "trio"), default="asyncio")
    return p.parse_args(argv)


def main(argv: Sequence[str]) -> None:
    a = parse(argv)
    wl = a.workload
    store = a.store or ("sqlite" if a.variant in ("store", "journal") else "none")
    if a.variant == "journal" and (wl != "W1" or store == "none"):
        raise SystemExit("--variant journal is for W1 with a --store (default sqlite)")
    if store != "none" and wl not in ("W1", "W4", "W5"):
        raise SystemExit("--store is for W1, W4 and W5")
    common.calib_start()

    def go(fn: Any, *args: Any) -> dict[str, Any]:
        return anyio.run(fn, *args, backend=a.backend)

    if wl == "W1" and a.variant == "journal":
        m = go(w1_journal, a.turns, a.runs, store, a.dsn)
    elif wl == "W1":
        m = go(w1, a.turns, a.runs, store, a.dsn)
    elif wl == "W2":
        m = go(w2, a.fanout, a.runs)
    elif wl == "W3":
        m = go(w3, a.repeats)
    elif wl == "W4":
        m = go(w4, a.repeats, a.depth, a.variant, store, a.dsn)
    elif wl == "W5":
        m = go(w5, a.concurrency, a.w5_turns, store, a.dsn, a.variant == "interleaved")
    elif wl == "EVENTS":
        m = go(events_throughput, a.agents, a.chunks, a.runs)
    elif wl == "PENDING":
        m = go(pending_memory, a.pending)
    else:
        m = {"stub_us_per_call": stub_cost()}
    common.emit(FW, wl, m, VERSIONS, {"backend": a.backend})


if __name__ == "__main__":
    main(sys.argv[1:])
