"""The ``hpd-agent`` command, driven as a person drives it: a real pseudo-terminal, pipes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pexpect
import pytest
from _openai_server import OpenAIServer, Reply

ROOT = Path(__file__).resolve().parent.parent
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_"))}
    env.update(PYTHONPATH=str(ROOT), HPD_AGENT_DEMO_PACE="0", COLUMNS="120")
    env.update(extra)
    return env


def _hpd(
    *args: str, stdin: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hpd_agent.cli", *args],
        input=stdin,
        stdin=subprocess.DEVNULL if stdin is None else None,
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env or _env(),
        timeout=120,
    )


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[Any]:
    """``hpd-agent demo`` in a real pseudo-terminal; expect() timeouts only bound failures."""
    child = pexpect.spawn(
        sys.executable,
        ["-m", "hpd_agent.cli", "demo", "--workdir", str(tmp_path)],
        cwd=str(ROOT),
        env=_env(HPD_AGENT_DEMO_PACE="0.002"),
        encoding="utf-8",
        timeout=60,
        dimensions=(50, 140),
    )
    try:
        yield child
    finally:
        child.close(force=True)


def test_demo_in_a_terminal_does_what_the_person_typed(terminal: Any, tmp_path: Path) -> None:
    terminal.expect(r"asks: .*Which framework: Express, FastAPI or Django\?")
    terminal.expect(r"\n> ")
    terminal.sendline("FastAPI")
    terminal.expect(r"wants to run .*write_file")
    before_prompt = terminal.before
    terminal.expect(r"\n> ")
    terminal.sendline("1")
    terminal.expect(r"Orchestrator's answer")
    terminal.expect(pexpect.EOF)
    after = ANSI.sub("", terminal.before)
    terminal.close()
    assert terminal.exitstatus == 0
    shown = ANSI.sub("", before_prompt)
    # What the agents did next follows the answer: the CodingAgent built with FastAPI...
    assert "You chose FastAPI" in shown
    assert "Building the auth system with FastAPI" in shown
    assert "auth_app.py" in shown
    assert "Express" not in shown.split("You chose FastAPI")[1]
    # ...wrote FastAPI code once approved, and said so.
    assert "Built the auth system with FastAPI in auth_app.py" in after
    assert "FastAPI" in (tmp_path / "auth_app.py").read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["auth_app.py"]


def test_demo_in_a_terminal_takes_a_number_and_a_denial_with_reason(
    terminal: Any, tmp_path: Path
) -> None:
    terminal.expect(r"asks: .*Which framework")
    terminal.expect(r"\n> ")
    terminal.sendline("3")  # 3) Django
    terminal.expect(r"wants to run .*write_file")
    terminal.expect(r"\n> ")
    terminal.sendline("3")  # deny
    terminal.expect("Reason")
    terminal.sendline("not in my repo")
    terminal.expect(pexpect.EOF)
    out = ANSI.sub("", terminal.before)
    terminal.close()
    assert terminal.exitstatus == 0
    assert "I did not write auth_views.py" in out
    assert "Reason: not in my repo" in out
    assert "Django" in out
    assert list(tmp_path.iterdir()) == []


def test_ctrl_c_cancels_the_demo_cleanly(terminal: Any, tmp_path: Path) -> None:
    terminal.expect(r"asks: .*Which framework")
    terminal.expect(r"\n> ")
    terminal.sendintr()
    terminal.expect("Cancelled")
    terminal.expect(pexpect.EOF)
    terminal.close()
    assert terminal.exitstatus == 130
    assert list(tmp_path.iterdir()) == []


def test_demo_with_yes_runs_unattended_with_defaults(tmp_path: Path) -> None:
    out = _hpd("demo", "--yes", "--workdir", str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert "(answered automatically: Express)" in out.stdout
    assert "(answered automatically: approve once)" in out.stdout
    assert "Express" in (tmp_path / "auth.js").read_text()


def test_demo_with_closed_stdin_does_not_hang(tmp_path: Path) -> None:
    out = _hpd("demo", "--workdir", str(tmp_path))  # stdin is /dev/null
    assert out.returncode == 0, out.stderr
    assert "Input is not a terminal" in out.stdout
    assert "Input closed: answering with defaults from now on." in out.stdout
    assert (tmp_path / "auth.js").exists()


def test_demo_reads_answers_piped_on_stdin(tmp_path: Path) -> None:
    out = _hpd("demo", "--workdir", str(tmp_path), stdin="django\n2\n")
    assert out.returncode == 0, out.stderr
    assert "You chose Django" in out.stdout
    assert "Django" in (tmp_path / "auth_views.py").read_text()


def test_chat_keeps_history_and_asks_questions() -> None:
    out = _hpd("chat", stdin="hello there\nwhat is hpd?\n2\nsecond message\n/exit\n")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "You said 'hello there'" in text
    assert "asks: Do you want a short or a detailed answer?" in text
    assert "You wanted a detailed answer to 'what is hpd?'" in text
    # The third turn sees the whole conversation so far.
    assert "This is message 3 of our chat (2 replies so far); your first was 'hello there'." in text
    assert text.rstrip().endswith("bye")


def test_chat_on_a_litellm_model_keeps_history(tmp_path: Path) -> None:
    with OpenAIServer() as server:
        server.push(("Hi! I am the loopback model.", []), ("You said hello earlier.", []))
        env = _env(
            OPENAI_API_BASE=server.url,
            OPENAI_API_KEY="sk-test",
            HPD_AGENT_ALLOW_MODEL_REQUESTS="1",
        )
        out = _hpd(
            "chat", "--model", "openai/gpt-4o-mini", stdin="hello\nwhat did I say?\n", env=env
        )
    assert out.returncode == 0, out.stderr
    assert "Assistant: Hi! I am the loopback model." in out.stdout
    assert "Assistant: You said hello earlier." in out.stdout
    second = server.requests[1]["messages"]
    assert [m["role"] for m in second] == ["system", "user", "assistant", "user"]
    assert second[1]["content"] == "hello"
    assert second[2]["content"] == "Hi! I am the loopback model."
    assert {t["function"]["name"] for t in server.requests[0]["tools"]} == {"ask_user"}


def _demo_on_a_model(body: dict[str, Any]) -> Reply:
    """Plays the demo's three agents the way a capable model would, from each request."""
    messages = body["messages"]
    system = messages[0]["content"]
    last = messages[-1]
    if system.startswith("You research"):
        return ("- hash passwords\n- short-lived tokens\n- rate-limit logins", [])
    if system.startswith("You build code"):
        query = next(m["content"] for m in messages if m["role"] == "user")
        if "Django" not in query:
            return ("Which framework: Express, FastAPI or Django?", [])
        if last["role"] == "tool":
            return (f"Django app written ({last['content']}).", [])
        return ("", [("write_file", json.dumps({"path": "views.py", "text": "# Django views\n"}))])
    # The Orchestrator.
    results = [m for m in messages if m["role"] == "tool"]
    if not results:
        return (
            "Starting both.",
            [
                ("ResearchAgent", json.dumps({"query": "auth best practices"})),
                ("CodingAgent", json.dumps({"query": "Build an auth system"})),
            ],
        )
    if results[-1]["content"].endswith("?"):
        question = {"question": results[-1]["content"], "options": ["Express", "FastAPI", "Django"]}
        return ("", [("ask_user", json.dumps(question))])
    if len(results) == 3:
        answer = results[-1]["content"]
        return ("", [("CodingAgent", json.dumps({"query": f"Build an auth system with {answer}"}))])
    return (f"All done: {results[-1]['content']}", [])


def test_demo_runs_the_same_agents_on_a_litellm_model(tmp_path: Path) -> None:
    with OpenAIServer() as server:
        server.script(_demo_on_a_model)
        env = _env(
            OPENAI_API_BASE=server.url,
            OPENAI_API_KEY="sk-test",
            HPD_AGENT_ALLOW_MODEL_REQUESTS="1",
        )
        out = _hpd(
            "demo",
            "--model",
            "openai/gpt-4o-mini",
            "--workdir",
            str(tmp_path),
            stdin="3\n1\n",
            env=env,
        )
    assert out.returncode == 0, out.stderr + out.stdout
    text = out.stdout
    assert "model openai/gpt-4o-mini" in text
    assert "asks: Which framework: Express, FastAPI or Django?" in text
    assert "All done: Django app written" in text
    assert (tmp_path / "views.py").read_text() == "# Django views\n"
    # The sub-agents are the Orchestrator's tools, as offline.
    first = server.requests[0]
    assert {t["function"]["name"] for t in first["tools"]} == {
        "ResearchAgent",
        "CodingAgent",
        "ask_user",
    }
    assert len(server.requests) == 8


def test_demo_reports_a_model_error_clearly(tmp_path: Path) -> None:
    env = _env(OPENAI_API_KEY="sk-test", HPD_AGENT_ALLOW_MODEL_REQUESTS="0")
    out = _hpd(
        "demo", "--model", "openai/gpt-4o-mini", "--yes", "--workdir", str(tmp_path), env=env
    )
    assert out.returncode == 1
    # Said once, in one line (the console's "Run failed"), with no traceback.
    lines = [line for line in out.stdout.splitlines() if "Real model requests are disabled" in line]
    assert len(lines) == 1 and lines[0].startswith("Run failed: ModelError:"), out.stdout
    assert "Traceback" not in out.stdout + out.stderr


def test_version_and_usage() -> None:
    out = _hpd("version")
    assert out.returncode == 0 and re.fullmatch(r"\d+\.\d+\.\d+\s*", out.stdout)
    bad = _hpd("demo", "--no-such-flag")
    assert bad.returncode == 2
    assert "unrecognized arguments: --no-such-flag" in bad.stderr
