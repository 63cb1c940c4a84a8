"""Agent references: a script loaded by path is found again by the path it records."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

import pytest

from hpd_agent import Agent
from hpd_agent._values import refs
from hpd_agent._values.refs import (  # pyright: ignore[reportPrivateUsage]
    SCRIPT_PREFIX,
    load_ref,
    module_ref,
)
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


def test_a_scripts_agent_is_found_again_without_a_scan_of_every_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A served script's agent has its reference looked up at every run's start: once found,
    # its module is not looked for again among every loaded module (hundreds on a server).
    script = tmp_path / "served_bot.py"
    script.write_text(SCRIPT)
    agent = load_ref(f"{script}:agent")
    for i in range(50):  # other scripts loaded by path
        other = ModuleType(f"{SCRIPT_PREFIX}other_{i}")
        other.__file__ = str(tmp_path / f"other_{i}.py")
        monkeypatch.setitem(sys.modules, other.__name__, other)
    looked: list[object] = []
    seen = refs._script_path  # pyright: ignore[reportPrivateUsage]

    def counted(file: object) -> str | None:
        looked.append(file)
        return seen(file)

    monkeypatch.setattr(refs, "_script_path", counted)
    ref = f"{script}:agent"
    assert module_ref(agent, agent._home) == ref  # pyright: ignore[reportPrivateUsage]
    looked.clear()
    assert module_ref(agent, agent._home) == ref  # pyright: ignore[reportPrivateUsage]
    assert looked == [str(script)]
