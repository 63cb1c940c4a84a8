"""The page as a product, at a phone's width and a desktop's, serving the documented example.

Headless Debian Chromium (Playwright) against a real ``hpd-agent serve
examples/served_agent.py:agent`` subprocess on 127.0.0.1: the Orchestrator's Coder asks its
Clarifier, whose question (depth 2, with options) comes first, then a permission for
``write_file``. Each step is checked for what a person reads (the agent's real name, labels by
kind, a permission titled by its tool with its arguments listed once, a sub-agent's answer
once, technical details folded, no thread id in the header) and for layout (no horizontal
overflow; the card and its buttons inside the viewport).

Screenshots of every step are written as PNG files to ``$HPD_TEST_ARTIFACTS/web-page/``
(when the variable is set), else to the test's ``tmp_path``: ``<width>-<step>.png``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser_server import VIEWPORTS, Server, assert_fits, shoot  # first: skips without a browser
from playwright.sync_api import Browser, Page, expect

AGENT = "examples/served_agent.py:agent"
TASK = "Build a todo API"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = Server(tmp_path_factory.mktemp("web") / "store.db", agent=AGENT)
    yield srv
    srv.stop()


def transcript_count(page: Page, text: str) -> int:
    return page.locator("#transcript").get_by_text(text, exact=True).count()


@pytest.mark.parametrize("width", sorted(VIEWPORTS))
def test_the_page_reads_as_a_product_at_phone_and_desktop_widths(
    server: Server, browser: Browser, artifacts: Path, width: str
) -> None:
    w, h = VIEWPORTS[width]
    context = browser.new_context(viewport={"width": w, "height": h})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(server.url)

    # The header names the served agent; the thread id is folded away below, not in it.
    header = page.locator("header.top")
    expect(header.get_by_role("heading", level=1)).to_have_text("Orchestrator")
    expect(header).to_contain_text("Hands the task to the Coder")
    thread = page.evaluate("new URLSearchParams(location.hash.slice(1)).get('thread')")
    assert thread and thread not in header.inner_text()
    details = page.locator("details.conversation-details")
    expect(details).to_contain_text(thread)
    expect(details).not_to_have_attribute("open", re.compile(".*"))
    expect(page.get_by_text(thread)).to_be_hidden()

    page.get_by_label("Message").fill(TASK)
    page.get_by_role("button", name="Send", exact=True).click()

    # The depth-2 question: a choice, asked by Orchestrator > Coder > Clarifier.
    card = page.get_by_role("article", name=f'Which web framework for "{TASK}"?')
    expect(card.locator(".kind")).to_have_text("Choose one")
    expect(card.locator(".agent-path")).to_have_text("Orchestrator > Coder > Clarifier")
    options = card.get_by_role("group", name="Options").get_by_role("button")
    expect(options).to_have_text(["FastAPI", "Express", "Django"])
    # The way out, quieter than the answers: a text button without their filled background.
    decline = card.get_by_role("button", name="Decline to answer")
    assert decline.evaluate("b => getComputedStyle(b).backgroundColor") == "rgba(0, 0, 0, 0)"
    expect(page.get_by_role("region", name="Agent Orchestrator")).to_be_visible()
    expect(page.get_by_text("Assistant", exact=True)).to_have_count(0)
    expect(page.get_by_text("free text", exact=False)).to_have_count(0)
    assert_fits(page, card, *options.all(), decline)
    shoot(page, artifacts, width, "1-question")
    card.get_by_role("button", name="Express").click()

    # The permission: titled by its tool, its arguments once, as name: value lines.
    permission = page.get_by_role("article", name="Allow write_file?")
    expect(permission.locator(".kind")).to_have_text("Permission")
    expect(permission.locator(".agent-path")).to_have_text("Orchestrator > Coder")
    args = permission.get_by_label("Arguments of write_file")
    expect(args.locator("dt")).to_have_text(["path", "content"])
    expect(args.locator("dd").first).to_have_text("app.js")
    assert permission.inner_text().count("app.js") == 1
    assert "{" not in permission.locator("h3").inner_text()
    buttons = [
        permission.get_by_role("button", name="Approve once"),
        permission.get_by_role("button", name="Approve for this run"),
        permission.get_by_role("button", name="Always approve"),  # a remembered grant
        permission.get_by_role("button", name="Deny"),
    ]
    assert_fits(page, permission, *buttons)
    # The long value is cut to one line that opens to the whole text.
    long_value = args.locator("details.long-value")
    expect(long_value.locator("pre")).to_be_hidden()
    long_value.locator("summary").click()
    expect(long_value.locator("pre")).to_have_text(re.compile("built with Express"))
    assert_fits(page, permission)
    shoot(page, artifacts, width, "2-permission")
    buttons[0].click()

    expect(page.get_by_role("status")).to_have_text("Done")
    # Each sub-agent's answer once: as its own words, not again as a tool result.
    expect(page.locator(".root-agent > .agent-body > .agent-text")).to_have_text(
        "Done. Built it with Express and wrote app.js."
    )
    assert transcript_count(page, "The user chose Express.") == 1
    assert transcript_count(page, "Built it with Express and wrote app.js.") == 1
    # Tool calls are one line each; their arguments, results and ids folded until opened.
    tools = page.locator("#transcript details.tool-details")
    expect(tools).to_have_count(2)  # ask_user and write_file; the agent calls are nodes
    for tool in tools.all():
        expect(tool).not_to_have_attribute("open", re.compile(".*"))
    # A finished sub-agent is one line (who, how long, how many tools) that opens on a click.
    coder = page.get_by_role("region", name="Agent Coder: Build a todo API")
    fold = coder.get_by_role("button", name=re.compile(r"^Coder worked \d+ s · 2 tools$"))
    expect(fold).to_have_attribute("aria-expanded", "false")
    expect(coder.locator(":scope > .agent-body")).to_be_hidden()
    shoot(page, artifacts, width, "3-done")
    fold.click()
    expect(fold).to_have_attribute("aria-expanded", "true")
    write = page.locator('#transcript [data-tool="write_file"]')
    expect(write.locator("summary.tool-head")).to_contain_text("wrote app.js (2 lines)")
    expect(write.get_by_label("Arguments of write_file")).to_be_hidden()
    write.locator("summary.tool-head").click()
    expect(write.get_by_label("Arguments of write_file").locator("dd").first).to_have_text("app.js")
    expect(write.locator(".tool-id")).to_contain_text("tc_")
    assert_fits(page)
    shoot(page, artifacts, width, "4-opened")

    # A reload rebuilds the same page from the server.
    page.reload()
    expect(page.get_by_role("region", name="Agent Orchestrator")).to_be_visible()
    expect(page.locator(".root-agent > .agent-body > .agent-text")).to_have_text(
        "Done. Built it with Express and wrote app.js."
    )
    assert transcript_count(page, "The user chose Express.") == 1
    assert_fits(page)
    context.close()
    assert errors == [], f"uncaught errors in the page: {errors}"
