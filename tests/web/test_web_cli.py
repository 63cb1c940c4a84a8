"""``hpd-agent serve``: clear errors, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import REPO, serve_command, start_server


def test_missing_web_extra_says_how_to_install_it() -> None:
    # Simulate an install without the extra: importing uvicorn fails.
    code = (
        "import sys; sys.modules['uvicorn'] = None; from hpd_agent.cli import main; "
        "raise SystemExit(main(['serve', 'tests.web.agents:root']))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    # From the checkout: the package is not published yet.
    assert 'pip install -e ".[web]"' in done.stderr
    assert "Traceback" not in done.stderr


def test_unknown_agent_is_a_clear_error(tmp_path: Path) -> None:
    command = serve_command("--port", "0", "--store", str(tmp_path / "s.db"))
    command[command.index("tests.web.agents:root")] = "tests.web.agents:nobody"
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 10  # the CLI's "agent cannot be loaded" status
    # serve takes its agent as MODULE:ATTR; it has no --agent option to speak of. The line
    # names the module's file (tests/apps/test_cli_names.py: the closest attribute too).
    assert "error: serve: cannot load MODULE:ATTR 'tests.web.agents:nobody': module " in done.stderr
    assert "(tests/web/agents.py) has no attribute 'nobody'" in done.stderr
    assert "--agent" not in done.stderr
    assert "Traceback" not in done.stderr


def test_example_prompts_from_the_agent_or_the_flags_are_served_by_info(tmp_path: Path) -> None:
    (tmp_path / "own").mkdir()
    (tmp_path / "flags").mkdir()
    own = start_server(tmp_path / "own", agent="examples/served_agent.py:agent")
    flagged = start_server(
        tmp_path / "flags", "--example", "Build a blog", "--example", " Fix the tests "
    )
    try:
        with own.client() as c:
            info = c.get("/info").json()
        assert info["name"] == "Orchestrator"
        assert info["description"].startswith("Hands the task to the Coder")
        assert info["examples"] == ["Build a todo API", "Build a blog with comments"]
        with flagged.client() as c:  # the flags win over the agent's own (none here)
            assert c.get("/info").json()["examples"] == ["Build a blog", "Fix the tests"]
    finally:
        own.stop()
        flagged.stop()


def test_a_bad_example_flag_is_a_usage_error_before_anything_starts(tmp_path: Path) -> None:
    for flags, said in [
        (["--example", "  "], "--example: examples[0] is blank"),
        (["--example", "x" * 201], "examples[0] is 201 characters long; at most 200"),
        (["--a2a", "--example", "hi"], "--example is for the web page, not --a2a"),
    ]:
        command = serve_command("--port", "0", "--store", str(tmp_path / "s.db"), *flags)
        done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=60)
        assert done.returncode == 2, done.stderr
        assert said in done.stderr
        assert "Traceback" not in done.stderr
        assert not (tmp_path / "s.db").exists()  # refused before the store was opened
