"""LangGraph's framework overhead on W1-W5, in memory and durable, with a scripted chat model.

    python benchmarks/peers/bench_langgraph.py W1|W2|W3|W4|W5|STUB [options]
        [--checkpointer [memory|sqlite|sqlite-sync|postgres]] [--dsn DSN] [--variant ...]

How each workload is written in LangGraph's own API:

- Agents are ``langgraph.prebuilt.create_react_agent`` graphs (one ``Send`` per tool call).
- W1/W5: one graph whose model calls the ``noop`` tool once per turn.
- W2: one model turn with ``--fanout`` calls of ``noop``.
- W3: agents as tools: a tool whose body invokes the child graph (it runs as a subgraph).
- W4 ``--variant hitl`` (default): the innermost tool calls ``interrupt()``; the graph
  stops, and ``ainvoke(Command(resume=answer))`` on the same thread resumes it (replaying
  the interrupted node). Needs a checkpointer (``memory`` unless one is named); a child
  graph uses its parent's. ``--variant base``: the tool answers by itself.

``--checkpointer`` (alone: ``memory``) journals every step: ``memory`` is
``InMemorySaver``; ``sqlite`` is ``AsyncSqliteSaver`` on a new file; ``sqlite-sync`` is the
synchronous ``SqliteSaver`` driven by ``graph.invoke`` (W1 and W4 only: it has no async
methods); ``postgres`` is ``AsyncPostgresSaver`` in a new database on ``--dsn``'s server (a
private server is started when no DSN is given). Every run gets a thread of its own.
``--durability`` passes LangGraph's ``durability`` (default: LangGraph's, ``async``);
``--sqlite-synchronous NORMAL`` sets the SQLite checkpointers to the synchronous level of
hpd_agent's SQLite store (WAL, ``synchronous=NORMAL``: survives a crash of the process, not
of the OS) instead of SQLite's default ``FULL`` (an fsync per commit).
``W1 --variant journal`` times W1 with the checkpointer and without, interleaved in one
process, and reports the difference per turn.

``ScriptedChat`` is a ``BaseChatModel`` with a native ``_agenerate`` (langchain's fake chat
models are sync-only, so their async path costs a thread hop per call). It decides from the
last message only, with the turn number in the tool call id: O(1), safe under concurrency.
"""

from __future__ import annotations

import sys

import _common as common  # first: environment, network guard

# isort: split

import asyncio
import contextlib
import gc
import itertools
import tempfile
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import StructuredTool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import create_react_agent
from langgraph.types import Command, interrupt

FW = "langgraph"
VERSIONS = common.pkg_versions(
    "langgraph",
    "langgraph-prebuilt",
    "langgraph-checkpoint",
    "langgraph-checkpoint-sqlite",
    "langgraph-checkpoint-postgres",
    "langchain-core",
    "pydantic",
)
ANSWER = "human said 42"
CHECKPOINTERS = ("memory", "sqlite", "sqlite-sync", "postgres")
Policy = Callable[[BaseMessage], AIMessage]


# ----------------------------------------------------------------------------- scripted model
class ScriptedChat(BaseChatModel):
    """A chat model whose reply is ``policy(last message)``."""

    policy: Any

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any) -> Any:
        return ChatResult(generations=[ChatGeneration(message=self.policy(messages[-1]))])

    async def _agenerate(
        self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> Any:
        return ChatResult(generations=[ChatGeneration(message=self.policy(messages[-1]))])


def calls(name: str, ids: list[str], args: dict[str, Any] | None = None) -> AIMessage:
    return AIMessage(
        content="",
        tool_calls=[{"name": name, "args": args or {}, "id": i, "type": "tool_call"} for i in ids],
    )


def loop_policy(turns: int) -> Policy:
    def policy(last: BaseMessage) -> AIMessage:
        done = int(last.tool_call_id[1:]) if isinstance(last, ToolMessage) else 0
        return AIMessage(content="done") if done >= turns else calls("noop", [f"c{done + 1}"])

    return policy


def fanout_policy(n: int) -> Policy:
    def policy(last: BaseMessage) -> AIMessage:
        if isinstance(last, ToolMessage):
            return AIMessage(content="done")
        return calls("noop", [f"c{i}" for i in range(n)])

    return policy


def one_call_policy(tool_name: str, who: str, args: dict[str, Any] | None = None) -> Policy:
    def policy(last: BaseMessage) -> AIMessage:
        if isinstance(last, ToolMessage):
            return AIMessage(content=f"{who} done: {last.content}")
        return calls(tool_name, [f"{who}1"], args)

    return policy


# ----------------------------------------------------------------------------- graphs
def make_tool(name: str, doc: str, sync: Callable[..., str], coro: Callable[..., Any]) -> Any:
    """A tool with both a sync and an async body, so one graph serves invoke and ainvoke."""
    return StructuredTool.from_function(func=sync, coroutine=coro, name=name, description=doc)


async def _ok() -> str:
    return "ok"


NOOP = make_tool("noop", "Trivial tool returning a constant.", lambda: "ok", _ok)


def graph(policy: Policy, tools: list[Any], checkpointer: Any = None) -> Any:
    return create_react_agent(ScriptedChat(policy=policy), tools, checkpointer=checkpointer)


def prompt(text: str = "go") -> dict[str, Any]:
    return {"messages": [HumanMessage(text)]}


def final_text(state: dict[str, Any]) -> str:
    return state["messages"][-1].content


def agent_tool(name: str, child: Any) -> Any:
    """``child`` graph as the tool ``name`` (invoked inside the parent's tool node)."""

    def sync(q: str) -> str:
        return final_text(child.invoke(prompt(q)))

    async def coro(q: str) -> str:
        return final_text(await child.ainvoke(prompt(q)))

    return make_tool(name, f"{name.removeprefix('call_')} agent", sync, coro)


class SETTINGS:
    """Command-line settings the checkpointers read."""

    sqlite_synchronous: str | None = None  # None: LangGraph's (SQLite's default, FULL)


@contextlib.asynccontextmanager
async def checkpointer(kind: str | None, dsn: str | None) -> AsyncIterator[Any]:
    """The named checkpointer, on fresh storage; None for none."""
    if kind is None:
        yield None
    elif kind == "memory":
        yield InMemorySaver()
    elif kind in ("sqlite", "sqlite-sync"):
        with tempfile.TemporaryDirectory(prefix="lg-bench-") as tmp:
            path = str(Path(tmp) / "checkpoints.db")
            if kind == "sqlite":
                from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

                async with AsyncSqliteSaver.from_conn_string(path) as saver:
                    await saver.setup()
                    if SETTINGS.sqlite_synchronous:
                        await saver.conn.execute(
                            f"PRAGMA synchronous={SETTINGS.sqlite_synchronous}"
                        )
                    yield saver
            else:
                from langgraph.checkpoint.sqlite import SqliteSaver

                with SqliteSaver.from_conn_string(path) as saver:
                    saver.setup()
                    if SETTINGS.sqlite_synchronous:
                        saver.conn.execute(f"PRAGMA synchronous={SETTINGS.sqlite_synchronous}")
                    yield saver
    else:
        import _postgres
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

        with _postgres.database(dsn) as db:
            async with AsyncPostgresSaver.from_conn_string(db) as saver:
                await saver.setup()
                yield saver
                del saver


class Invoker:
    """Runs graphs the way the checkpointer wants (sync for ``sqlite-sync``), new thread each."""

    def __init__(self, kind: str | None, durability: str | None, recursion: int) -> None:
        self.sync = kind == "sqlite-sync"
        self.threads = kind is not None
        self.durability = durability
        self.recursion = recursion
        self._ids = itertools.count()

    def config(self, thread: str | None = None) -> dict[str, Any]:
        cfg: dict[str, Any] = {"recursion_limit": self.recursion}
        if self.threads:
            cfg["configurable"] = {"thread_id": thread or f"t{next(self._ids)}"}
        return cfg

    async def __call__(self, g: Any, value: Any, cfg: dict[str, Any]) -> dict[str, Any]:
        kw: dict[str, Any] = {} if self.durability is None else {"durability": self.durability}
        if self.sync:
            return g.invoke(value, cfg, **kw)
        return await g.ainvoke(value, cfg, **kw)


# ----------------------------------------------------------------------------- W1, W2, W3, W5
async def w1(turns: int, runs: int, kind: str | None, dsn: str | None, a: Any) -> dict[str, Any]:
    invoke = Invoker(kind, a.durability, 2 * turns + 10)
    async with checkpointer(kind, dsn) as cp:
        g = graph(loop_policy(turns), [NOOP], cp)
        assert (
            final_text(
                await invoke(
                    graph(loop_policy(min(10, turns)), [NOOP], cp), prompt(), invoke.config()
                )
            )
            == "done"
        )
        samples: list[float] = []
        state: dict[str, Any] = {}
        for _ in range(runs):
            gc.collect()
            cfg = invoke.config()
            t0 = common.now()
            state = await invoke(g, prompt(), cfg)
            samples.append((common.now() - t0) / turns * 1e6)
            assert final_text(state) == "done"
        assert len(state["messages"]) == 2 * turns + 2
    return {"us_per_turn": common.summarize(samples), "turns": turns, "checkpointer": kind}


async def w1_journal(turns: int, runs: int, kind: str, dsn: str | None, a: Any) -> dict[str, Any]:
    """W1 with and without the checkpointer, alternating, in one process."""
    durable = Invoker(kind, a.durability, 2 * turns + 10)
    plain = Invoker(None, None, 2 * turns + 10)
    async with checkpointer(kind, dsn) as cp:
        with_cp = graph(loop_policy(turns), [NOOP], cp)
        without = graph(loop_policy(turns), [NOOP])
        await durable(with_cp, prompt(), durable.config())
        await plain(without, prompt(), plain.config())
        on: list[float] = []
        off: list[float] = []
        for _ in range(runs):
            for invoke, g, out in ((durable, with_cp, on), (plain, without, off)):
                gc.collect()
                cfg = invoke.config()
                t0 = common.now()
                assert final_text(await invoke(g, prompt(), cfg)) == "done"
                out.append((common.now() - t0) / turns * 1e6)
    return journal_metrics(on, off, turns, kind)


def journal_metrics(on: list[float], off: list[float], turns: int, store: str) -> dict[str, Any]:
    """Per-turn cost with and without journaling, and their difference per pair of runs."""
    return {
        "us_per_turn": common.summarize(on),
        "us_per_turn_in_memory": common.summarize(off),
        "journal_us_per_turn": common.summarize([x - y for x, y in zip(on, off, strict=True)]),
        "turns": turns,
        "checkpointer": store,
    }


async def w2(fanout: int, runs: int) -> dict[str, Any]:
    g = graph(fanout_policy(fanout), [NOOP])
    await graph(fanout_policy(10), [NOOP]).ainvoke(prompt())
    totals: list[float] = []
    for _ in range(runs):
        gc.collect()
        t0 = common.now()
        state = await g.ainvoke(prompt())
        totals.append(common.now() - t0)
        assert final_text(state) == "done"
        assert sum(isinstance(m, ToolMessage) for m in state["messages"]) == fanout
    return {
        "total_ms": common.summarize([t * 1e3 for t in totals]),
        "us_per_call": common.summarize([t / fanout * 1e6 for t in totals]),
        "fanout": fanout,
    }


async def w3(repeats: int) -> dict[str, Any]:
    grandchild = graph(one_call_policy("noop", "g"), [NOOP])
    child = graph(
        one_call_policy("call_grandchild", "c", {"q": "go"}),
        [agent_tool("call_grandchild", grandchild)],
    )
    root = graph(one_call_policy("call_child", "r", {"q": "go"}), [agent_tool("call_child", child)])
    expect = "r done: c done: g done: ok"
    for _ in range(5):
        assert final_text(await root.ainvoke(prompt())) == expect
    samples: list[float] = []
    for _ in range(repeats):
        t0 = common.now()
        output = final_text(await root.ainvoke(prompt()))
        samples.append((common.now() - t0) * 1e3)
        assert output == expect, output
    return {"ms_per_run": common.summarize(samples), "repeats": repeats}


async def w5(
    concurrency: int, turns: int, kind: str | None, dsn: str | None, a: Any
) -> dict[str, Any]:
    if kind == "sqlite-sync":
        raise SystemExit("W5 runs concurrently: use --checkpointer sqlite (async), not sqlite-sync")
    invoke = Invoker(kind, a.durability, 2 * turns + 10)
    async with checkpointer(kind, dsn) as cp:
        g = graph(loop_policy(turns), [NOOP], cp)
        await invoke(g, prompt(), invoke.config())
        configs = [invoke.config() for _ in range(concurrency)]
        gc.collect()
        rss0 = common.rss_now_mb()
        t0 = common.now()
        states = await asyncio.gather(*(invoke(g, prompt(), c) for c in configs))
        total = common.now() - t0
        assert all(final_text(s) == "done" for s in states)
    return {
        "total_s": total,
        "peak_rss_mb": common.peak_rss_mb(),
        "rss_before_mb": rss0,
        "rss_after_mb": common.rss_now_mb(),
        "concurrency": concurrency,
        "turns": turns,
        "checkpointer": kind,
    }


# ----------------------------------------------------------------------------- W4
def build_hitl(depth: int, hitl: bool, cp: Any) -> Any:
    def ask() -> str:
        return f"human said {interrupt({'question': 'what?'})}" if hitl else ANSWER

    async def ask_async() -> str:
        return ask()

    ask_tool = make_tool("ask_human", "Needs a human answer.", ask, ask_async)
    if depth == 1:
        return graph(one_call_policy("ask_human", "r"), [ask_tool], cp)
    child = graph(one_call_policy("ask_human", "c"), [ask_tool])  # uses the parent's checkpointer
    return graph(
        one_call_policy("call_child", "r", {"q": "go"}), [agent_tool("call_child", child)], cp
    )


async def w4_once(root: Any, hitl: bool, invoke: Invoker) -> tuple[str, float, float, float]:
    cfg = invoke.config()
    t0 = common.now()
    state = await invoke(root, prompt(), cfg)
    t_ask = common.now()
    if not hitl:
        return final_text(state), t0, t_ask, t_ask
    assert state.get("__interrupt__"), "expected an interrupt"
    state = await invoke(root, Command(resume="42"), cfg)  # the human answers right away
    t1 = common.now()
    assert not state.get("__interrupt__")
    return final_text(state), t0, t_ask, t1


async def w4(
    repeats: int, depth: int, variant: str, kind: str | None, dsn: str | None, a: Any
) -> dict[str, Any]:
    hitl = variant == "hitl"
    kind = kind or "memory"
    invoke = Invoker(kind, a.durability, 50)
    expect = f"r done: {ANSWER}" if depth == 1 else f"r done: c done: {ANSWER}"
    async with checkpointer(kind, dsn) as cp:
        root = build_hitl(depth, hitl, cp)
        for _ in range(5):
            assert (await w4_once(root, hitl, invoke))[0] == expect
        full: list[float] = []
        answered: list[float] = []
        for _ in range(repeats):
            output, t0, t_ask, t1 = await w4_once(root, hitl, invoke)
            assert output == expect, output
            full.append((t1 - t0) * 1e3)
            answered.append((t1 - t_ask) * 1e3)
    mechanism = (
        f"interrupt() in the tool + invoke(Command(resume=...)) with the {kind} checkpointer"
        if hitl
        else f"no HITL (baseline, same graphs with the {kind} checkpointer)"
    )
    return {
        "ms_round_trip_full": common.summarize(full),
        "ms_answer_to_complete": common.summarize(answered),
        "depth": depth,
        "variant": variant,
        "checkpointer": kind,
        "mechanism": mechanism,
    }


def stub_cost(n: int = 20000) -> float:
    """µs per scripted reply (policy plus ``ChatResult``)."""
    policy = loop_policy(10**9)
    last = ToolMessage(content="ok", tool_call_id="c5")
    t0 = common.now()
    for _ in range(n):
        ChatResult(generations=[ChatGeneration(message=policy(last))])
    return (common.now() - t0) / n * 1e6


def main(argv: list[str]) -> None:
    p = common.argument_parser("LangGraph: framework overhead with a scripted chat model")
    p.add_argument(
        "--variant",
        choices=("hitl", "base", "journal"),
        default="hitl",
        help="W4: hitl/base; W1: journal",
    )
    p.add_argument("--checkpointer", nargs="?", const="memory", choices=CHECKPOINTERS)
    p.add_argument("--durability", choices=("sync", "async", "exit"), default=None)
    p.add_argument(
        "--sqlite-synchronous",
        choices=("NORMAL", "FULL"),
        default=None,
        help="PRAGMA synchronous for the SQLite checkpointers (default: LangGraph's, FULL); "
        "NORMAL in WAL mode survives a process crash, not an OS crash, like hpd_agent's store",
    )
    a = p.parse_args(argv)
    kind, dsn = a.checkpointer, a.dsn
    SETTINGS.sqlite_synchronous = a.sqlite_synchronous
    if a.variant == "journal" and (a.workload != "W1" or kind is None):
        p.error("--variant journal is for W1 with a --checkpointer")
    if kind == "sqlite-sync" and a.workload not in ("W1", "W4"):
        p.error("--checkpointer sqlite-sync is for W1 and W4")
    common.calib_start()
    run = asyncio.run
    if a.workload == "W1" and a.variant == "journal":
        metrics = run(w1_journal(a.turns, a.runs, kind, dsn, a))
    elif a.workload == "W1":
        metrics = run(w1(a.turns, a.runs, kind, dsn, a))
    elif a.workload == "W2":
        metrics = run(w2(a.fanout, a.runs))
    elif a.workload == "W3":
        metrics = run(w3(a.repeats))
    elif a.workload == "W4":
        metrics = run(w4(a.repeats, a.depth, a.variant, kind, dsn, a))
    elif a.workload == "W5":
        metrics = run(w5(a.concurrency, a.w5_turns, kind, dsn, a))
    else:
        metrics = {"stub_us_per_call": stub_cost()}
    if kind is not None:
        metrics["durability"] = a.durability or "async (LangGraph's default)"
    if kind in ("sqlite", "sqlite-sync"):
        metrics["sqlite_synchronous"] = a.sqlite_synchronous or "FULL (SQLite's default)"
    common.emit(FW, a.workload, metrics, VERSIONS)


if __name__ == "__main__":
    main(sys.argv[1:])
