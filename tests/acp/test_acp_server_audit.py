"""Who answered through ``hpd-agent acp`` (issue 35 item 2): the editor, named by the
``clientInfo.name`` it sent with ``initialize`` (``"acp"`` when it sent none), on channel
``acp``, in the stored record and in the resolved event, however it answered (a permission
option, a dismissed dialog, a form accepted or declined, a question asked as permission
options to an editor without forms). Driven by the official Python SDK's client
(tests/acp/acp_harness.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from acp import text_block as text
from acp_agents import asker, planner, top
from acp_harness import Answer, Editor, connected

from hpd_agent import Agent, hooks
from hpd_agent.backend import Author
from hpd_agent.events import RequestEvent, RequestStatus
from hpd_agent.store import MemoryStore

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the SDK's client is asyncio's; the server runs there too


@pytest.fixture(autouse=True)
def counts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HPD_ACP_TEST_DIR", str(tmp_path))
    return tmp_path


async def _approve_once(params: dict[str, Any]) -> dict[str, Any]:
    return {"outcome": {"outcome": "selected", "optionId": "approve_once"}}


async def _dismissed(params: dict[str, Any]) -> dict[str, Any]:
    return {"outcome": {"outcome": "cancelled"}}


async def _yes(params: dict[str, Any]) -> dict[str, Any]:
    return {"outcome": {"outcome": "selected", "optionId": "0"}}  # the confirm's "allow"


async def _accept(params: dict[str, Any]) -> dict[str, Any]:
    return {"action": "accept", "content": {"answer": "PostgreSQL"}}


async def _decline(params: dict[str, Any]) -> dict[str, Any]:
    return {"action": "decline"}


# (agent, prompt, the editor's permission reply, its form reply, forms declared, the status)
WAYS: dict[str, tuple[Agent, str, Answer | None, Answer | None, bool, str]] = {
    "permission approved": (top, "1", _approve_once, None, True, "answered"),
    "permission dismissed": (top, "1", _dismissed, None, True, "declined"),
    "form accepted": (planner, "a plan", None, _accept, True, "answered"),
    "form declined": (planner, "a plan", None, _decline, True, "declined"),
    "options without forms": (asker, "confirm", _yes, None, False, "answered"),
}


class _Resolved(hooks.Hook):
    """Who each resolved request's event says answered it."""

    def __init__(self) -> None:
        self.authors: list[Author | None] = []

    def request_resolved(
        self, event: RequestEvent, status: RequestStatus, answer: Any, author: Author | None = None
    ) -> None:
        self.authors.append(author)


async def _answered(way: str, name: str | None) -> tuple[list[Any], list[Author | None]]:
    """The stored records and the resolved events' authors of one turn answered ``way``."""
    agent, prompt, permission, form, forms, _ = WAYS[way]
    editor = Editor(permission=permission, form=form)
    store, resolved = MemoryStore(), _Resolved()
    hooks.install(resolved)
    try:
        async with connected(agent, editor, store=store, forms=forms, name=name) as conn:
            session = (await conn.new_session(cwd="/tmp")).session_id
            answer = await conn.prompt(session_id=session, prompt=[text(prompt)])
            assert answer.stop_reason == "end_turn"
        return await store.list_requests(status=None), resolved.authors
    finally:
        hooks.uninstall(resolved)
        await store.aclose()


@pytest.mark.parametrize("way", list(WAYS))
async def test_an_answer_is_the_editors_by_its_client_name(way: str) -> None:
    records, authors = await _answered(way, "Zed")
    [record] = records
    assert record.status == WAYS[way][-1]
    assert (record.answered_by, record.channel) == ("Zed", "acp")
    assert authors == [Author("Zed", "acp")]


async def test_an_editor_that_sends_no_name_is_acp() -> None:
    records, authors = await _answered("permission approved", None)
    [record] = records
    assert (record.status, record.answered_by, record.channel) == ("answered", "acp", "acp")
    assert authors == [Author("acp", "acp")]
