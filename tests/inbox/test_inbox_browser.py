"""The inbox's page in headless Chromium (Playwright) against a real ``hpd-agent inbox``:
questions of two runs grouped by run, the run with the newest question first; the web
page's own cards (a choice, a permission with its arguments, a yes/no question counting
down to its expiry); answers and a decline given on the cards and written in the store; a
question opened elsewhere appearing live (its run moving to the top), one answered elsewhere
leaving live; a phone's width without sideways scrolling.

Screenshots go to ``$HPD_TEST_ARTIFACTS/inbox-page/`` when the variable is set, else to the
test's ``tmp_path``.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anyio
import pytest
from inbox_server import inbox_server

from hpd_agent.events import ClarificationRequest, PermissionRequest
from hpd_agent.store import RequestRecord, open_store, respond

CHROMIUM = "/usr/bin/chromium"
try:
    from playwright.sync_api import Browser, Page, expect, sync_playwright
except ImportError:  # pragma: no cover - depends on the machine
    pytest.skip("playwright is not installed (pip install -e '.[dev]')", allow_module_level=True)
if not os.path.exists(CHROMIUM):  # pragma: no cover - depends on the machine
    pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)", allow_module_level=True)

expect.set_options(timeout=30_000)
TOKEN = "page-token"
LONG = "A todo API built with FastAPI.\n" + "It lists, adds and removes todos. " * 6


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as p:
        b = p.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--headless=new", "--disable-gpu"]
        )
        yield b
        b.close()


@pytest.fixture
def artifacts(tmp_path: Path) -> Path:
    root = os.environ.get("HPD_TEST_ARTIFACTS")
    folder = Path(root) / "inbox-page" if root else tmp_path
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _question(run_id: str, path: tuple[str, ...], request_id: str, **fields: Any) -> Any:
    return ClarificationRequest(
        run_id=run_id, agent_path=path, depth=len(path) - 1, request_id=request_id, **fields
    )


def _records(now: float) -> list[RequestRecord]:
    choice = _question(
        "run_alpha",
        ("Orchestrator", "Coder"),
        "req_framework",
        question="Which framework?",
        question_kind="choice",
        options=("FastAPI", "Django"),
    )
    write = PermissionRequest(
        run_id="run_alpha",
        agent_path=("Orchestrator", "Coder"),
        depth=1,
        request_id="req_write",
        tool_name="write_file",
        arguments={"path": "app.js", "content": LONG},
        tool_call_id="call_write",
    )
    ship = _question(
        "run_beta", ("Planner",), "req_ship", question="Ship it?", question_kind="confirm"
    )
    return [
        RequestRecord.from_event(choice, now=now - 30),
        RequestRecord.from_event(write, now=now - 20),
        RequestRecord.from_event(ship, timeout=600, now=now - 10),
    ]


def _with_store(location: str, work: Any, *args: Any) -> Any:
    """``work(store, *args)`` on the store, in a thread of its own (Playwright's sync API
    holds an event loop in this one)."""

    async def run() -> Any:
        store = open_store(location)
        try:
            return await work(store, *args)
        finally:
            await store.aclose()

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(anyio.run, run).result(60)


async def _add(store: Any, records: list[RequestRecord]) -> None:
    for record in records:
        await store.add_request(record)


async def _get(store: Any, request_id: str) -> RequestRecord | None:
    return await store.get_request(request_id)


async def _respond(store: Any, request_id: str, answer: Any) -> None:
    await respond(store, request_id, answer)


def _runs(page: Page) -> list[str]:
    return page.locator("section.run > header h3").all_inner_texts()


def _no_sideways_scroll(page: Page) -> None:
    width, scroll = page.evaluate("[innerWidth, document.scrollingElement.scrollWidth]")
    assert scroll <= width, f"the page scrolls sideways: {scroll} > {width}"


def test_the_page_answers_every_run_of_the_store_live(
    browser: Browser, tmp_path: Path, artifacts: Path
) -> None:
    location = str(tmp_path / "runs.db")
    _with_store(location, _add, _records(time.time()))
    with inbox_server(location, "--token", TOKEN) as url:
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(f"{url}#token={TOKEN}")

        expect(page.locator("#live")).to_have_text("Live")
        expect(page.locator("#summary")).to_have_text("3 questions waiting in 2 runs")
        # The run with the newest question first; a run by its root agent and a tag.
        expect(page.locator("section.run > header h3")).to_have_count(2)
        planner, orchestrator = _runs(page)
        assert re.fullmatch(r"Planner #[0-9a-f]{6}", planner)
        assert re.fullmatch(r"Orchestrator #[0-9a-f]{6}", orchestrator)
        assert "run_alpha" not in page.content() and "run_beta" not in page.content()

        # The web page's cards: by kind, a permission's arguments, a countdown.
        ship = page.get_by_role("article", name="Ship it?")
        expect(ship.locator(".kind")).to_have_text("Yes or no")
        expect(ship.get_by_role("timer")).to_have_text(re.compile(r"^Expires in [89]:\d\d$"))
        write = page.get_by_role("article", name="Allow write_file?")
        expect(write.locator(".agent-path")).to_have_text("Orchestrator > Coder")
        args = write.get_by_label("Arguments of write_file")
        expect(args.locator("dt")).to_have_text(["path", "content"])
        expect(args.locator("dd").first).to_have_text("app.js")
        framework = page.get_by_role("article", name="Which framework?")
        expect(framework.locator(".kind")).to_have_text("Choose one")
        page.screenshot(path=str(artifacts / "desktop-1-listed.png"), full_page=True)

        phone = context.new_page()
        phone.set_viewport_size({"width": 390, "height": 844})
        phone.goto(f"{url}#token={TOKEN}")
        expect(phone.get_by_role("article", name="Allow write_file?")).to_be_visible()
        _no_sideways_scroll(phone)
        phone.screenshot(path=str(artifacts / "phone-1-listed.png"), full_page=True)
        phone.close()

        # A question opened elsewhere appears live; its run has the newest question now.
        late = _question(
            "run_alpha", ("Orchestrator",), "req_late", question="Anything else to add?"
        )
        _with_store(location, _add, [RequestRecord.from_event(late)])
        expect(page.get_by_role("article", name="Anything else to add?")).to_be_visible()
        expect(page.locator("#summary")).to_have_text("4 questions waiting in 2 runs")
        assert _runs(page) == [orchestrator, planner]

        # Answered on the cards: written in the store, the cards gone.
        framework.get_by_role("button", name="FastAPI").click()
        expect(framework).to_have_count(0)
        write.get_by_role("button", name="Approve once").click()
        expect(write).to_have_count(0)
        ship.get_by_role("button", name="Decline to answer").click()
        expect(ship).to_have_count(0)
        expect(page.locator("section.run > header h3")).to_have_text(
            [orchestrator]
        )  # Planner: done
        stored = {r: _with_store(location, _get, r) for r in ("req_framework", "req_write")}
        assert stored["req_framework"].answer == "FastAPI"
        assert stored["req_write"].answer == {"kind": "approve", "scope": "once"}
        assert _with_store(location, _get, "req_ship").status == "declined"

        # One answered elsewhere leaves at once; nothing waits any more.
        _with_store(location, _respond, "req_late", "No")
        expect(page.get_by_role("article", name="Anything else to add?")).to_have_count(0)
        expect(page.locator("#summary")).to_have_text("No questions waiting")
        expect(page.locator("#empty")).to_be_visible()
        # What ended, newest first: how, who, on which channel (here or elsewhere).
        ended = page.get_by_role("region", name="Recently resolved").get_by_role("listitem")
        expect(ended.locator(".ended-question")).to_have_text(
            [
                "Anything else to add?",
                "Ship it?",
                re.compile(r"^Allow write_file\? \(path: app\.js, content: A todo API"),
                "Which framework?",
            ]
        )
        expect(ended.locator(".ended-outcome")).to_have_text(
            [
                re.compile(r"^Answered: No via api at "),
                re.compile(r"^Declined by token via inbox at "),
                re.compile(r"^Answered: approved by token via inbox at "),
                re.compile(r"^Answered: FastAPI by token via inbox at "),
            ]
        )
        page.screenshot(path=str(artifacts / "desktop-2-done.png"), full_page=True)
        page.reload()  # the inbox keeps them: a page opened later shows them too
        expect(page.locator("#live")).to_have_text("Live")
        expect(ended.locator(".ended-question")).to_have_count(4)
        expect(ended.first.locator(".ended-where")).to_have_text(f"{orchestrator} · Orchestrator")
        context.close()
        assert errors == [], f"uncaught errors in the page: {errors}"
