"""Agent references: a script loaded by path is found again by the path it records."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpd_agent import Agent
from hpd_agent._values.refs import load_ref, module_ref  # pyright: ignore[reportPrivateUsage]
from hpd_agent.testing import FunctionModel, text

SCRIPT = """
from hpd_agent import Agent
from hpd_agent.testing import FunctionModel, text

agent = Agent("Scripted", model=FunctionModel(lambda messages, info: text("hi")))

if __name__ == "__main__":
    raise SystemExit("the main block must not run when loaded as a reference")
"""


def test_a_script_loads_by_relative_path_and_records_its_absolute_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "bots").mkdir()
    script = tmp_path / "bots" / "my_bot.py"
    script.write_text(SCRIPT)
    monkeypatch.chdir(tmp_path)
    agent = load_ref("bots/my_bot.py:agent")
    assert isinstance(agent, Agent) and agent.name == "Scripted"
    assert load_ref(f"{script}:agent") is agent  # loaded once, whichever spelling
    ref = f"{script}:agent"
    assert module_ref(agent, agent._home) == ref  # pyright: ignore[reportPrivateUsage]


def test_bad_script_refs(tmp_path: Path) -> None:
    with pytest.raises(ImportError, match="no script"):
        load_ref(f"{tmp_path / 'missing.py'}:agent")
    with pytest.raises(ValueError, match=r"script\.py:attribute"):
        load_ref("no_colon")
    assert module_ref(Agent("X", model=FunctionModel(lambda m, i: text(""))), None) is None
