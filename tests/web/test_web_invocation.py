"""Two parallel calls of one sub-agent over AG-UI: two subagents, told apart by invocation.

The Orchestrator calls the Writer twice in one turn (``writers``: queries alpha and beta);
both calls stream text and ask a question at the same time. Each call is its own subagent
(its ``subagentRunId`` is the call's ``invocation_id``), with its own text, tool calls and
request, and each answer reaches the call that asked, live and across an interrupt/resume.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import httpx
from conftest import Server, assert_conformant, post_run, run_input, sse_events

LIVE = {"forwardedProps": {"hpd_agent": {"mode": "live"}}}
QUERIES = ("alpha", "beta")


def _writers(events: list[dict[str, Any]]) -> dict[str, str]:
    """query -> subagentRunId of each Writer call."""
    started = [e for e in events if e["type"] == "SUBAGENT_STARTED" and e["name"] == "Writer"]
    assert len(started) == 2
    return {e["description"]: e["subagentRunId"] for e in started}


def _text_by_subagent(events: list[dict[str, Any]]) -> dict[str | None, str]:
    texts: dict[str | None, str] = defaultdict(str)
    owner: dict[str, str | None] = {}
    for e in events:
        if e["type"] == "TEXT_MESSAGE_START":
            owner[e["messageId"]] = e.get("subagentRunId")
        if e["type"] == "TEXT_MESSAGE_CONTENT":
            # The content's own subagentRunId and its message's agree.
            assert e.get("subagentRunId") == owner[e["messageId"]]
            texts[e.get("subagentRunId")] += e["delta"]
    return texts


def _check_calls(events: list[dict[str, Any]], ids: dict[str, str], requests: list[Any]) -> None:
    """Each call's text, ask_user call and request are its own."""
    texts = _text_by_subagent(events)
    asks = {
        e["subagentRunId"]: e["toolCallId"]
        for e in events
        if e["type"] == "TOOL_CALL_START" and e["toolCallName"] == "ask_user"
    }
    by_question = {r["question"]: r for r in requests}
    for query in QUERIES:
        sid = ids[query]
        assert f"working on {query}" in texts[sid]
        other = next(q for q in QUERIES if q != query)
        assert other not in texts[sid]
        request = by_question[f"detail for {query}?"]
        assert request["subagentRunId"] == sid
        assert request["invocationId"] == sid
        assert request["toolCallId"] == asks[sid]


def _follow_until_requests(c: httpx.Client, thread: str, count: int) -> list[dict[str, Any]]:
    with c.stream("GET", f"/threads/{thread}/events", timeout=60) as response:
        buffer = ""
        for chunk in response.iter_text():
            buffer += chunk
            events = sse_events(buffer)
            if sum(e.get("name") == "hpd_agent.request" for e in events) >= count:
                return events
    raise AssertionError("the requests were not announced")


def test_live_two_calls_of_one_agent_are_two_subagents_each_answered_in_place(
    server: Server, tmp_path: Path
) -> None:
    with server.client() as c:
        with c.stream("POST", "/agent", json=run_input("w", "r1", "writers", **LIVE)) as r:
            for line in r.iter_lines():
                if "hpd_agent.request" in line:
                    break
        seen = _follow_until_requests(c, "w", 2)
        ids = _writers(seen)
        assert ids["alpha"] != ids["beta"]
        assert all(sid.startswith("inv_") for sid in ids.values())
        customs = [e for e in seen if e.get("name") == "hpd_agent.request"]
        requests = [e["value"] for e in customs]
        # The CUSTOM event itself is attributed to the asking call too.
        assert {e["subagentRunId"] for e in customs} == set(ids.values())
        _check_calls(seen, ids, requests)
        # Answered in reverse order, each answer naming its question.
        for request in reversed(requests):
            answer = {"answer": f"answer to {request['question']}"}
            assert c.post(f"/threads/w/requests/{request['id']}", json=answer).status_code == 200
        replay = c.get("/threads/w/events", params={"from": 0}, timeout=60).text
    assert_conformant(replay, tmp_path, "writers-live")
    events = sse_events(replay)
    assert events[-1]["type"] == "RUN_FINISHED"
    texts = _text_by_subagent(events)
    finished = {e["subagentRunId"]: e for e in events if e["type"] == "SUBAGENT_FINISHED"}
    resolved = {
        e["value"]["id"]: e["subagentRunId"]
        for e in events
        if e.get("name") == "hpd_agent.request_resolved"
    }
    for query in QUERIES:
        sid = ids[query]
        own = f"{query}: answer to detail for {query}?"
        assert texts[sid] == f"working on {query}{own}"
        assert finished[sid]["result"] == own
        request = next(r for r in requests if r["subagentRunId"] == sid)
        assert resolved[request["id"]] == sid
    assert events[-1]["result"] == "done: alpha: answer to detail for alpha? | " + (
        "beta: answer to detail for beta?"
    )


def test_interrupted_calls_keep_their_ids_across_the_resume(server: Server, tmp_path: Path) -> None:
    with server.client() as c:
        first_text, first = post_run(c, run_input("wi", "r1", "writers"))
        assert_conformant(first_text, tmp_path, "writers-1")
        ids = _writers(first)
        last = first[-1]
        assert last["type"] == "RUN_FINISHED" and last["outcome"]["type"] == "interrupt"
        interrupts = last["outcome"]["interrupts"]
        listed = c.get("/threads/wi/requests").json()["requests"]
        _check_calls(first, ids, listed)
        by_id = {r["id"]: r for r in listed}
        assert {i["subagentRunId"] for i in interrupts} == set(ids.values())
        for interrupt in interrupts:
            assert interrupt["toolCallId"] == by_id[interrupt["id"]]["toolCallId"]
            assert interrupt["subagentRunId"] == by_id[interrupt["id"]]["subagentRunId"]
        suspended = {
            e["subagentRunId"]: e["outcome"]["interruptIds"]
            for e in first
            if e["type"] == "SUBAGENT_FINISHED"
        }
        for interrupt in interrupts:
            assert suspended[interrupt["subagentRunId"]] == [interrupt["id"]]
        resume = [
            {"interruptId": i["id"], "status": "resolved", "payload": f"answer to {i['message']}"}
            for i in interrupts
        ]
        text, second = post_run(c, run_input("wi", "r2", resume=resume))
    assert_conformant(text, tmp_path, "writers-2")
    # The same calls, under the same ids: each got the answer to its own question.
    texts = _text_by_subagent(second)
    results = {e["toolCallId"]: e["content"] for e in second if e["type"] == "TOOL_CALL_RESULT"}
    for query in QUERIES:
        sid = ids[query]
        own = f"{query}: answer to detail for {query}?"
        assert texts[sid] == own
        ask = next(r for r in listed if r["subagentRunId"] == sid)
        assert results[ask["toolCallId"]] == f"answer to detail for {query}?"
    assert second[-1]["result"] == "done: alpha: answer to detail for alpha? | " + (
        "beta: answer to detail for beta?"
    )
