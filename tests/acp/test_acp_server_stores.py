"""Item 3 and 13 on every kind of store ``serve_stdio`` takes: a ``Store`` object (kept open,
the caller's), a SQLite path and a ``postgresql://`` DSN (opened and closed by the server).
Driven by the official Python SDK's client (tests/acp/acp_harness.py): a session survives its
connection, is loaded and replayed on the next one, and its history goes on; a turn left with
its question open is resumed by the next prompt, nothing run twice."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from _pg import fresh_postgres, postgres_dsn  # noqa: F401  (fixtures)
from acp import text_block as text
from acp_agents import counted, echo, planner
from acp_harness import Editor, connected

from hpd_agent.store import MemoryStore, Store

pytestmark = pytest.mark.anyio

KINDS = ["store object", "sqlite path", "postgresql dsn"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the SDK's client is asyncio's


@pytest.fixture(autouse=True)
def counts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HPD_ACP_TEST_DIR", str(tmp_path))
    return tmp_path


@contextlib.asynccontextmanager
async def a_store(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    """What ``serve_stdio`` is given for ``kind`` (the same on every connection)."""
    if kind == "store object":
        store: Store = MemoryStore()
        try:
            yield store
        finally:
            await store.aclose()
    elif kind == "sqlite path":
        yield str(tmp_path / "sessions.db")
    else:
        yield request.getfixturevalue("fresh_postgres")


@pytest.mark.parametrize("kind", KINDS)
async def test_a_session_is_loaded_and_goes_on(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    async with a_store(kind, tmp_path, request) as store:
        first = Editor()
        async with connected(echo, first, store=store) as conn:
            init = await conn.initialize(protocol_version=1)
            assert init.agent_capabilities is not None
            assert init.agent_capabilities.load_session is True
            session = (await conn.new_session(cwd="/tmp")).session_id
            await conn.prompt(session_id=session, prompt=[text("a")])
        editor = Editor()
        async with connected(echo, editor, store=store) as conn:
            await conn.load_session(cwd="/tmp", session_id=session)
            replayed = [(u["sessionUpdate"], u["content"]["text"]) for u in editor.updates(session)]
            assert replayed == [("user_message_chunk", "a"), ("agent_message_chunk", "heard a")]
            answer = await conn.prompt(session_id=session, prompt=[text("b")])
            assert answer.stop_reason == "end_turn"
            assert editor.text(session).endswith("heard a | b")


@pytest.mark.parametrize("kind", KINDS)
async def test_a_turn_left_open_is_resumed_once(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    async with a_store(kind, tmp_path, request) as store:
        editor = Editor(form=_never)
        async with connected(planner, editor, store=store) as conn:
            session = (await conn.new_session(cwd="/tmp")).session_id
            async with anyio.create_task_group() as tg:
                tg.start_soon(_prompt_quietly, conn, session, "a plan")
                await editor.wait_for("elicitation/create")
                tg.cancel_scope.cancel()  # the editor goes away with the question open
        editor = Editor(form=_accept)
        async with connected(planner, editor, store=store) as conn:
            answer = await conn.prompt(session_id=session, prompt=[text("and the tests")])
        assert answer.stop_reason == "end_turn"
        said = "Plan: The user chose PostgreSQL."
        assert editor.text(session) == said + said  # the resumed turn, then this prompt's
        assert counted("effect") == ["survey db"]  # not again


async def _accept(params: dict[str, Any]) -> dict[str, Any]:
    return {"action": "accept", "content": {"answer": "PostgreSQL"}}


async def _never(params: dict[str, Any]) -> dict[str, Any]:
    await anyio.sleep_forever()
    raise AssertionError


async def _prompt_quietly(conn: Any, session: str, prompt: str) -> None:
    with contextlib.suppress(Exception):  # the connection ends under it
        await conn.prompt(session_id=session, prompt=[text(prompt)])


async def test_the_editors_answer_is_recorded_on_channel_acp(tmp_path: Path) -> None:
    store = MemoryStore()
    try:
        editor = Editor(form=_accept)
        async with connected(planner, editor, store=store) as conn:
            session = (await conn.new_session(cwd="/tmp")).session_id
            await conn.prompt(session_id=session, prompt=[text("a plan")])
        [record] = await store.list_requests(status=None)
    finally:
        await store.aclose()
    assert (record.status, record.answer, record.channel) == ("answered", "PostgreSQL", "acp")
