"""How long the ``hpd-agent`` command keeps a person waiting before it says anything.

    python benchmarks/bench_cli_start.py              # 5 processes per figure
    python benchmarks/bench_cli_start.py --runs 9

Each figure is the median over ``--runs`` fresh processes (``python -m hpd_agent.cli`` of this
checkout), in seconds from the process's start (the slowest run is shown too):

- ``demo_first_output``: ``hpd-agent demo --yes``: its first line (the banner);
- ``demo_first_agent_line``: the same run's next line, the first thing an agent says (the
  gap after the banner is what a person sees as silence);
- ``chat_prompt``: ``hpd-agent chat`` (offline): the ``you>`` prompt;
- ``missing_key_error``: ``hpd-agent chat --model openai/gpt-4o-mini`` with no
  ``OPENAI_API_KEY``: the error line, and the process has exited;
- ``model_chat_prompt``: ``hpd-agent chat --model openai/served --api-base URL`` (a real
  model whose library, litellm, loads): the ``you>`` prompt (nothing is sent to URL).

Nothing goes over the network. Prints a table and one ``RESULT_JSON {...}`` line.
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TIMEOUT = 120.0


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_"))}
    env.update(PYTHONPATH=str(REPO), COLUMNS="120", LITELLM_LOCAL_MODEL_COST_MAP="True")
    env.update(extra)
    return env


def _until(args: Sequence[str], done: Callable[[str], bool], env: dict[str, str]) -> float:
    """Seconds from starting ``hpd-agent ARGS`` until ``done(all output so far)`` holds (or,
    when it never does, until the process exits with ``done`` still false: an error)."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "hpd_agent.cli", *args],
        stdin=subprocess.PIPE,  # kept open: a prompt waits for input that does not come
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        cwd=REPO,
        env=env,
    )
    assert proc.stdout is not None
    seen = b""
    try:
        with selectors.DefaultSelector() as selector:
            selector.register(proc.stdout, selectors.EVENT_READ)
            while time.perf_counter() - start < TIMEOUT:
                if not selector.select(timeout=TIMEOUT):
                    break
                chunk = os.read(proc.stdout.fileno(), 65536)
                seen += chunk
                if done(seen.decode(errors="replace")):
                    return time.perf_counter() - start
                if not chunk:
                    break
        raise SystemExit(f"hpd-agent {' '.join(args)}: never got there; output:\n{seen!r}")
    finally:
        proc.kill()
        proc.wait()


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def _exited(args: Sequence[str], env: dict[str, str], expected: str) -> float:
    """Seconds until ``hpd-agent ARGS`` has exited; its output must contain ``expected``."""
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "hpd_agent.cli", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=TIMEOUT,
    )
    elapsed = time.perf_counter() - start
    if expected not in proc.stdout + proc.stderr:
        raise SystemExit(f"expected {expected!r}; got:\n{proc.stdout}{proc.stderr}")
    return elapsed


def measure(name: str) -> float:
    """One fresh process's figure ``name``, in seconds."""
    if name == "demo_first_output":
        return _until(["demo", "--yes"], lambda out: bool(_lines(out)), _env())
    if name == "demo_first_agent_line":
        # The banner, then (a complete line) whatever an agent says first.
        return _until(["demo", "--yes"], lambda out: len(_lines(out)) >= 2, _env())
    if name == "chat_prompt":
        return _until(["chat"], lambda out: "you>" in out, _env())
    if name == "missing_key_error":
        return _exited(["chat", "--model", "openai/gpt-4o-mini"], _env(), "OPENAI_API_KEY")
    if name == "model_chat_prompt":
        # Port 9 (discard) on loopback: nothing is sent before the first message anyway.
        args = ["chat", "--model", "openai/served", "--api-base", "http://127.0.0.1:9/v1"]
        return _until(args, lambda out: "you>" in out, _env())
    raise ValueError(name)


FIGURES = (
    "demo_first_output",
    "demo_first_agent_line",
    "chat_prompt",
    "missing_key_error",
    "model_chat_prompt",
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="processes per figure (default 5)")
    parser.add_argument("--only", nargs="*", choices=FIGURES, help="these figures only")
    args = parser.parse_args()
    names = args.only or list(FIGURES)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for _ in range(args.runs):  # interleaved: each figure sees the machine's same phases
        for name in names:
            samples[name].append(measure(name))
    print(f"{'figure':<24} {'median s':>9} {'slowest s':>10}   ({args.runs} processes each)")
    result: dict[str, dict[str, float]] = {}
    for name in names:
        median, slowest = statistics.median(samples[name]), max(samples[name])
        result[name] = {"median": round(median, 3), "max": round(slowest, 3)}
        print(f"{name:<24} {median:>9.2f} {slowest:>10.2f}")
    print("RESULT_JSON " + json.dumps({"runs": args.runs, "figures": result}))


if __name__ == "__main__":
    main()
