"""Every ```python block of README.md and docs/ runs as written.

Each block runs alone in a fresh interpreter, in an empty temporary directory, offline. A
block is marked by an HTML comment on the line right before its fence:

- ``<!-- snippet: skip (why) -->``: not run (a fragment, or it needs something the test
  cannot give); it must still compile, and the test is reported skipped with the reason.
- ``<!-- snippet: openai (why) -->``: it needs ``OPENAI_API_KEY``; the test runs it against
  a loopback OpenAI-compatible server (``OPENAI_API_BASE``) whose model calls the first
  tool it is given (an agent, else ``ask_user`` with a question), then answers with text.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from _openai_server import OpenAIServer, Reply

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
_FENCE = re.compile(r"^```python\s*$")
_MARK = re.compile(r"^<!--\s*snippet:\s*(skip|openai)\s*(?:\((.*)\))?\s*-->\s*$")


@dataclass(frozen=True)
class Snippet:
    path: Path
    line: int  # of the opening fence, 1-based
    code: str
    mark: str | None  # "skip", "openai" or None
    reason: str

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def _snippets(path: Path) -> list[Snippet]:
    lines = path.read_text().splitlines()
    found: list[Snippet] = []
    i = 0
    while i < len(lines):
        if not _FENCE.match(lines[i]):
            i += 1
            continue
        start = i
        i += 1
        body: list[str] = []
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i])
            i += 1
        mark = _MARK.match(lines[start - 1]) if start > 0 else None
        found.append(
            Snippet(
                path=path,
                line=start + 1,
                code="\n".join(body) + "\n",
                mark=mark.group(1) if mark else None,
                reason=(mark.group(2) or "").strip() if mark else "",
            )
        )
        i += 1
    return found


SNIPPETS = [s for path in DOCS for s in _snippets(path)]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_"))}
    env.update(PYTHONPATH=str(ROOT), HPD_AGENT_ALLOW_MODEL_REQUESTS="0", PYTHONUNBUFFERED="1")
    env.update(extra)
    return env


def _run(snippet: Snippet, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    script = cwd / "snippet.py"
    script.write_text(snippet.code)
    return subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        # A bound for a hung snippet, not a speed check: one that imports litellm takes 30 s
        # and more on a loaded 2-core machine.
        timeout=300,
    )


def _a_model_that_calls_its_first_tool(body: dict[str, Any]) -> Reply:
    """Calls the first agent tool (else asks with ask_user), then answers with text."""
    messages = body["messages"]
    results = [m for m in messages if m["role"] == "tool"]
    if results:
        return (f"Done: {results[-1]['content']}", [])
    names = [t["function"]["name"] for t in body.get("tools", [])]
    agents = [n for n in names if n != "ask_user"]
    if agents:
        return ("", [(agents[0], json.dumps({"query": "the task"}))])
    if "ask_user" in names:
        question = {"question": "Which framework?", "options": ["Express", "FastAPI"]}
        return ("", [("ask_user", json.dumps(question))])
    return ("Done.", [])


def test_the_docs_have_snippets_and_every_mark_belongs_to_one() -> None:
    assert len(SNIPPETS) >= 10
    for path in DOCS:
        lines = path.read_text().splitlines()
        for n, line in enumerate(lines):
            if line.lstrip().startswith("<!-- snippet"):
                where = f"{path.relative_to(ROOT)}:{n + 1}"
                mark = _MARK.match(line)
                assert mark is not None, f"{where}: unreadable mark {line!r}"
                assert n + 1 < len(lines) and _FENCE.match(lines[n + 1]), (
                    f"{where}: a snippet mark must be the line right before a ```python fence"
                )
                assert mark.group(1) != "skip" or mark.group(2), f"{where}: say why it is skipped"


@pytest.mark.parametrize("snippet", SNIPPETS, ids=[s.id for s in SNIPPETS])
def test_snippet_runs(snippet: Snippet, tmp_path: Path) -> None:
    # Every block at least compiles (top-level await allowed only in a marked fragment).
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT if snippet.mark == "skip" else 0
    compile(snippet.code, snippet.id, "exec", flags=flags)
    if snippet.mark == "skip":
        pytest.skip(f"{snippet.id}: {snippet.reason}")
    if snippet.mark == "openai":
        with OpenAIServer() as server:
            server.script(_a_model_that_calls_its_first_tool)
            env = _env(
                OPENAI_API_BASE=server.url,
                OPENAI_API_KEY="sk-test",
                HPD_AGENT_ALLOW_MODEL_REQUESTS="1",
                LITELLM_LOCAL_MODEL_COST_MAP="True",
            )
            done = _run(snippet, tmp_path, env)
        assert server.requests, f"{snippet.id} made no model request"
    else:
        done = _run(snippet, tmp_path, _env())
    assert done.returncode == 0, f"{snippet.id} failed:\n{done.stdout}\n{done.stderr}"
    assert "Traceback" not in done.stderr, done.stderr


def test_the_guide_teaches_a_journaled_step_in_a_block_that_runs() -> None:
    """``ctx.step`` (a side effect before a question) is taught in the guide, not only in
    durability.md: a runnable block that resumes a run and shows the effect ran once."""
    guide = [s for s in SNIPPETS if s.path.name == "guide.md" and s.mark is None]
    taught = [s for s in guide if "await ctx.step(" in s.code and ".resume(" in s.code]
    assert taught, "no runnable guide block uses ctx.step across a resume"
    heading = "## A tool that acts, then asks: `ctx.step`"
    assert heading in (ROOT / "docs" / "guide.md").read_text()


_PUBLISHED_INSTALL = re.compile(r"""pip install\s+["']?hpd-agent\b""")


def test_extras_are_installed_from_the_checkout_until_the_package_is_published() -> None:
    code = [*(ROOT / "hpd_agent").rglob("*.py"), *(ROOT / "examples").rglob("*.py")]
    found = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in [*DOCS, *sorted(code)]
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if _PUBLISHED_INSTALL.search(line)
    ]
    assert found == []
    readme = (ROOT / "README.md").read_text()
    assert '.venv/bin/pip install -e ".[web]"' in readme
    # The README's two first-screen commands stay as they are.
    bash = re.findall(r"```bash\n(.*?)```", readme, re.DOTALL)
    assert bash[:2] == [
        "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/hpd-agent demo\n",
        '.venv/bin/pip install -e ".[dev]" && .venv/bin/python -m pytest\n',
    ]
