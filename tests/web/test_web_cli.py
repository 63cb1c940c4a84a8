"""``hpd-agent serve``: clear errors, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import REPO, serve_command


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
    assert "cannot load the agent 'tests.web.agents:nobody'" in done.stderr
    # serve takes its agent as MODULE:ATTR; it has no --agent option to speak of.
    assert "--agent" not in done.stderr and "serve MODULE:ATTR" in done.stderr
    assert "Traceback" not in done.stderr
