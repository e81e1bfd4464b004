"""A build's page is kept from one capture job to the child's next of the same build
(`child.storybook.kept`): the next shard starts on a loaded preview instead of a fresh context.
Anything else gets a page of its own: another build, and the job after one that raised."""

from __future__ import annotations

from typing import Any

import pytest

from child.browser.launch import ChildBrowser
from child.storybook import capture, kept
from tests.browser.conftest import Stored, capture_payload, snapshot

STORIES = ("example-button--primary", "example-button--secondary")


class Cancelled(Exception):
    """What a job's progress raises when the host cancels it."""


def run(stored: Stored, build_id: int = 1, **changes: Any) -> dict[str, str]:
    payload = capture_payload(stored, [snapshot(story) for story in STORIES], **changes)
    payload["build_id"] = build_id
    results = capture.run(payload, lambda _: None)["snapshots"]
    assert [r["status"] for r in results] == ["new", "new"], results
    return {r["name"]: r["sha256"] for r in results}


def kept_page() -> Any:
    assert kept._kept is not None
    return kept._kept.renderer.page


def test_the_next_shard_of_a_build_reuses_its_page_with_the_same_pixels(
    browser: ChildBrowser, stored: Stored
) -> None:
    kept.close()
    first = run(stored)
    page = kept_page()
    assert page is not None and not page.is_closed()
    assert run(stored) == first
    assert kept_page() is page


def test_another_build_gets_a_page_of_its_own_and_the_old_one_is_closed(
    browser: ChildBrowser, stored: Stored
) -> None:
    first = run(stored, build_id=1)
    page = kept_page()
    assert run(stored, build_id=2) == first
    assert page.is_closed()
    assert kept_page() is not page


def test_a_job_that_raised_keeps_nothing(browser: ChildBrowser, stored: Stored) -> None:
    run(stored)
    page = kept_page()

    def cancel(report: dict[str, Any]) -> None:
        if report.get("story_id"):
            raise Cancelled

    payload = capture_payload(stored, [snapshot(story) for story in STORIES])
    with pytest.raises(Cancelled):
        capture.run(payload, cancel)
    assert kept._kept is None and page.is_closed()
    run(stored)  # and the next job opens a page of its own
    assert kept_page() is not page
