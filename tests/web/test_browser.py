"""The web page in a real browser, as a person uses it.

Headless Debian Chromium driven by Playwright's Python package, against a real
``hpd-agent serve tests.web.browser_agents:root`` subprocess on 127.0.0.1 with a SQLite store.
Every wait is on page state (Playwright's auto-waiting ``expect``), never a sleep.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_agents import BUDGET_QUESTION, HOSTILE_URL, SIGN_IN_URL
from browser_server import Server, final_text, send  # first: skips without a browser
from playwright.sync_api import Browser, Locator, Page, Route, expect


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = Server(tmp_path_factory.mktemp("web") / "store.db")
    yield srv
    srv.stop()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    # A fresh context per test: its own localStorage, so its own conversation thread.
    context = browser.new_context(viewport={"width": 1300, "height": 1000})
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda error: errors.append(str(error)))
    yield pg
    context.close()
    assert errors == [], f"uncaught errors in the page: {errors}"


def question(page: Page, title: str) -> Locator:
    return page.get_by_role("article", name=title)


def agent(page: Page, name: str) -> Locator:
    return page.get_by_role("region", name=f"Agent {name}")


def answer_region(page: Page) -> None:
    card = question(page, "Which region?")
    card.get_by_label("Your answer").fill("eu-west")
    card.get_by_role("button", name="Send answer").click()


def answer_database(page: Page) -> None:
    question(page, "Which database?").get_by_role("button", name="sqlite").click()


def wait_for_both_plan_questions(page: Page) -> None:
    expect(page.get_by_role("article")).to_have_count(2)
    expect(question(page, "Which database?")).to_contain_text(
        " > ".join(["Orchestrator", "Manager", "Specialist"])
    )
    expect(question(page, "Which region?")).to_contain_text("Orchestrator")


def approve_and_finish(page: Page) -> None:
    permission = page.get_by_role("article", name=re.compile("delete_file"))
    expect(permission).to_have_attribute("data-kind", "permission")
    expect(permission.get_by_label("Arguments of delete_file")).to_contain_text("/tmp/old-plan.txt")
    # Deny is how a permission is refused: no second way out.
    expect(permission.get_by_role("button", name="Decline to answer")).to_have_count(0)
    permission.get_by_role("button", name="Approve once").click()
    expect(final_text(page)).to_have_text(
        "Final answer: manager: use sqlite | eu-west | deleted /tmp/old-plan.txt"
    )
    expect(page.get_by_role("status")).to_have_text("Done")
    expect(page.get_by_text("No questions waiting")).to_be_visible()
    expect(page.get_by_role("button", name="Send", exact=True)).to_be_enabled()


def test_nested_agents_questions_from_two_depths_in_reverse_order_and_a_permission(
    server: Server, page: Page
) -> None:
    page.goto(server.url)
    send(page, "plan")
    expect(page.get_by_role("note", name="You")).to_have_text(re.compile(r"plan$"))

    # The tree, from the events alone: names at their depths, the Specialist inside the Manager.
    manager, specialist = agent(page, "Manager"), agent(page, "Specialist")
    expect(manager).to_have_attribute("data-depth", "1")
    expect(specialist).to_have_attribute("data-depth", "2")
    expect(manager.get_by_role("region", name="Agent Specialist")).to_be_visible()
    # The agent call is drawn as the Specialist's node, labelled with the query it was given.
    expect(specialist.locator(":scope > .agent-head .agent-call")).to_have_text("pick a database")

    wait_for_both_plan_questions(page)
    asked = [card.locator("h3").inner_text() for card in page.get_by_role("article").all()]
    # Answer the one asked last first; the run goes on in place for the answered branch
    # while the other question still waits.
    for title in reversed(asked):
        other = question(page, next(t for t in asked if t != title))
        if title == "Which database?":
            answer_database(page)
            # Finished, the Specialist folds away inside the Manager (found by its name, then).
            expect(page.locator('[data-agent="Specialist"] .agent-text')).to_have_text("use sqlite")
        else:
            answer_region(page)
            expect(
                agent(page, "Orchestrator").locator(
                    ':scope > .agent-body > [data-tool="ask_user"] .tool-result'
                )
            ).to_have_text("eu-west")
        expect(question(page, title)).to_have_count(0)
        if other.count():
            expect(other).to_be_visible()
    expect(manager.locator(":scope > .agent-body > .agent-text")).to_have_text(
        "manager: use sqlite"
    )
    approve_and_finish(page)

    # A finished agent is folded to one line; opening the Manager shows the Specialist's line,
    # and folding it again hides it.
    toggle = manager.get_by_role("button", name=re.compile(r"^Manager worked \d+ s · 1 tool$"))
    expect(toggle).to_have_attribute("aria-expanded", "false")
    expect(specialist).to_be_hidden()
    toggle.click()
    expect(toggle).to_have_attribute("aria-expanded", "true")
    expect(specialist).to_be_visible()
    expect(
        specialist.get_by_role("button", name=re.compile("^Specialist worked"))
    ).to_have_attribute("aria-expanded", "false")
    toggle.click()
    expect(specialist).to_be_hidden()


def test_reload_mid_question_relists_questions_and_rebuilds_the_tree(
    server: Server, page: Page
) -> None:
    page.goto(server.url)
    send(page, "plan")
    wait_for_both_plan_questions(page)
    thread = page.evaluate("new URLSearchParams(location.hash.slice(1)).get('thread')")
    assert thread

    page.reload()
    wait_for_both_plan_questions(page)
    assert page.evaluate("new URLSearchParams(location.hash.slice(1)).get('thread')") == thread
    expect(page.get_by_role("note", name="You")).to_have_text(re.compile(r"plan$"))
    expect(agent(page, "Specialist")).to_have_attribute("data-depth", "2")
    expect(agent(page, "Manager").get_by_role("region", name="Agent Specialist")).to_be_visible()

    answer_region(page)
    expect(question(page, "Which region?")).to_have_count(0)
    # A second reload with one question left: only that one comes back.
    page.reload()
    expect(page.get_by_role("article")).to_have_count(1)
    answer_database(page)
    approve_and_finish(page)


def test_two_calls_of_one_agent_are_two_nodes_each_asking_and_answered_in_place(
    server: Server, page: Page
) -> None:
    page.goto(server.url)
    send(page, "writers")
    expect(page.get_by_role("article")).to_have_count(2)
    # A reload rebuilds the same: the tree from the events, the cards from the request list.
    page.reload()
    expect(page.get_by_role("article")).to_have_count(2)
    writers = page.locator('section.agent[data-agent="Writer"]')
    expect(writers).to_have_count(2)
    nodes = {q: agent(page, f"Writer: {q}") for q in ("alpha", "beta")}
    cards = {q: question(page, f"Detail for {q}?") for q in ("alpha", "beta")}
    for q, node in nodes.items():
        expect(node).to_have_attribute("data-depth", "1")
        expect(node).to_have_class(re.compile(r"\basking\b"))
        expect(node.locator(":scope > .agent-body > .agent-text")).to_have_text([f"working on {q}"])
        # Its card names the call that asks and points at that node.
        expect(cards[q].locator(".agent-call")).to_have_text(q)
        expect(cards[q]).to_contain_text("Orchestrator > Writer")
        run = node.get_attribute("data-run")
        assert run and run.startswith("inv_")
        expect(cards[q]).to_have_attribute("data-subagent", run)
    assert nodes["alpha"].get_attribute("data-run") != nodes["beta"].get_attribute("data-run")

    # Answer beta first: only beta's node goes on, with beta's answer.
    for q, other in (("beta", "alpha"), ("alpha", "beta")):
        cards[q].get_by_label("Your answer").fill(f"answer {q.upper()}")
        cards[q].get_by_role("button", name="Send answer").click()
        expect(cards[q]).to_have_count(0)
        expect(nodes[q].locator(":scope > .agent-body > .agent-text")).to_have_text(
            [f"working on {q}", f"{q}: answer {q.upper()}"]
        )
        expect(nodes[q]).not_to_have_class(re.compile(r"\basking\b"))
        if q == "beta":
            expect(nodes[other]).to_have_class(re.compile(r"\basking\b"))
            expect(nodes[other].locator(":scope > .agent-body > .agent-text")).to_have_text(
                [f"working on {other}"]
            )
            expect(cards[other]).to_be_visible()
    expect(final_text(page)).to_have_text("Writers done: alpha: answer ALPHA | beta: answer BETA")
    expect(page.get_by_role("status")).to_have_text("Done")


def test_question_kinds_confirm_multiple_choice_and_a_schema_form(
    server: Server, page: Page
) -> None:
    page.goto(server.url)
    send(page, "forms")
    expect(page.get_by_role("article")).to_have_count(5)
    # Each kind (form, choice, yes/no, action, value) can also be declined.
    for card in page.get_by_role("article").all():
        expect(card.get_by_role("button", name="Decline to answer")).to_have_count(1)

    form = question(page, "Deployment settings?")
    # Raw JSON the schema refuses: the server's 400 is shown on the card, nothing is lost.
    form.get_by_label("Edit as raw JSON").check()
    form.get_by_label("Answer as JSON").fill('{"region": "mars", "replicas": 1}')
    form.get_by_role("button", name="Send answer").click()
    expect(form.get_by_role("alert")).to_contain_text("mars")
    expect(page.get_by_role("article")).to_have_count(5)
    # Back to the fields the schema drew.
    form.get_by_label("Edit as raw JSON").uncheck()
    form.get_by_label("region (required)").select_option("us")
    form.get_by_label("replicas (required)").fill("3")
    form.get_by_label("public").check()
    form.get_by_role("button", name="Send answer").click()
    expect(form).to_have_count(0)

    features = question(page, "Which features?")
    features.get_by_label("auth").check()
    features.get_by_label("search").check()
    features.get_by_role("button", name="Send choice").click()
    deploy = question(page, "Deploy now?")
    # Asked with a timeout: its card counts down, and is marked once the run warns of it.
    countdown = deploy.get_by_role("timer")
    expect(countdown).to_have_text(re.compile(r"^Expires in (10:00|9:[0-5]\d)$"))
    expect(countdown).not_to_have_text(countdown.inner_text())  # second by second
    expect(deploy).to_have_class(re.compile(r"\bexpiring\b"))
    deploy.get_by_role("button", name="Yes").click()

    sign_in = page.locator('article[data-kind="action"]')
    expect(sign_in.get_by_role("link", name="Sign in to Example")).to_have_attribute(
        "href", SIGN_IN_URL
    )
    sign_in.get_by_role("button", name="Done").click()
    naming = question(page, "What should the service be called?")
    naming.get_by_label("Value for service_name").fill("billing-api")
    naming.get_by_role("button", name="Send answer").click()

    expect(final_text(page)).to_have_text(
        "Forms done: deploy=True | features=auth,search | "
        'settings={"public": true, "region": "us", "replicas": 3} | '
        "signed_in=True | name=billing-api"
    )


def test_model_and_question_text_is_shown_as_text_never_as_markup(
    server: Server, page: Page
) -> None:
    page.goto(server.url)
    send(page, "hostile")
    expect(page.get_by_role("article")).to_have_count(2)
    link = page.get_by_role("article", name="Follow the link?")
    # A javascript: URL is shown as text, never made a link.
    expect(link).to_contain_text(HOSTILE_URL)
    expect(link.get_by_role("link")).to_have_count(0)
    # The action's own "Decline" (the tool gets False), not "Decline to answer".
    link.get_by_role("button", name="Decline", exact=True).click()
    card = page.locator('article[data-kind="text"]')
    expect(card.locator("h3")).to_have_text(
        re.compile(r'^Pick <img src=x onerror="window.__pwned=1"><script>')
    )
    card.get_by_label("Your answer").fill("<b>bold?</b>")
    card.get_by_role("button", name="Send answer").click()
    expect(final_text(page)).to_contain_text("and <b>bold?</b> | followed=False")
    expect(final_text(page)).to_contain_text("Model says <img src=x")
    injected: Any = page.evaluate(
        "document.querySelectorAll('#transcript img, #transcript script, #transcript b,"
        " #questions img, #questions script').length"
    )
    assert injected == 0
    assert page.evaluate("window.__pwned") is None


def stored_status(server: Server, request_id: str) -> str:
    with sqlite3.connect(f"file:{server.store}?mode=ro", uri=True) as db:
        row = db.execute("SELECT status FROM hpd_requests WHERE id = ?", (request_id,)).fetchone()
    assert row is not None, f"no stored request {request_id}"
    return row[0]


def test_a_sub_agents_question_declined_from_the_keyboard_reaches_the_asking_tool(
    server: Server, page: Page
) -> None:
    page.goto(server.url)
    send(page, "decline")
    card = question(page, BUDGET_QUESTION)
    expect(card).to_contain_text("Orchestrator > Surveyor")
    request_id = card.get_attribute("data-request")
    assert request_id
    decline = card.get_by_role("button", name="Decline to answer")

    # A failed decline is shown on the card like a failed answer, and the card stays usable.
    posted: list[Any] = []

    def refuse(route: Route) -> None:
        posted.append(route.request.post_data_json)
        route.fulfill(status=503, json={"error": "the server is busy"})

    page.route(f"**/requests/{request_id}", refuse, times=1)
    decline.click()
    expect(card.get_by_role("alert")).to_have_text("the server is busy")
    assert posted == [{"decline": True}]
    expect(decline).to_be_enabled()

    # From the keyboard: the answer box, Send answer, then Decline to answer.
    card.get_by_label("Your answer").focus()
    page.keyboard.press("Tab")
    expect(card.get_by_role("button", name="Send answer")).to_be_focused()
    page.keyboard.press("Tab")
    expect(decline).to_be_focused()
    with page.expect_response(f"**/threads/*/requests/{request_id}") as declined:
        page.keyboard.press("Enter")
    assert declined.value.status == 200
    assert json.loads(declined.value.text()) == {"id": request_id, "declined": True}

    # The card leaves like an answered one; the asking tool got QuestionNotAnswered("declined").
    expect(card).to_have_count(0)
    expect(page.get_by_text("No questions waiting")).to_be_visible()
    expect(final_text(page)).to_have_text("Final answer: surveyor: budget not given: declined")
    expect(page.get_by_role("status")).to_have_text("Done")
    assert stored_status(server, request_id) == "declined"


def test_a_token_server_is_used_with_the_token_from_the_address_or_asked_once(
    browser: Browser, tmp_path: Path
) -> None:
    srv = Server(tmp_path / "store.db", "--token", "s3cret-token")
    try:
        context = browser.new_context()
        page = context.new_page()
        page.goto(srv.url + "#token=s3cret-token")
        send(page, "hello")
        expect(final_text(page)).to_have_text("Hello! You said: hello")
        context.close()

        # No token in the address: the server's 401 makes the page ask for it, once.
        context = browser.new_context()
        page = context.new_page()
        asked: list[str] = []

        def give_token(dialog: Any) -> None:
            asked.append(dialog.message)
            dialog.accept("s3cret-token")

        page.on("dialog", give_token)
        page.goto(srv.url)
        send(page, "hello again")
        expect(final_text(page)).to_have_text("Hello! You said: hello again")
        assert len(asked) == 1 and "token" in asked[0]
        context.close()
    finally:
        srv.stop()


def test_a_kind_of_the_apps_own_is_a_card_drawn_from_its_label_and_schema(
    browser: Browser, tmp_path: Path
) -> None:
    srv = Server(tmp_path / "store.db", agent="tests.web.rating_agents:rater")
    context = browser.new_context(viewport={"width": 1300, "height": 1000})
    try:
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(srv.url)
        send(page, "rate")
        card = question(page, "How good was the plan?")
        expect(card).to_have_attribute("data-kind", "rating")
        expect(card.locator(".kind")).to_have_text("Rate 1–5")  # its label, not "Question"
        stars = card.get_by_label("Rate 1–5")  # a number field, drawn from its answer schema
        expect(stars).to_have_attribute("type", "number")
        stars.fill("9")
        card.get_by_role("button", name="Send answer").click()
        # The server's check (the schema the question carries): said on the card, kept open.
        expect(card.get_by_role("alert")).to_contain_text("9 is greater than the maximum of 5")
        stars.fill("4")
        card.get_by_role("button", name="Send answer").click()
        expect(card).to_have_count(0)
        expect(final_text(page)).to_have_text("done: rated 4 of 5")
        assert errors == [], errors
    finally:
        context.close()
        srv.stop()
