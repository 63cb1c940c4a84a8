"""The page as a chat people would choose, at a phone's width and a laptop's (issue 34).

Headless Debian Chromium (Playwright) against real ``hpd-agent serve`` subprocesses: the
agents' markdown drawn (a heading, a table, a code block, links) and its markup inert; the
page following the conversation (the composer pinned, new content scrolled into view unless
the reader scrolled up, then a pill; the questions reachable on a phone without an empty box);
a finished sub-agent folded to one line; the activity indicator; the welcome with the agent's
suggested prompts. Screenshots go to ``$HPD_TEST_ARTIFACTS/web-page/chat-<width>-<step>.png``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_server import (  # first: it skips the module without a browser
    VIEWPORTS,
    Server,
    assert_fits,
    final_text,
    send,
    shoot,
)
from playwright.sync_api import Browser, Locator, Page, Route, expect

SERVED_EXAMPLE = "examples/served_agent.py:agent"
WIDTHS = sorted(VIEWPORTS)
# Whatever markup could run or load something, anywhere in the conversation or the questions:
# such elements (but the cards' own inputs), links that are not web links, inline handlers.
INJECTED = r"""Array.from(document.querySelectorAll('#transcript *, #questions *')).filter(e =>
  ['IMG', 'SCRIPT', 'IFRAME', 'B', 'OBJECT', 'EMBED', 'svg', 'STYLE', 'FORM'].includes(e.tagName)
  && !e.matches('form.answer-form, form.deny-form')
  || e.tagName === 'INPUT' && !e.closest('form.answer-form, form.deny-form')
  || e.hasAttribute('src') || e.hasAttribute('style') && !e.matches('textarea')
  || e.getAttributeNames().some(n => n.startsWith('on'))
  || /^\s*(javascript|data|vbscript):/i.test(e.getAttribute('href') || '')
).map(e => e.outerHTML.slice(0, 80))"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = Server(tmp_path_factory.mktemp("web") / "store.db")
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = Server(tmp_path_factory.mktemp("web") / "store.db", agent=SERVED_EXAMPLE)
    yield srv
    srv.stop()


@pytest.fixture(params=WIDTHS)
def page(request: pytest.FixtureRequest, browser: Browser) -> Iterator[Page]:
    width, height = VIEWPORTS[request.param]
    context = browser.new_context(viewport={"width": width, "height": height})
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda error: errors.append(str(error)))
    yield pg
    context.close()
    assert errors == [], f"uncaught errors in the page: {errors}"


def width_of(page: Page) -> str:
    size = page.viewport_size
    assert size is not None
    return next(name for name, (w, _) in VIEWPORTS.items() if w == size["width"])


def assert_links_are_web_links(page: Page) -> None:
    """Every link on the page goes to an http(s) address and opens apart from the page."""
    assert page.evaluate(INJECTED) == []
    assert page.evaluate("window.__pwned") is None
    links: list[dict[str, Any]] = page.evaluate(
        "Array.from(document.querySelectorAll('#transcript a[href], #questions a[href]'),"
        " a => ({href: a.getAttribute('href'), rel: a.rel, target: a.target}))"
    )
    for link in links:
        assert re.match(r"https?://", link["href"]), link
        assert link["rel"] == "noopener noreferrer" and link["target"] == "_blank", link


def test_agent_markdown_is_drawn_and_its_markup_stays_inert(
    server: Server, page: Page, artifacts: Path
) -> None:
    page.goto(server.url)
    send(page, "markdown")
    expect(page.get_by_role("status")).to_have_text("Done")
    answer = final_text(page)
    expect(answer.get_by_role("heading", level=2)).to_have_text("The plan")
    expect(answer.locator("strong")).to_have_text("two steps")
    expect(answer.locator("p > code")).to_have_text("pytest")
    table = answer.get_by_role("table")
    expect(table.get_by_role("columnheader")).to_have_text(["Step", "Owner", "Days"])
    expect(table.get_by_role("row")).to_have_count(3)
    expect(table.get_by_role("cell")).to_have_text(
        ["Build the API", "Coder", "3", "Write the tests", "Tester", "2"]
    )
    expect(answer.locator("pre > code")).to_have_text("def add(a, b):\n    return a + b\n")
    # The code block's own button copies it.
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    copy = answer.get_by_role("button", name="Copy code")
    copy.click()
    expect(copy).to_have_text("Copied")
    assert page.evaluate("navigator.clipboard.readText()") == "def add(a, b):\n    return a + b\n"
    # Links: the web ones clickable (in a new tab, telling nobody where from); an image is a
    # link to it, never loaded; javascript: and data: links are their text, not links.
    expect(answer.get_by_role("link")).to_have_text(["guide", "a pixel"])
    guide = answer.get_by_role("link", name="guide")
    expect(guide).to_have_attribute("href", "https://example.com/guide")
    expect(guide).to_have_attribute("rel", "noopener noreferrer")
    expect(guide).to_have_attribute("target", "_blank")
    expect(answer).to_contain_text("Then click me or here.")
    # HTML in the text is shown as the characters it is.
    expect(answer).to_contain_text("<script>window.__pwned=1</script>")
    expect(answer).to_contain_text('<a href="javascript:window.__pwned=1">a</a>')
    assert_links_are_web_links(page)
    assert_fits(page, answer.locator("pre"))
    shoot(page, artifacts, f"chat-{width_of(page)}", "1-markdown", full=False)

    # A sub-agent's words are markdown too: the Reporter's list, once its line is opened.
    reporter = page.get_by_role("region", name="Agent Reporter: report")
    reporter.get_by_role("button", name=re.compile("^Reporter worked")).click()
    words = reporter.locator(".agent-text")
    expect(words.get_by_role("listitem")).to_have_count(2)
    expect(words.locator("em")).to_have_text("findings")
    expect(words.get_by_role("link")).to_have_attribute("href", "https://example.com/report")
    assert_links_are_web_links(page)


def test_markup_in_every_slot_is_inert(server: Server, page: Page) -> None:
    page.goto(server.url)
    send(page, "hostile")
    expect(page.get_by_role("article")).to_have_count(2)
    page.get_by_role("article", name="Follow the link?").get_by_role(
        "button", name="Decline", exact=True
    ).click()
    card = page.locator('article[data-kind="text"]')
    card.get_by_label("Your answer").fill("<b>x</b> [y](javascript:window.__pwned=1)")
    card.get_by_role("button", name="Send answer").click()
    expect(page.get_by_role("status")).to_have_text("Done")
    # The Echo's query labels its node, its answer is its words, and both reach the final
    # answer: all of it text, whichever slot it is in.
    echo = page.locator('section.agent[data-agent="Echo"]')
    expect(echo.locator(".agent-call")).to_contain_text("say <img src=x onerror=")
    expect(echo.locator(".agent-text")).to_contain_text("<iframe src=javascript:1></iframe>")
    expect(final_text(page)).to_contain_text("Echo: <img src=x")
    expect(final_text(page)).to_contain_text("<b>x</b> y")
    assert_links_are_web_links(page)


def composer_and_answer_in_view(page: Page) -> None:
    """The composer wholly in view, and the newest answer's end above it."""
    assert_fits(
        page, page.get_by_label("Message"), page.get_by_role("button", name="Send", exact=True)
    )
    expect(final_text(page)).to_be_in_viewport()
    end = final_text(page).evaluate("e => e.getBoundingClientRect().bottom")
    top = page.evaluate("document.getElementById('composer')?.getBoundingClientRect().top")
    assert end <= top + 1, (end, top)


def to_the_top(page: Page) -> None:
    """Scrolls up with the mouse wheel, as far as it goes."""
    page.mouse.wheel(0, -100_000)
    page.wait_for_function("() => scrollY === 0")


def test_the_page_follows_the_conversation_and_keeps_the_composer_in_view(
    server: Server, page: Page, artifacts: Path
) -> None:
    width = width_of(page)
    page.goto(server.url)
    inbox = page.locator("aside.inbox")
    if width == "phone":  # no empty box over the conversation
        expect(inbox).to_be_hidden()
    for turn in range(5):
        send(page, "markdown")
        expect(page.get_by_role("note", name="You")).to_have_count(turn + 1)
        expect(page.get_by_role("status")).to_have_text("Done")
    composer_and_answer_in_view(page)
    shoot(page, artifacts, f"chat-{width}", "2-five-turns", full=False)

    send(page, "plan")  # two questions wait
    expect(page.get_by_role("article")).to_have_count(2)
    first = page.get_by_role("article").first
    assert_fits(page, page.get_by_label("Message"), first)
    shoot(page, artifacts, f"chat-{width}", "3-two-questions", full=False)

    # The reader scrolls up: the page leaves them there, and says where the questions are.
    page.mouse.move(10, 300)
    to_the_top(page)
    expect(page.get_by_label("Message")).to_be_in_viewport(ratio=1)
    hint = page.get_by_role("button", name="2 questions waiting")
    if width == "phone":
        expect(hint).to_be_visible()
        shoot(page, artifacts, f"chat-{width}", "4-scrolled-up", full=False)
        hint.click()
        assert_fits(page, first)
        assert first.evaluate("e => e.contains(document.activeElement)")
        expect(hint).to_be_hidden()
    else:  # the questions stay in sight in their column
        expect(hint).to_be_hidden()
        assert_fits(page, first)
    # New content while the reader is up (answered from the keyboard, where the focus was
    # left): they stay where they are; a pill offers the way down.
    page.get_by_role("article", name="Which database?").get_by_role("button", name="sqlite").focus()
    to_the_top(page)
    page.keyboard.press("Enter")
    pill = page.get_by_role("button", name="New messages")
    expect(pill).to_be_visible()
    expect(page.get_by_role("article")).to_have_count(1)
    assert page.evaluate("scrollY") == 0
    expect(pill).to_be_in_viewport(ratio=1)
    shoot(page, artifacts, f"chat-{width}", "5-new-messages", full=False)
    pill.click()
    expect(pill).to_be_hidden()
    expect(page.locator('[data-agent="Specialist"] .agent-text')).to_have_text("use sqlite")
    # At the bottom again: what comes next is followed.
    region = page.get_by_role("article", name="Which region?")
    region.get_by_label("Your answer").fill("eu-west")
    region.get_by_role("button", name="Send answer").click()
    page.get_by_role("article", name=re.compile("delete_file")).get_by_role(
        "button", name="Approve once"
    ).click()
    expect(final_text(page)).to_have_text(
        "Final answer: manager: use sqlite | eu-west | deleted /tmp/old-plan.txt"
    )
    composer_and_answer_in_view(page)
    expect(pill).to_be_hidden()
    if width == "phone":  # the questions are answered: their box is gone again
        expect(inbox).to_be_hidden()


def test_a_finished_sub_agent_is_one_line_and_the_page_shows_who_works(
    server: Server, page: Page, artifacts: Path
) -> None:
    page.goto(server.url)
    send(page, "markdown")
    expect(page.get_by_role("status")).to_have_text("Done")
    reporter = page.get_by_role("region", name="Agent Reporter: report")
    fold = reporter.get_by_role("button", name=re.compile(r"^Reporter worked \d+ s$"))
    expect(fold).to_have_attribute("aria-expanded", "false")
    expect(reporter.locator(".agent-text")).to_be_hidden()
    box = reporter.bounding_box()
    assert box is not None and box["height"] < 48, box  # one line
    # From the keyboard: the line is a button that opens and folds the agent.
    fold.focus()
    page.keyboard.press("Enter")
    expect(fold).to_have_attribute("aria-expanded", "true")
    expect(reporter.locator(".agent-text")).to_be_visible()
    page.keyboard.press("Space")
    expect(reporter.locator(".agent-text")).to_be_hidden()

    # While agents work: the status names the one at work, with dots; the served agent's turn
    # shows a typing indicator. (The run is a canned AG-UI stream whose follow-up never ends.)
    stream = "".join(
        f"id: {i}\ndata: {event}\n\n"
        for i, event in enumerate(
            [
                '{"type":"RUN_STARTED","threadId":"t","runId":"r"}',
                '{"type":"TOOL_CALL_START","toolCallId":"c1","toolCallName":"Coder"}',
                '{"type":"SUBAGENT_STARTED","subagentRunId":"inv_1","name":"Coder",'
                '"parentToolCallId":"c1","description":"build it","timestamp":1}',
            ]
        )
    )
    held: list[Route] = []
    page.route(
        "**/agent",
        lambda route: route.fulfill(
            status=200, headers={"Content-Type": "text/event-stream"}, body=stream
        ),
    )
    page.route("**/threads/*/events*", lambda route: held.append(route))  # held open
    send(page, "build")
    status = page.get_by_role("status")
    expect(status).to_have_text("Coder is working")
    expect(status).to_have_attribute("data-busy", "true")
    turn = page.locator(".root-agent").last
    assert (
        turn.evaluate("e => getComputedStyle(e.querySelector('.agent-body'), '::after').content")
        != "none"
    )
    shoot(page, artifacts, f"chat-{width_of(page)}", "6-working", full=False)
    for route in held:
        route.abort()


def test_an_empty_conversation_welcomes_with_the_agents_suggestions(
    example: Server, page: Page, artifacts: Path
) -> None:
    width = width_of(page)
    page.goto(example.url)
    welcome = page.get_by_role("region", name="Orchestrator", exact=True)
    expect(welcome.get_by_role("heading", level=2)).to_have_text("Orchestrator")
    expect(welcome).to_contain_text("Hands the task to the Coder and reports what was built.")
    chips = welcome.get_by_role("group", name="Suggested prompts").get_by_role("button")
    expect(chips).to_have_text(["Build a todo API", "Build a blog with comments"])
    assert_fits(page, *chips.all())
    # The header's description: one line on a phone, opened by a button; whole on a laptop.
    more = page.locator("#more-description")
    description = page.locator("#agent-description")
    if width == "phone":
        expect(more).to_have_attribute("aria-expanded", "false")
        folded = description.bounding_box()
        expect(more).to_have_text("More")
        more.click()
        expect(more).to_have_attribute("aria-expanded", "true")
        expect(more).to_have_text("Less")
        opened = description.bounding_box()
        assert folded and opened and opened["height"] > folded["height"] * 1.5, (folded, opened)
        assert description.evaluate("e => e.scrollWidth <= e.clientWidth")
    else:
        expect(more).to_be_hidden()
        assert description.evaluate("e => e.scrollWidth <= e.clientWidth")
    shoot(page, artifacts, f"chat-{width}", "0-welcome", full=False)

    # A suggestion is sent as it is, from the keyboard too; the welcome gives way.
    chips.first.focus()
    page.keyboard.press("Enter")
    expect(page.get_by_role("note", name="You")).to_have_text(re.compile("Build a todo API$"))
    expect(welcome).to_be_hidden()
    expect(
        page.get_by_role("article", name='Which web framework for "Build a todo API"?')
    ).to_be_visible()
    # A new conversation welcomes again.
    page.locator("header.top").get_by_role("button", name="New conversation").click()
    expect(welcome).to_be_visible()
    expect(page.get_by_role("note", name="You")).to_have_count(0)


def test_a_reload_shows_the_conversation_not_the_welcome(example: Server, page: Page) -> None:
    page.goto(example.url)
    welcome: Locator = page.locator("#welcome")
    expect(welcome).to_be_visible()
    send(page, "Build a blog")
    page.get_by_role("button", name="Express").click()
    page.get_by_role("button", name="Approve once").click()
    expect(page.get_by_role("status")).to_have_text("Done")
    page.reload()
    expect(final_text(page)).to_have_text("Done. Built it with Express and wrote app.js.")
    expect(welcome).to_be_hidden()
    composer_and_answer_in_view(page)
