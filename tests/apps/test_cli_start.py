"""The ``hpd-agent`` command says something at once: the offline demo and chat never import
litellm (seconds of work), a missing key is told without it, and where a real model must load
the screen says so. How long each takes is measured by ``benchmarks/bench_cli_start.py``, not
here: these tests run the command with a ``litellm`` that refuses to be imported."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def no_litellm(tmp_path: Path) -> dict[str, str]:
    """The environment of a command in which importing litellm fails loudly."""
    poisoned = tmp_path / "poisoned" / "litellm"
    poisoned.mkdir(parents=True)
    (poisoned / "__init__.py").write_text(
        'raise ImportError("litellm was imported, and this command must not need it")\n'
    )
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_AUTH_TOKEN"))}
    env.update(
        PYTHONPATH=os.pathsep.join([str(poisoned.parent), str(ROOT)]),
        HPD_AGENT_DEMO_PACE="0",
        COLUMNS="200",
    )
    return env


def _hpd(env: dict[str, str], *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hpd_agent.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )


def test_the_offline_demo_never_imports_litellm(no_litellm: dict[str, str], tmp_path: Path) -> None:
    out = _hpd(no_litellm, "demo", "--yes", "--workdir", str(tmp_path))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Run completed." in out.stdout
    assert "litellm" not in out.stdout + out.stderr


def test_the_offline_chat_never_imports_litellm(no_litellm: dict[str, str]) -> None:
    out = _hpd(no_litellm, "chat", stdin="hello\n")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "You said 'hello'" in out.stdout
    assert "litellm" not in out.stdout + out.stderr


@pytest.mark.parametrize("command", ["demo", "chat"])
@pytest.mark.parametrize(
    ("model", "variable"),
    [
        ("openai/gpt-4o-mini", "OPENAI_API_KEY"),
        ("openai:gpt-4o", "OPENAI_API_KEY"),
        ("anthropic:claude-3-5-haiku", "ANTHROPIC_API_KEY"),
    ],
)
def test_a_missing_key_is_told_without_litellm(
    no_litellm: dict[str, str], command: str, model: str, variable: str
) -> None:
    out = _hpd(no_litellm, command, "--model", model, "--yes")
    assert out.returncode == 1, out.stdout + out.stderr
    assert out.stderr.splitlines() == [
        f"error: ModelAuthenticationError: {model}: no API key: set the {variable} environment "
        "variable (or, for a server of your own, pass --api-base URL)"
    ]
    assert out.stdout == ""  # the first thing said is the error


def test_a_real_model_says_that_litellm_loads(no_litellm: dict[str, str]) -> None:
    # A server of one's own: no key needed; litellm (here: one that cannot load) loads in
    # the background while the prompt waits, and the screen says so before the prompt.
    args = ["chat", "--model", "openai/served", "--api-base", "http://127.0.0.1:9/v1"]
    out = _hpd(no_litellm, *args, stdin="")
    assert out.returncode == 0, out.stdout + out.stderr
    loading = out.stdout.index("Loading litellm for the model in the background")
    assert loading < out.stdout.index("you>")


def test_a_model_only_litellm_can_place_loads_it_first_and_says_so(
    no_litellm: dict[str, str],
) -> None:
    # Which key this one needs only litellm can tell: it is loaded now (here it fails: the
    # failure is one line), after a line saying what is happening.
    out = _hpd(no_litellm, "chat", "--model", "gpt-4o-mini", stdin="")
    assert "Loading litellm to check the API key of gpt-4o-mini..." in out.stdout
    assert out.returncode == 1
    assert out.stderr.splitlines() == [
        "error: ModelError: model 'gpt-4o-mini': importing litellm failed (in the "
        "background, when the agent was built): ImportError: litellm was imported, and this "
        "command must not need it"
    ]
