"""``import hpd_agent`` loads neither ``hpd_agent.mcp`` nor the ``mcp`` SDK (about a second
to import); ``hpd_agent.mcp`` offers the client's names, and the ``mcp`` extra pins the SDK
it needs."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_import_hpd_agent_does_not_load_mcp() -> None:
    code = (
        "import sys, hpd_agent, hpd_agent.tools, hpd_agent.testing\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('mcp', 'mcp_types')"
        " or m.startswith('hpd_agent.mcp')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert out.stdout.strip() == "[]"


def test_the_client_names_are_public() -> None:
    import hpd_agent
    import hpd_agent.mcp as mcp

    for name in ("MCPTools", "ELICITATION", "Decline", "MCPServerError", "MCPToolError"):
        assert name in mcp.__all__, name
    assert mcp.Decline is hpd_agent.Decline
    assert mcp.ELICITATION == "mcp.elicitation"
    assert issubclass(mcp.MCPServerError, hpd_agent.HpdAgentError)


def test_the_mcp_extra_pins_the_sdk() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["optional-dependencies"]["mcp"] == ["mcp>=2.3"]
