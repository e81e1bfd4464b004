"""Review from the served report, end to end in Debian's Chromium (Playwright), on real builds.

A branch build with changes is served by `python -m supervisor serve`; the test reviews it as a
person does (clicks, keys, the reviewer's form) and checks the page redraws in place, the
database holds the decisions, `build --wait`'s exit changes with the build's review state, and
the branch's next build of the same screenshots is all `unchanged` (the accepted snapshots are
the branch's baselines). A wrong token changes nothing. Opened from disk, or from a server
without a token, the report shows the `review` commands instead of buttons.

The browser is Debian's Chromium as a person's (`--no-sandbox` as root), not the child's, whose
network holds only a build's own server (`child.browser.network`).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from playwright.sync_api import Browser, ConsoleMessage, Locator, Page, expect
from sqlalchemy import select

from supervisor.db.tables import builds
from tests.hosts import ROOT
from tests.serve.conftest import (
    CHANGED,
    NEW,
    TOKEN,
    Reviewable,
    Served,
    demo_folder,
    drain,
    enqueue,
    review_facts,
)

#: How long the page may take to show what it was asked for, in milliseconds.
SHOWN_MS = 10_000


@dataclass
class Opened:
    """A report in a fresh page, with what it asked for and what went wrong."""

    page: Page
    requests: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def snapshot(self, name: str) -> Locator:
        return self.page.locator(f'.snapshot[data-name="{name}"]')

    def decision(self, name: str) -> Locator:
        return self.snapshot(name).locator("[data-decision]")


#: Opens a URL in a fresh page (the `open_report` fixture).
OpenReport = Callable[[str], Opened]


@pytest.fixture
def open_report(person_browser: Browser) -> Iterator[OpenReport]:
    """Opens a URL in a fresh context; on teardown, no page error, and no console error but
    the refusals a test provokes."""
    contexts = []
    opened_pages: list[Opened] = []

    def open_(url: str) -> Opened:
        context = person_browser.new_context(viewport={"width": 1280, "height": 800})
        contexts.append(context)
        page = context.new_page()
        opened = Opened(page)

        def console(message: ConsoleMessage) -> None:
            if message.type in ("error", "warning"):
                opened.problems.append(f"console {message.type}: {message.text}")

        page.on("console", console)
        page.on("pageerror", lambda error: opened.problems.append(f"page error: {error}"))
        page.on("request", lambda request: opened.requests.append(request.url))
        page.goto(url)
        page.wait_for_load_state("load")
        opened_pages.append(opened)
        return opened

    yield open_
    for context in contexts:
        context.close()
    for opened in opened_pages:
        unexpected = [p for p in opened.problems if "status of 403" not in p]
        assert unexpected == []


def build_exit(reviewable: Reviewable, build_id: int) -> int:
    """`python -m supervisor build ID --wait`'s exit status."""
    return subprocess.run(
        [
            sys.executable, "-m", "supervisor", "build", str(build_id), "--wait",
            "--timeout", "60", "--database-url", reviewable.database_url,
            "--artifacts", reviewable.artifacts,
        ],
        cwd=ROOT, capture_output=True, timeout=90, check=False,
    ).returncode  # fmt: skip


def served_report(served: Served, build_id: int) -> str:
    return f"{served.url}/builds/{build_id}/report"


def sign_in(opened: Opened, where: Locator, token: str = TOKEN) -> None:
    """Fill the reviewer's form, shown in `where` at the first decision."""
    form = where.locator("form.reviewer")
    expect(form).to_be_visible(timeout=SHOWN_MS)
    form.locator('input[name="by"]').fill("ann")
    form.locator('input[name="token"]').fill(token)
    form.locator('button[type="submit"]').click()


def test_accept_one_then_all_in_the_served_report_opens_the_gate_and_moves_the_branch(
    reviewable: Reviewable, writable: Served, open_report: OpenReport
) -> None:
    build_id = reviewable.take()
    branch = reviewable.branch_of(build_id)
    assert build_exit(reviewable, build_id) == 1
    opened = open_report(served_report(writable, build_id))
    page = opened.page
    state = page.locator("[data-review-state]")
    expect(state).to_have_text("review pending", timeout=SHOWN_MS)
    expect(page.locator(".review-buttons").first).to_be_visible(timeout=SHOWN_MS)
    expect(page.locator(".review-commands").first).to_be_hidden()
    page.evaluate("window.notReloaded = true")

    primary = opened.snapshot("button/primary")
    primary.locator('[data-decide="accept"]').click()
    sign_in(opened, primary)
    expect(opened.decision("button/primary")).to_have_text("accepted", timeout=SHOWN_MS)
    expect(primary.locator(".review-message")).to_contain_text("Accepted button/primary, as ann")
    expect(state).to_have_text("review pending")
    assert review_facts(reviewable.database_url, build_id)["decisions"] == 1

    page.locator("button.accept-all").click()  # the reviewer is remembered: no form again
    expect(state).to_have_text("review accepted", timeout=SHOWN_MS)
    expect(page.locator("form.reviewer")).to_be_hidden()
    for section in page.locator(".snapshot[data-name]").all():
        expect(section.locator("[data-decision]")).to_have_text("accepted")
    assert page.evaluate("window.notReloaded") is True
    facts = review_facts(reviewable.database_url, build_id)
    assert facts == {
        "review": "accepted",
        "decisions": 1 + CHANGED + NEW,
        "branch_baselines": CHANGED + NEW,
    }

    # The gate opens, and the branch's next build of the same screenshots changes nothing.
    following = enqueue(
        reviewable.database_url,
        reviewable.artifacts,
        demo_folder(reviewable.workdir, "branch"),
        branch,
    )
    drain(reviewable.database_url, reviewable.artifacts, reviewable.workdir)
    assert build_exit(reviewable, build_id) == 0
    engine = reviewable.engine()
    with engine.connect() as conn:
        row = conn.execute(select(builds).where(builds.c.id == following)).one()._mapping
    engine.dispose()
    assert (row["status"], row["unchanged"], row["changed"], row["new"]) == (
        "passed",
        8 + NEW,
        0,
        0,
    )
    # The report published again after the review shows it, on disk too.
    republished = Path(reviewable.artifacts) / "reports" / "web" / str(build_id) / "index.html"
    assert 'data-review-state="accepted"' in republished.read_text()


def test_keys_a_and_x_decide_on_the_current_snapshot(
    reviewable: Reviewable, writable: Served, open_report: OpenReport
) -> None:
    build_id = reviewable.take()
    opened = open_report(served_report(writable, build_id))
    page = opened.page
    expect(page.locator(".review-keys")).to_be_visible(timeout=SHOWN_MS)
    page.keyboard.press("j")  # the first changed snapshot: button/primary
    page.keyboard.press("x")
    sign_in(opened, opened.snapshot("button/primary"))
    expect(opened.decision("button/primary")).to_have_text("rejected", timeout=SHOWN_MS)
    expect(page.locator("[data-review-state]")).to_have_text("review rejected")
    page.keyboard.press("j")  # card/list
    page.keyboard.press("a")
    expect(opened.decision("card/list")).to_have_text("accepted", timeout=SHOWN_MS)
    facts = review_facts(reviewable.database_url, build_id)
    assert facts == {"review": "rejected", "decisions": 2, "branch_baselines": 1}


def test_a_wrong_token_changes_nothing_on_the_page_or_in_the_database(
    reviewable: Reviewable, writable: Served, open_report: OpenReport
) -> None:
    build_id = reviewable.take()
    before = review_facts(reviewable.database_url, build_id)
    opened = open_report(served_report(writable, build_id))
    page = opened.page
    card = opened.snapshot("card/list")
    expect(card.locator('[data-decide="accept"]')).to_be_visible(timeout=SHOWN_MS)
    card.locator('[data-decide="accept"]').click()
    sign_in(opened, card, token="not-the-token")
    message = card.locator(".review-message")
    expect(message).to_contain_text("the review token is not this server's", timeout=SHOWN_MS)
    expect(message).to_contain_text("403")
    expect(page.locator("[data-review-state]")).to_have_text("review pending")
    for section in page.locator(".snapshot[data-name]").all():
        expect(section.locator("[data-decision]")).to_be_hidden()
    assert review_facts(reviewable.database_url, build_id) == before
    # The token was forgotten: the next decision asks for it again.
    card.locator('[data-decide="accept"]').click()
    expect(card.locator("form.reviewer")).to_be_visible(timeout=SHOWN_MS)


def test_a_read_only_server_shows_the_commands_and_says_so(
    reviewable: Reviewable, read_only: Served, open_report: OpenReport
) -> None:
    build_id = reviewable.branch_builds[-1]
    opened = open_report(served_report(read_only, build_id))
    page = opened.page
    expect(page.locator(".review-read-only")).to_be_visible(timeout=SHOWN_MS)
    expect(page.locator(".review-buttons").first).to_be_hidden()
    expect(page.locator(".review-actions")).to_be_hidden()
    expect(page.locator(".review-commands").first).to_be_visible()


def test_the_report_from_disk_shows_the_review_commands_and_fetches_nothing(
    reviewable: Reviewable, open_report: OpenReport
) -> None:
    build_id = reviewable.branch_builds[-1]
    report = Path(reviewable.artifacts) / "reports" / "web" / str(build_id) / "index.html"
    opened = open_report(report.as_uri())
    page = opened.page
    build = page.locator(".review-build .review-commands code")
    expect(build).to_have_text(
        [
            f"storyshelf review {build_id} --accept --by <you>",
            f"storyshelf review {build_id} --reject --by <you>",
        ]
    )
    expect(opened.snapshot("button/primary").locator(".review-commands code").first).to_have_text(
        f"storyshelf review {build_id} --accept --snapshot button/primary --by <you>"
    )
    expect(page.locator(".review-buttons").first).to_be_hidden()
    expect(page.locator(".review-read-only")).to_be_hidden()
    page.keyboard.press("j")
    page.keyboard.press("a")  # no server: nothing to decide with
    expect(page.locator("form.reviewer")).to_be_hidden()
    assert all(url.startswith("file:") for url in opened.requests)
