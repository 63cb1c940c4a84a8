"""What a server keeps: threads in memory only while a run goes on them, the thread -> run
map in the store's database (SQLite file or PostgreSQL), so a restart finds every thread."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from _pg import fresh_postgres, postgres_dsn  # noqa: F401  (fixtures)
from agents import build
from conftest import post_run, run_input, sse_events, start_server

from hpd_agent.web import create_app


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _post(c: httpx.AsyncClient, body: dict[str, Any]) -> list[dict[str, Any]]:
    response = await c.post("/agent", json=body)
    assert response.status_code == 200, response.text
    return sse_events(response.text)


async def test_refused_inputs_and_finished_threads_leave_nothing_in_memory(
    tmp_path: Path,
) -> None:
    app = create_app(build(), store=tmp_path / "web.db")
    threads = app.state.threads
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c,
    ):
        resume = [{"interruptId": "req_x", "status": "resolved", "payload": "x"}]
        refused = await _post(c, run_input("fresh-1", "r1", resume=resume))
        assert refused[-1]["code"] == "not_interrupted"
        assert (await c.post("/agent", json=run_input("fresh-2", "r1"))).status_code == 400
        assert threads.active == 0  # a refused input on a fresh thread id: no thread object
        assert (await c.get("/threads/fresh-1/messages")).status_code == 404
        for i in range(20):
            events = await _post(c, run_input(f"t{i}", "r1", f"hi {i}"))
            assert events[-1]["result"] == f"Hello! You said: hi {i}"
        asked = await _post(c, run_input("deep", "r1", "deep"))
        assert threads.active == 0  # finished (or interrupted) runs: all in the DB
        messages = (await c.get("/threads/t7/messages")).json()["messages"]
        assert [m["content"] for m in messages] == ["hi 7", "Hello! You said: hi 7"]
        [interrupt] = asked[-1]["outcome"]["interrupts"]
        resume = [{"interruptId": interrupt["id"], "status": "resolved", "payload": "sqlite"}]
        done = await _post(c, run_input("deep", "r2", resume=resume))
        assert done[-1]["result"] == "done: manager: use sqlite"
        assert threads.active == 0


def test_a_restarted_server_on_postgres_finds_the_threads_run(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    dsn: str = request.getfixturevalue("fresh_postgres")
    first = start_server(tmp_path, "--store", dsn)
    try:
        with first.client() as c:
            _, events = post_run(c, run_input("t", "r1", "deep"))
        [interrupt] = events[-1]["outcome"]["interrupts"]
    finally:
        first.kill()
    second = start_server(tmp_path, "--store", dsn)
    try:
        with second.client() as c:
            pending = c.get("/threads/t/requests").json()["requests"]
            assert [r["id"] for r in pending] == [interrupt["id"]]
            answered = c.post(f"/requests/{interrupt['id']}", json={"answer": "sqlite"})
            assert answered.status_code == 200
            _, after = post_run(c, run_input("t", "r2", resume=[]))
            messages = c.get("/threads/t/messages").json()["messages"]
        assert after[-1]["result"] == "done: manager: use sqlite"
        assert messages[-1]["content"] == "done: manager: use sqlite"
        assert second.notes() == ["specialist started"]
        _drop_web_connections(dsn)  # the database drops the server's connection: reopened
        with second.client() as c:
            _, hello = post_run(c, run_input("t2", "r1", "hello"))
            assert hello[-1]["result"] == "Hello! You said: hello"
            assert len(c.get("/threads/t2/messages").json()["messages"]) == 2
    finally:
        second.stop()


def _drop_web_connections(dsn: str) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        dropped = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
            ("hpd-agent-threads",),
        ).fetchall()
    assert dropped == [(True,)]


async def test_a_request_of_a_run_the_server_did_not_start_is_unknown(tmp_path: Path) -> None:
    """``POST /requests/{id}`` finds the thread through the request's run: a run started
    elsewhere on the same store (a script, the CLI) belongs to no thread."""
    app = create_app(build(), store=tmp_path / "web.db")
    store = app.state.threads.store
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c,
    ):
        result = await build().run("deep", store=store, on_unhandled="interrupt")
        assert result.status == "interrupted"
        [pending] = await store.list_requests()
        for path in (
            f"/requests/{pending.request_id}",
            f"/threads/t/requests/{pending.request_id}",
        ):
            response = await c.post(path, json={"answer": "sqlite"})
            assert response.status_code == 404
        assert (await store.get_request(pending.request_id)).status == "pending"
