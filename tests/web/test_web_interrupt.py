"""Interrupt mode over HTTP: a run that needs a human ends with an interrupt outcome, and the
next RunAgentInput on the thread resumes the same durable run with the answers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from conftest import Server, assert_conformant, post_run, run_input


def _types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


def _interrupts(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    last = events[-1]
    assert last["type"] == "RUN_FINISHED", last
    assert last["outcome"]["type"] == "interrupt"
    return last["outcome"]["interrupts"]


def test_chat_streams_text_and_finishes_with_the_answer(server: Server, tmp_path: Path) -> None:
    with server.client() as c:
        text, events = post_run(c, run_input("t", "r1", "hello"))
    assert_conformant(text, tmp_path, "chat")
    assert events[0]["type"] == "RUN_STARTED" and events[0]["protocolVersion"] == "1.0"
    streamed = "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert streamed == "Hello! You said: hello"
    assert events[-1]["result"] == "Hello! You said: hello"
    assert all(isinstance(e["timestamp"], int) for e in events)
    assert "\r" not in text and all("null" not in line for line in text.splitlines())


def test_depth_three_question_interrupts_and_resume_continues(
    server: Server, tmp_path: Path
) -> None:
    with server.client() as c:
        first_text, first = post_run(c, run_input("deep", "r1", "deep"))
        assert_conformant(first_text, tmp_path, "deep-1")
        [interrupt] = _interrupts(first)
        started = {e["subagentRunId"]: e for e in first if e["type"] == "SUBAGENT_STARTED"}
        # Orchestrator -> Manager -> Specialist: a tree from the events alone.
        specialist = started[interrupt["subagentRunId"]]
        assert specialist["name"] == "Specialist"
        assert started[specialist["parentSubagentRunId"]]["name"] == "Manager"
        assert interrupt["reason"] == "input_required"
        assert interrupt["message"] == "Which database?"
        assert interrupt["responseSchema"] == {"type": "string", "enum": ["postgres", "sqlite"]}
        ask = next(e for e in first if e.get("toolCallId") == interrupt["toolCallId"])
        assert ask["type"] == "TOOL_CALL_START" and ask["toolCallName"] == "ask_user"
        suspended = [e for e in first if e["type"] == "SUBAGENT_FINISHED"]
        assert suspended[0]["outcome"] == {"type": "suspended", "interruptIds": [interrupt["id"]]}

        resume = [{"interruptId": interrupt["id"], "status": "resolved", "payload": "sqlite"}]
        text, second = post_run(c, run_input("deep", "r2", resume=resume))
    assert_conformant(text, tmp_path, "deep-2")
    assert second[-1]["result"] == "done: manager: use sqlite"
    first_starts = {e["toolCallId"] for e in first if e["type"] == "TOOL_CALL_START"}
    assert not first_starts & {e["toolCallId"] for e in second if e["type"] == "TOOL_CALL_START"}
    results = {e["toolCallId"]: e["content"] for e in second if e["type"] == "TOOL_CALL_RESULT"}
    assert results[interrupt["toolCallId"]] == "sqlite"  # the original call's id
    assert server.notes() == ["specialist started"]  # nothing ran twice


def test_invalid_payload_is_refused_naming_the_interrupt_and_changes_nothing(
    server: Server, tmp_path: Path
) -> None:
    with server.client() as c:
        _, first = post_run(c, run_input("t", "r1", "deep"))
        [interrupt] = _interrupts(first)
        bad = [{"interruptId": interrupt["id"], "status": "resolved", "payload": "mongodb"}]
        text, refused = post_run(c, run_input("t", "r2", resume=bad))
        assert_conformant(text, tmp_path, "refused")
        assert _types(refused) == ["RUN_STARTED", "RUN_ERROR"]
        assert interrupt["id"] in refused[-1]["message"]
        assert refused[-1]["code"] == "invalid_payload"
        pending = c.get("/threads/t/requests").json()["requests"]
        assert [r["id"] for r in pending] == [interrupt["id"]]
        good = [{"interruptId": interrupt["id"], "status": "resolved", "payload": "postgres"}]
        _, done = post_run(c, run_input("t", "r3", resume=good))
    assert done[-1]["result"] == "done: manager: use postgres"


def test_resume_must_address_every_open_interrupt(server: Server) -> None:
    with server.client() as c:
        _, first = post_run(c, run_input("t", "r1", "two"))
        interrupts = _interrupts(first)
        assert len(interrupts) == 2
        partial = [{"interruptId": interrupts[0]["id"], "status": "resolved", "payload": "x"}]
        _, refused = post_run(c, run_input("t", "r2", resume=partial))
        assert refused[-1]["type"] == "RUN_ERROR" and refused[-1]["code"] == "missing_interrupts"
        assert interrupts[1]["id"] in refused[-1]["message"]
        unknown = [
            *(
                {"interruptId": i["id"], "status": "resolved", "payload": "sqlite"}
                for i in interrupts
            ),
            {"interruptId": "req_0000000000000000", "status": "resolved", "payload": "x"},
        ]
        _, refused = post_run(c, run_input("t", "r3", resume=unknown))
        assert refused[-1]["code"] == "unknown_interrupt"
        # Nothing was written by either refusal: both are still open.
        assert len(c.get("/threads/t/requests").json()["requests"]) == 2
        _, again = post_run(c, run_input("t", "r4", "hello"))
        assert again[-1]["code"] == "interrupted"


def test_parallel_questions_answered_in_reverse_order(server: Server, tmp_path: Path) -> None:
    with server.client() as c:
        _, first = post_run(c, run_input("t", "r1", "two"))
        interrupts = _interrupts(first)
        assert [i["message"] for i in interrupts] == ["First question?", "Second question?"]
        answers = {"First question?": "one", "Second question?": "two"}
        resume = [
            {"interruptId": i["id"], "status": "resolved", "payload": answers[i["message"]]}
            for i in reversed(interrupts)
        ]
        text, second = post_run(c, run_input("t", "r2", resume=resume))
    assert_conformant(text, tmp_path, "parallel-2")
    assert second[-1]["result"] == "done: one | two"


def test_cancelled_interrupt_gives_the_asker_the_cancelled_text(server: Server) -> None:
    with server.client() as c:
        _, first = post_run(c, run_input("t", "r1", "deep"))
        [interrupt] = _interrupts(first)
        resume = [{"interruptId": interrupt["id"], "status": "cancelled"}]
        _, second = post_run(c, run_input("t", "r2", resume=resume))
    result = next(
        e["content"]
        for e in second
        if e["type"] == "TOOL_CALL_RESULT" and e["toolCallId"] == interrupt["toolCallId"]
    )
    assert "cancel" in result.lower()
    assert second[-1]["type"] == "RUN_FINISHED"


def test_permission_interrupt_is_a_confirmation_answered_with_a_decision(
    server: Server, tmp_path: Path
) -> None:
    with server.client() as c:
        _, first = post_run(c, run_input("t", "r1", "permission"))
        [interrupt] = _interrupts(first)
        assert interrupt["reason"] == "confirmation"
        assert "oneOf" in interrupt["responseSchema"]
        loose = [{"interruptId": interrupt["id"], "status": "resolved", "payload": "yes"}]
        _, refused = post_run(c, run_input("t", "r2", resume=loose))
        assert refused[-1]["code"] == "invalid_payload"
        ok = [
            {"interruptId": interrupt["id"], "status": "resolved", "payload": {"kind": "approve"}}
        ]
        text, second = post_run(c, run_input("t", "r3", resume=ok))
    assert_conformant(text, tmp_path, "permission-2")
    assert second[-1]["result"] == "done: deleted /tmp/x"


def test_a_permission_approved_always_is_remembered_by_the_servers_store(
    server: Server, tmp_path: Path
) -> None:
    with server.client() as c:
        _, first = post_run(c, run_input("t", "r1", "permission"))
        [interrupt] = _interrupts(first)
        always = {"kind": "approve", "scope": "always", "match": {"path": "/tmp/*"}, "ttl": 3600}
        bad = [
            {
                "interruptId": interrupt["id"],
                "status": "resolved",
                "payload": {**always, "ttl": -1},
            }
        ]
        _, refused = post_run(c, run_input("t", "r2", resume=bad))
        assert refused[-1]["code"] == "invalid_payload"
        ok = [{"interruptId": interrupt["id"], "status": "resolved", "payload": always}]
        _, second = post_run(c, run_input("t", "r3", resume=ok))
        assert second[-1]["result"] == "done: deleted /tmp/x"
        # Another thread's run: the grant approves the call, no interrupt; the request and
        # its resolution still go by.
        _, other = post_run(c, run_input("t2", "r4", "permission"))
    assert other[-1]["type"] == "RUN_FINISHED" and other[-1]["result"] == "done: deleted /tmp/x"
    resolved = [
        e["value"]
        for e in other
        if e["type"] == "CUSTOM" and e["name"] == "hpd_agent.request_resolved"
    ]
    assert [(v["status"], v["answer"]) for v in resolved] == [
        ("answered", {"approved": True, "scope": "once"})
    ]
    # The grant names who gave it: the page's identity ("local": no token), channel web.
    import anyio

    from hpd_agent.store import SQLiteStore

    async def kept() -> list[tuple[str | None, str | None]]:
        store = SQLiteStore(tmp_path / "web.db")
        try:
            book = store.capabilities().grants
            assert book is not None
            return [(g.granted_by, g.channel) for g in await book.list_grants()]
        finally:
            await store.aclose()

    assert anyio.run(kept) == [("local", "web")]
