"""A branch's `latest` page in the real Chromium: opened from disk (`file://`) and from a folder
served by a static web server, it is taken for a page and sends the browser on to the branch's
newest report, which renders (an extension-less page was shown as its source, as text).

Debian's Chromium is driven by Playwright as people's browsers open reports: not the child's
browser, whose network holds only a build's own server (`child.browser.network`).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from playwright.sync_api import Browser
from sqlalchemy import Engine

from ipc.publish import latest_pointer
from supervisor.db.connection import connect
from supervisor.db.migrate import upgrade
from tests.capture_helpers import run_build, screens

BUTTON = ((4, 4, 20, 10),)


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder store with two builds of `feature/login` published."""
    folder = tmp_path_factory.mktemp("latest-page")
    engine: Engine = connect(f"sqlite:///{folder / 'storyshelf.db'}")
    upgrade(engine)
    try:
        for _ in range(2):
            run_build(
                engine,
                folder / "artifacts",
                screens(folder / "shots", button=BUTTON),
                branch="feature/login",
            )
    finally:
        engine.dispose()
    return folder / "artifacts"


@pytest.fixture(scope="module")
def served(artifacts: Path) -> Iterator[str]:
    """The artifacts folder over HTTP, as any static web server serves it."""

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Quiet, directory=str(artifacts))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def lands_on_the_report(person_browser: Browser, url: str) -> None:
    context = person_browser.new_context()
    try:
        page = context.new_page()
        page.goto(url)
        page.wait_for_url("**/2/index.html", timeout=15_000)
        page.wait_for_selector(".snapshot", timeout=15_000)
        assert page.locator("h1").count() >= 1
        assert "<!doctype" not in page.inner_text("body").lower()
    finally:
        context.close()


def test_the_latest_page_opens_the_newest_report_from_disk(
    artifacts: Path, person_browser: Browser
) -> None:
    pointer = artifacts / latest_pointer("web", "feature/login")
    assert pointer.name == "login.html"
    lands_on_the_report(person_browser, pointer.as_uri())


def test_the_latest_page_opens_the_newest_report_over_http(
    served: str, person_browser: Browser
) -> None:
    lands_on_the_report(person_browser, f"{served}/{latest_pointer('web', 'feature/login')}")
