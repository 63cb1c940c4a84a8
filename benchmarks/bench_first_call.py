"""What the first model call of a process costs: from ``Agent(model="openai/...")`` built (and
some other work done) to the first request's answer, against a loopback OpenAI-compatible
server (``tests/_openai_server.py``; no network).

    python benchmarks/bench_first_call.py                 # gaps 0 s and 2 s, 5 processes each
    python benchmarks/bench_first_call.py --gaps 0 2 5 --repeats 3

Each figure is measured in a fresh process (importing litellm is a once-per-process cost):
the process imports hpd_agent, builds the agent, spends ``gap`` seconds on other work (it
waits, as a CLI or a server does while the user types or the app starts up), then times
``agent.run("hi")`` (the first call) and a second ``agent.run`` (the warm cost, for
reference). Medians over the processes are printed, in seconds, with the slowest process.

On a 2-core VM (3 processes each), before the background import (commit 6c47916) and after:
gap 2 s: 2.79 s -> 0.83 s; gap 5 s: 2.59 s -> 0.32 s; gap 0: unchanged within noise
(2.7-5.2 s either way). The second call costs 0.01-0.03 s in both.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def child(gap: float) -> None:
    sys.path[:0] = [str(REPO), str(REPO / "tests")]
    import anyio
    from _openai_server import OpenAIServer

    from hpd_agent import Agent

    with OpenAIServer() as server:
        server.push(("first", []), ("second", []))
        agent = Agent("Bench", model="openai/served", api_base=server.url, api_key="sk-test")
        time.sleep(gap)  # the other work: the app starting up, the user typing
        start = time.perf_counter()
        first = anyio.run(agent.run, "hi", backend="asyncio")
        first_s = time.perf_counter() - start
        start = time.perf_counter()
        second = anyio.run(agent.run, "again", backend="asyncio")
        second_s = time.perf_counter() - start
    assert (first.output, second.output) == ("first", "second"), (first.output, second.output)
    print("RESULT_JSON " + json.dumps({"gap": gap, "first": first_s, "second": second_s}))


def measure(gap: float) -> dict[str, float]:
    env = {**os.environ, "HPD_AGENT_ALLOW_MODEL_REQUESTS": "1"}
    out = subprocess.run(
        [sys.executable, __file__, "--child", str(gap)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=True,
    )
    line = next(x for x in out.stdout.splitlines() if x.startswith("RESULT_JSON "))
    return json.loads(line.removeprefix("RESULT_JSON "))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gaps", type=float, nargs="+", default=[0.0, 2.0])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--child", type=float, default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child is not None:
        child(args.child)
        return
    print(f"{'gap (s)':>8} {'first call (s)':>15} {'slowest (s)':>12} {'second call (s)':>16}")
    for gap in args.gaps:
        runs = [measure(gap) for _ in range(args.repeats)]
        firsts = [r["first"] for r in runs]
        seconds = [r["second"] for r in runs]
        print(
            f"{gap:>8.1f} {statistics.median(firsts):>15.3f} {max(firsts):>12.3f} "
            f"{statistics.median(seconds):>16.3f}"
        )


if __name__ == "__main__":
    main()
