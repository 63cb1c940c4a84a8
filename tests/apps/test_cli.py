"""The ``hpd-agent`` command, driven as a person drives it: a real pseudo-terminal, pipes."""

from __future__ import annotations

import io
import json
import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pexpect
import pytest
from _openai_server import OpenAIServer, Reply

ROOT = Path(__file__).resolve().parents[2]
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


FRAMEWORK_Q = r"Clarifier.* asks: .*Which web framework should 'Build a todo API' use\?"
STORE_Q = r"ResearchAgent.* asks: .*Where should the data of 'Build a todo API' live\?"
PICK = r"Answer which\? \[1\] "


def _pick(child: Any, typed: str = "") -> None:
    """Two or more questions wait: the list, then Enter (the first listed) or a number."""
    child.expect(PICK)
    child.sendline(typed)


def test_demo_in_a_terminal_does_what_the_person_typed(terminal: Any, tmp_path: Path) -> None:
    seen: list[str] = []

    def expect(pattern: str | type[pexpect.EOF]) -> None:
        terminal.expect(pattern)
        seen.append(terminal.before + (terminal.after if isinstance(terminal.after, str) else ""))

    expect(PICK)
    terminal.sendline("")  # Enter: the first listed, the deepest
    expect(FRAMEWORK_Q)
    expect(r"\n> ")
    terminal.sendline("FastAPI")
    expect(PICK)  # the ResearchAgent's question, and now the CodingAgent's write_file
    terminal.sendline("")
    expect(STORE_Q)
    expect(r"\n> ")
    terminal.sendline("2")
    expect(r"wants to run .*write_file")
    before_prompt = ANSI.sub("", "".join(seen))
    expect(r"\n> ")
    terminal.sendline("1")
    expect(r"Run completed")
    expect(pexpect.EOF)
    after = ANSI.sub("", "".join(seen))[len(before_prompt) :]
    terminal.close()
    assert terminal.exitstatus == 0
    # What the agents did next follows the answers: the CodingAgent went on with FastAPI
    # while the ResearchAgent's question still waited...
    went_on = before_prompt.index("The Clarifier answered within my turn: FastAPI. Writing app.py.")
    assert (
        went_on
        < before_prompt.index("? Orchestrator > ResearchAgent asks: Where should the data of")
        < before_prompt.index("Data goes in PostgreSQL")
    )
    # ...wrote FastAPI code once approved, and said so.
    assert "Built 'Build a todo API' with FastAPI in app.py." in after
    assert "FastAPI" in (tmp_path / "app.py").read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.py"]


def test_demo_in_a_terminal_takes_a_number_and_a_denial_with_reason(
    terminal: Any, tmp_path: Path
) -> None:
    _pick(terminal)
    terminal.expect(FRAMEWORK_Q)
    terminal.expect(r"\n> ")
    terminal.sendline("3")  # 3) Django
    _pick(terminal)
    terminal.expect(STORE_Q)
    terminal.expect(r"\n> ")
    terminal.sendline("1")  # 1) SQLite
    terminal.expect(r"wants to run .*write_file")
    terminal.expect(r"\n> ")
    terminal.sendline("3")  # deny
    terminal.expect("Reason")
    terminal.sendline("not in my repo")
    terminal.expect(pexpect.EOF)
    out = ANSI.sub("", terminal.before)
    terminal.close()
    assert terminal.exitstatus == 0
    assert "I did not write views.py" in out
    assert "Reason: not in my repo" in out
    assert "Data goes in SQLite" in out
    assert list(tmp_path.iterdir()) == []


def test_ctrl_c_cancels_the_demo_cleanly(terminal: Any, tmp_path: Path) -> None:
    _pick(terminal)
    terminal.expect(FRAMEWORK_Q)
    terminal.expect(r"\n> ")
    terminal.sendintr()
    terminal.expect("Cancelled")
    terminal.expect(pexpect.EOF)
    terminal.close()
    assert terminal.exitstatus == 130
    assert list(tmp_path.iterdir()) == []


def test_ctrl_d_at_a_question_in_a_terminal_cancels_and_answers_nothing(
    terminal: Any, tmp_path: Path
) -> None:
    _pick(terminal)
    terminal.expect(FRAMEWORK_Q)
    terminal.expect(r"\n> ")
    terminal.sendeof()  # Ctrl-D: the person left
    terminal.expect(pexpect.EOF)
    out = ANSI.sub("", terminal.before)
    terminal.close()
    assert terminal.exitstatus == 130, out  # interrupted, as with Ctrl-C
    assert "Input closed (Ctrl-D): you left, so the run is cancelled" in out
    assert "Run cancelled." in out
    assert "answered automatically" not in out and "Input closed: answering" not in out
    assert "wants to run" not in out and "goes back into" not in out
    assert "Traceback" not in out
    assert list(tmp_path.iterdir()) == []


def test_ctrl_d_at_the_permission_prompt_approves_nothing(terminal: Any, tmp_path: Path) -> None:
    _pick(terminal)
    terminal.expect(FRAMEWORK_Q)
    terminal.expect(r"\n> ")
    terminal.sendline("FastAPI")
    _pick(terminal)
    terminal.expect(STORE_Q)
    terminal.expect(r"\n> ")
    terminal.sendline("SQLite")
    terminal.expect(r"wants to run .*write_file")
    terminal.expect(r"\n> ")
    terminal.sendeof()
    terminal.expect(pexpect.EOF)
    out = ANSI.sub("", terminal.before)
    terminal.close()
    assert terminal.exitstatus == 130, out
    assert "answered automatically" not in out and "approved for the run" not in out
    assert "Input closed (Ctrl-D)" in out and "Run cancelled." in out
    assert list(tmp_path.iterdir()) == []  # write_file never ran


def test_a_person_picks_the_second_waiting_question_first(tmp_path: Path) -> None:
    # A terminal 60 columns wide (its own size: no COLUMNS): every line fits it.
    env = _env(HPD_AGENT_DEMO_PACE="0.002")
    del env["COLUMNS"]
    child = pexpect.spawn(
        sys.executable,
        ["-m", "hpd_agent.cli", "demo", "--workdir", str(tmp_path)],
        cwd=str(ROOT),
        env=env,
        encoding="utf-8",
        timeout=60,
        dimensions=(50, 60),
    )
    child.logfile_read = screen = io.StringIO()
    try:
        # Before: no list, no choice; the deepest (the Clarifier's) was asked first.
        child.expect([PICK, r"\n> "])
        listed = ANSI.sub("", screen.getvalue()).replace("\r", "")
        assert child.match.re.pattern == PICK, listed
        assert "2 questions wait: which first?" in listed
        assert "  1) Orchestrator > CodingAgent > Clarifier asks: Which web" in listed
        assert "  2) Orchestrator > ResearchAgent asks: Where should the" in listed
        child.sendline("2")
        child.expect(r"ResearchAgent.* asks: .*Where should the")  # (wrapped at 60 columns)
        child.expect(r"\n> ")
        child.sendline("PostgreSQL")
        child.expect(r"Clarifier.* asks: .*Which web")  # then the other one, alone: no list
        child.expect(r"\n> ")
        child.sendline("Django")
        child.expect(r"wants to run .*write_file")
        child.expect(r"\n> ")
        child.sendline("1")
        child.expect(pexpect.EOF)
        child.close()
        out = ANSI.sub("", screen.getvalue()).replace("\r", "")
        assert child.exitstatus == 0, out
    finally:
        child.close(force=True)
    # Each answer reached the agent that asked it, in the order the person chose.
    flat = " ".join(out.split())  # lines wrap at 60 columns
    assert flat.index("Data goes in PostgreSQL") < flat.index("? Orchestrator > CodingAgent > Clar")
    assert "The user chose Django." in flat
    assert "Django" in (tmp_path / "views.py").read_text()
    assert out.count("Answer which?") == 1
    too_long = [line for line in out.splitlines() if len(line) > 60]
    assert too_long == []


def _chat() -> pexpect.spawn:
    """``hpd-agent chat`` on a pseudo-terminal (50 x 140)."""
    return pexpect.spawn(
        sys.executable,
        ["-m", "hpd_agent.cli", "chat"],
        cwd=str(ROOT),
        env=_env(),
        encoding="utf-8",
        timeout=60,
        dimensions=(50, 140),
    )


def test_ctrl_d_at_a_question_in_chat_cancels_the_turn_and_leaves() -> None:
    chat = _chat()
    chat.logfile_read = screen = io.StringIO()
    try:
        chat.expect("you> ")
        chat.sendline("what is hpd?")
        chat.expect("Do you want a short or a detailed answer")
        chat.expect(r"\n> ")
        chat.sendeof()
        chat.expect("bye")
        chat.expect(pexpect.EOF)
        chat.close()
        out = ANSI.sub("", screen.getvalue())
        assert chat.exitstatus == 130, out
        assert "Input closed (Ctrl-D): you left, so the run is cancelled" in out
        assert "answered automatically" not in out and "You wanted a" not in out
        assert "Traceback" not in out
    finally:
        chat.close(force=True)


def test_ctrl_c_in_chat_cancels_the_turn_then_leaves_at_the_prompt() -> None:
    chat = _chat()
    try:
        chat.expect("you> ")
        chat.sendline("hello there")
        chat.expect("You said 'hello there'")
        chat.expect("you> ")
        chat.sendline("what is hpd?")  # the turn waits on the agent's question
        chat.expect("Do you want a short or a detailed answer")
        chat.expect(r"\n> ")
        chat.sendintr()
        chat.expect(r"Cancelled \(Ctrl-C\): that turn was stopped")
        chat.expect("you> ")  # back at the prompt, still chatting
        chat.sendline("second message")
        # The cancelled turn left no trace; the first one is still remembered.
        chat.expect(r"This is message 2 of our chat \(1 replies so far\); your first\s+was")
        chat.expect("you> ")
        chat.sendintr()  # at the prompt: leave
        chat.expect("bye")
        chat.expect(pexpect.EOF)
        shown = ANSI.sub("", chat.before or "")
        chat.close()
        assert chat.exitstatus == 130, shown
        assert "Traceback" not in shown
    finally:
        chat.close(force=True)


def test_demo_with_yes_runs_unattended_with_defaults(tmp_path: Path) -> None:
    out = _hpd("demo", "--yes", "--workdir", str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert "(answered automatically: Express)" in out.stdout
    assert "(answered automatically: SQLite)" in out.stdout
    assert "(answered automatically: approve once)" in out.stdout
    assert "Express" in (tmp_path / "app.js").read_text()


def test_demo_with_closed_stdin_does_not_hang(tmp_path: Path) -> None:
    out = _hpd("demo", "--workdir", str(tmp_path))  # stdin is /dev/null
    assert out.returncode == 0, out.stderr
    assert "Input is not a terminal" in out.stdout
    assert "Input closed: answering with defaults from now on." in out.stdout
    assert (tmp_path / "app.js").exists()


def test_demo_reads_answers_piped_on_stdin(tmp_path: Path) -> None:
    out = _hpd("demo", "--workdir", str(tmp_path), stdin="django\n2\n")
    assert out.returncode == 0, out.stderr
    assert "The user chose Django." in out.stdout
    assert "Django" in (tmp_path / "views.py").read_text()


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


@pytest.mark.parametrize("command", ["chat", "demo"])
def test_a_missing_key_is_said_at_start_and_fails(command: str, tmp_path: Path) -> None:
    with OpenAIServer() as server:
        # OPENAI_API_BASE would send it to the loopback server, if it were sent at all.
        env = _env(OPENAI_API_BASE=server.url, HPD_AGENT_ALLOW_MODEL_REQUESTS="1")
        extra = ["--workdir", str(tmp_path)] if command == "demo" else []
        out = _hpd(command, "--model", "openai/gpt-4o-mini", *extra, stdin="hello\n", env=env)
    assert out.returncode == 1, out.stdout + out.stderr
    assert out.stderr.strip().splitlines() == [
        "error: ModelAuthenticationError: openai/gpt-4o-mini: no API key: set the "
        "OPENAI_API_KEY environment variable (or, for a server of your own, pass --api-base URL)"
    ]
    assert "you>" not in out.stdout and "Traceback" not in out.stdout + out.stderr
    assert server.requests == []  # said before any message, without asking the network


def test_chat_on_a_local_server_needs_no_key() -> None:
    with OpenAIServer() as server:
        server.push(("Hello from the local server.", []))
        env = _env(HPD_AGENT_ALLOW_MODEL_REQUESTS="1")
        out = _hpd(
            "chat", "--model", "openai/served", "--api-base", server.url, stdin="hi\n", env=env
        )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Assistant: Hello from the local server." in out.stdout
    assert len(server.requests) == 1


def test_chat_on_a_local_server_not_started_says_so_in_one_line() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        address = f"http://127.0.0.1:{s.getsockname()[1]}/v1"  # nothing listens once closed
    # Wide enough for the whole message on one line (lines wrap to the width).
    env = _env(HPD_AGENT_ALLOW_MODEL_REQUESTS="1", COLUMNS="200")
    out = _hpd("chat", "--model", "openai/served", "--api-base", address, stdin="hi\n", env=env)
    assert out.returncode == 1, out.stdout + out.stderr  # the last turn failed
    said = [line for line in out.stdout.splitlines() if "nothing is listening" in line]
    assert said == [
        f"Run failed: ModelUnavailableError: openai/served: nothing is listening at {address} "
        "(connection refused): is the server running?"
    ], out.stdout
    assert "Traceback" not in out.stdout + out.stderr
    assert "timed out" not in out.stdout and "Connection error" not in out.stdout


def test_chat_api_base_goes_with_a_model() -> None:
    out = _hpd("chat", "--api-base", "http://127.0.0.1:9/v1", stdin="")
    assert out.returncode == 2
    assert "--api-base goes with --model" in out.stderr


def _demo_on_a_model(body: dict[str, Any]) -> Reply:
    """Plays the demo's four agents the way a capable model would, from each request."""
    messages = body["messages"]
    system = messages[0]["content"]
    last = messages[-1]
    results = [m for m in messages if m["role"] == "tool"]
    if system.startswith(("You research", "You settle")):
        if not results:
            question = (
                {"question": "Where should the data live?", "options": ["SQLite", "PostgreSQL"]}
                if system.startswith("You research")
                else {"question": "Which framework?", "options": ["Express", "FastAPI", "Django"]}
            )
            return ("", [("ask_user", json.dumps(question))])
        return (f"The user chose {last['content']}.", [])
    if system.startswith("You build code"):
        if not results:
            return ("", [("Clarifier", json.dumps({"query": "a todo API"}))])
        if len(results) == 1:
            code = {"path": "views.py", "text": f"# {results[0]['content']}\n"}
            return ("", [("write_file", json.dumps(code))])
        return (f"Code written ({last['content']}).", [])
    # The Orchestrator.
    if not results:
        return (
            "Starting both.",
            [
                ("ResearchAgent", json.dumps({"query": "a todo API"})),
                ("CodingAgent", json.dumps({"query": "a todo API"})),
            ],
        )
    return ("All done: " + " / ".join(r["content"] for r in results), [])


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
            stdin="2\n2\n1\n",  # each question gets "2", so either may come first
            env=env,
        )
    assert out.returncode == 0, out.stderr + out.stdout
    text = out.stdout
    assert "model openai/gpt-4o-mini" in text
    assert "Orchestrator > CodingAgent > Clarifier asks: Which framework?" in text
    assert "All done:" in text and "Code written (wrote 1 lines to views.py)" in text
    assert (tmp_path / "views.py").read_text() == "# The user chose FastAPI.\n"
    # The sub-agents are the Orchestrator's tools, the Clarifier the CodingAgent's, as offline.
    first = server.requests[0]
    assert {t["function"]["name"] for t in first["tools"]} == {"ResearchAgent", "CodingAgent"}
    coding = next(r for r in server.requests if r["messages"][0]["content"].startswith("You build"))
    assert {t["function"]["name"] for t in coding["tools"]} == {"Clarifier", "write_file"}
    assert len(server.requests) == 9


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
    flag = _hpd("--version")
    assert flag.returncode == 0 and flag.stdout.strip() == f"hpd-agent {out.stdout.strip()}"
    bare = _hpd()
    assert bare.returncode == 0 and bare.stdout.startswith("usage: hpd-agent")
    assert "demo" in bare.stdout and "resume" in bare.stdout
    bad = _hpd("demo", "--no-such-flag")
    assert bad.returncode == 2
    assert "unrecognized arguments: --no-such-flag" in bad.stderr


@pytest.mark.parametrize("port", ["99999", "-1", "65536", "eighty"])
def test_serve_refuses_a_port_out_of_range_with_a_usage_error(port: str) -> None:
    # Before: an OverflowError from bind(), reported as an internal error (exit 70).
    out = _hpd("serve", "no_such_module:agent", f"--port={port}")
    assert out.returncode == 2, out.stderr
    assert "is not a port number (0-65535)" in out.stderr
    assert "internal error" not in out.stderr and "Traceback" not in out.stderr


def test_exit_at_a_question_in_a_chat_terminal_cancels_and_leaves() -> None:
    chat = _chat()
    chat.logfile_read = screen = io.StringIO()
    try:
        chat.expect("you> ")
        chat.sendline("what is hpd?")
        chat.expect("Do you want a short or a detailed answer")
        chat.expect(r"\n> ")
        chat.sendline("/exit")
        # Before: "/exit" was refused as an answer and the question asked again.
        assert chat.expect([pexpect.EOF, "There is no option"]) == 0
        chat.close()
        out = ANSI.sub("", screen.getvalue())
        assert chat.exitstatus == 130, out
        assert "You left (/exit), so the run is cancelled; nothing is answered" in out
        assert "You wanted a" not in out and "answered automatically" not in out
        assert out.rstrip().endswith("bye") and "Traceback" not in out
    finally:
        chat.close(force=True)


def test_the_chats_exit_words_leave_at_a_question_from_a_pipe_too() -> None:
    out = _hpd("chat", stdin="hello\nwhat is hpd?\nquit\nnot read\n")
    assert out.returncode == 130, out.stdout + out.stderr
    assert "You left (quit), so the run is cancelled" in out.stdout
    assert "You wanted a" not in out.stdout and "not read" not in out.stdout
    assert "You said 'hello'" in out.stdout  # the turn before was done


def test_piped_answers_are_echoed_alike_in_demo_and_chat(tmp_path: Path) -> None:
    demo = _hpd("demo", "--workdir", str(tmp_path), stdin="FastAPI\n2\n1\n")
    chat = _hpd("chat", stdin="what is hpd?\n2\n/exit\n")
    assert demo.returncode == 0 and chat.returncode == 0, demo.stderr + chat.stderr
    # Each line read is printed after its prompt, on the prompt's line, as typed.
    demo_lines, chat_lines = demo.stdout.splitlines(), chat.stdout.splitlines()
    assert [line for line in demo_lines if line.startswith("> ")] == ["> FastAPI", "> 2", "> 1"]
    assert [line for line in chat_lines if line.startswith(("> ", "you> "))] == [
        "you> what is hpd?",
        "> 2",  # before: the chat printed nothing after its prompt
        "you> /exit",
    ]
    # What follows an answer starts on a line of its own, alike.
    asked = chat_lines.index("> 2")
    assert chat_lines[asked + 1].startswith("  Assistant ← ask_user: Detailed")
