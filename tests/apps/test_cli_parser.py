"""A mistyped ``hpd-agent`` command line: the subcommand's own usage, a hint, exit 2.

Real subprocesses, as a person types the commands.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOP_USAGE = "usage: hpd-agent [-h] [--version]"


def _hpd(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_"))}
    env.update(PYTHONPATH=str(ROOT), COLUMNS="120")
    return subprocess.run(
        [sys.executable, "-m", "hpd_agent.cli", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=60,
    )


def _commands() -> list[str]:
    """The subcommands, as ``hpd-agent --help`` lists them."""
    shown = re.search(r"\{([\w,-]+)\}", _hpd("--help").stdout)
    assert shown is not None
    return shown.group(1).split(",")


@pytest.mark.parametrize(
    ("args", "typed", "meant"),
    [
        (["pending", "--dbb", "runs.db"], "--dbb", "--db"),
        (["pending", "--db", "runs.db", "--jsn"], "--jsn", "--json"),
        (["answer", "req_1", "yes", "--db", "runs.db", "--sendr", "me"], "--sendr", "--sender"),
        (["resume", "run_1", "--db", "runs.db", "--agnt", "app:agent"], "--agnt", "--agent"),
        (["resume", "run_1", "--dbb", "runs.db"], "--dbb", "--db"),  # --db is also missing
        (["demo", "--yess"], "--yess", "--yes"),
        (["demo", "--workdri=out"], "--workdri", "--workdir"),
        (["chat", "--modle", "openai/x"], "--modle", "--model"),
        (["serve", "app:agent", "--prot", "8001"], "--prot", "--port"),
    ],
)
def test_a_mistyped_option_gets_the_subcommand_usage_and_a_suggestion(
    args: list[str], typed: str, meant: str
) -> None:
    out = _hpd(*args)
    assert out.returncode == 2, out.stderr
    assert out.stdout == ""
    command = args[0]
    assert out.stderr.startswith(f"usage: hpd-agent {command} "), out.stderr
    assert TOP_USAGE not in out.stderr
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith(f"hpd-agent {command}: error: ")
    assert last.endswith(f"{typed}: did you mean {meant}?"), last
    assert "Traceback" not in out.stderr


def test_every_subcommand_reports_its_own_mistakes() -> None:
    commands = _commands()
    assert {"demo", "chat", "pending", "answer", "resume", "serve", "version"} <= set(commands)
    for command in commands:
        out = _hpd(command, "--hlep")
        assert out.returncode == 2, (command, out.stderr)
        assert out.stderr.startswith(f"usage: hpd-agent {command}"), out.stderr
        assert out.stderr.rstrip().endswith("--hlep: did you mean --help?"), out.stderr


def test_an_unknown_argument_with_nothing_close_is_still_the_subcommands_error() -> None:
    out = _hpd("version", "--verbose")
    assert out.returncode == 2
    assert out.stderr.startswith("usage: hpd-agent version [-h]")
    assert out.stderr.rstrip().endswith(
        "hpd-agent version: error: unrecognized arguments: --verbose"
    )


def test_a_mistyped_command_gets_a_suggestion() -> None:
    out = _hpd("pendng", "--db", "runs.db")
    assert out.returncode == 2
    assert out.stderr.startswith(TOP_USAGE)
    assert out.stderr.rstrip().endswith("pendng: did you mean pending?")


def test_the_guide_lists_every_subcommand() -> None:
    """docs/guide.md's CLI table names each command ``hpd-agent --help`` lists, no more."""
    guide = (ROOT / "docs" / "guide.md").read_text()
    section = guide.split("## The CLI and its exit statuses", 1)[1]
    rows = [line for line in section.splitlines() if line.startswith("| `hpd-agent")]
    listed = {
        name for row in rows for name in re.findall(r"`hpd-agent (\w[\w-]*)", row.split(" | ")[0])
    }
    assert listed == set(_commands())
