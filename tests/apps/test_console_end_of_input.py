"""ConsoleHandler at the end of input: a terminal's Ctrl-D cancels, a pipe's end defaults.

The terminal itself (a real PTY) is driven in tests/apps/test_cli.py; here the line reader
is a stand-in that raises ``EOFError`` as ``input`` does when input is closed.
"""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from hpd_agent import Agent, ConsoleHandler, tool
from hpd_agent.testing import ScriptedModel, text, tool_call

pytestmark = pytest.mark.anyio


def _closed(prompt: str) -> str:
    raise EOFError


def _agent(done: list[str]) -> Agent:
    @tool(requires_approval=True)
    def deploy(service: str) -> str:
        """Deploy a service.

        Args:
            service: Which one.
        """
        done.append(service)
        return "deployed"

    model = ScriptedModel([tool_call("deploy", service="api"), text("ok")])
    return Agent("Ops", model=model, tools=[deploy])


async def test_closed_input_in_cancel_mode_cancels_the_run_and_approves_nothing() -> None:
    screen = io.StringIO()
    console = Console(file=screen, width=120, color_system=None)
    handler = ConsoleHandler(console, input=_closed, end_of_input="cancel")
    done: list[str] = []
    result = await _agent(done).run("deploy the api", handler=handler)
    assert result.status == "cancelled"
    assert done == []  # not approved, so never run
    shown = screen.getvalue()
    assert "Input closed (Ctrl-D): you left, so the run is cancelled" in shown
    assert "answered automatically" not in shown
    assert "Run cancelled." in shown
    assert handler.left


async def test_closed_input_in_defaults_mode_keeps_the_documented_defaults() -> None:
    screen = io.StringIO()
    console = Console(file=screen, width=120, color_system=None)
    handler = ConsoleHandler(console, input=_closed)  # a line reader of one's own: defaults
    assert handler.end_of_input == "defaults"
    done: list[str] = []
    result = await _agent(done).run("deploy the api", handler=handler)
    assert result.status == "completed" and done == ["api"]
    assert "(answered automatically: approve once)" in screen.getvalue()


def test_reading_a_stdin_that_is_not_a_terminal_keeps_the_defaults() -> None:
    # Under pytest stdin is not a terminal: as piped input, its end gives the defaults.
    assert ConsoleHandler().end_of_input == "defaults"


@pytest.mark.parametrize("typed", [["/exit"], ["3", "/EXIT"], ["/quit"]])
async def test_exit_at_a_permission_prompt_cancels_the_run_and_approves_nothing(
    typed: list[str],
) -> None:
    screen = io.StringIO()
    console = Console(file=screen, width=120, color_system=None)
    lines = iter(typed)
    handler = ConsoleHandler(console, input=lambda prompt: next(lines))
    done: list[str] = []
    result = await _agent(done).run("deploy the api", handler=handler)
    # Before: "/exit" was refused (or taken as the reason of a denial) and the run went on.
    assert result.status == "cancelled" and done == []
    shown = screen.getvalue()
    assert f"You left ({typed[-1]}), so the run is cancelled; nothing is answered" in shown
    assert "Run cancelled." in shown and handler.left
