"""A command whose extra is not installed: one line on stderr, exit status 2, the install
command once, no traceback; for every command and each extra it needs.

The extra is made missing in every process of the command (``demo --a2a`` starts a second
one) by a ``sitecustomize`` that marks its modules absent (``sys.modules[name] = None``:
importing them fails, and ``importlib.util.find_spec`` finds nothing, as in an install
without them).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
AGENT = "tests.web.agents:root"
DSN = "postgresql://nobody@127.0.0.1:1/none"  # never reached: the extra is checked first
TEMPORAL = ("--temporal", "127.0.0.1:1", "--workflow-id", "wf")

_SITECUSTOMIZE = """\
import os, sys
for name in os.environ.get("HPD_TEST_MISSING", "").split(","):
    if name:
        sys.modules[name] = None
"""

# (the command, the modules missing, the extra it names)
CASES = [
    (("demo", "--a2a", "--yes"), "a2a", "a2a"),
    (("demo", "--a2a", "--yes"), "uvicorn", "a2a"),
    (("serve", AGENT), "starlette", "web"),
    (("serve", AGENT), "uvicorn", "web"),
    (("serve", AGENT, "--store", DSN), "psycopg", "postgres"),
    (("serve", "--a2a", AGENT), "a2a", "a2a"),
    (("serve", "--a2a", AGENT), "uvicorn", "a2a"),
    (("serve", "--a2a", AGENT, "--store", DSN), "psycopg", "postgres"),
    (("mcp", AGENT), "mcp.server", "mcp"),
    (("mcp", AGENT, "--http", "--port", "0"), "uvicorn", "mcp"),
    (("mcp", AGENT, "--store", DSN), "psycopg", "postgres"),
    (("pending", "--db", DSN), "psycopg", "postgres"),
    (("answer", "req_1", "yes", "--db", DSN), "psycopg", "postgres"),
    (("resume", "run_1", "--db", DSN), "psycopg", "postgres"),
    (("run", AGENT, "Hi", "--store", DSN), "psycopg", "postgres"),
    (("pending", *TEMPORAL), "temporalio", "temporal"),
    (("answer", "req_1", "yes", *TEMPORAL), "temporalio", "temporal"),
]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("missing-extra")
    (folder / "sitecustomize.py").write_text(_SITECUSTOMIZE)
    return folder


def _hpd(site: Path, missing: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HPD_AGENT_DEBUG")}
    env.update(PYTHONPATH=os.pathsep.join([str(site), str(ROOT)]), HPD_TEST_MISSING=missing)
    return subprocess.run(
        [sys.executable, "-m", "hpd_agent.cli", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("command", "missing", "extra"),
    CASES,
    ids=[f"{' '.join(c[:2] if c[1].startswith('-') else c[:1])}-{m}" for c, m, _ in CASES],
)
def test_a_missing_extra_is_one_line_with_the_install_command(
    site: Path, command: tuple[str, ...], missing: str, extra: str
) -> None:
    done = _hpd(site, missing, *command)
    hint = f'pip install -e ".[{extra}]"'
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("error: ") and line.count(hint) == 1, line
    assert f"the {extra} extra" in line
    assert "internal error" not in line


def test_the_simulation_hides_the_module_as_a_missing_install_does(site: Path) -> None:
    code = "import importlib.util as u; print(u.find_spec('a2a')); import a2a"
    env = {**os.environ, "PYTHONPATH": str(site), "HPD_TEST_MISSING": "a2a"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.stdout.strip() == "None"
    assert "ModuleNotFoundError" in done.stderr
