"""The report's review markup (`child.report.review`): the state and decisions as published, and
the `review` commands a static page shows, shell-quoted and HTML-escaped whatever the name.

What the page does with it in a browser, served and from disk, is tested in
`test_review_in_browser.py`.
"""

from __future__ import annotations

import shlex
from datetime import UTC, datetime
from html.parser import HTMLParser

import pytest

from child.report.render import render_report
from child.report.review import review_command
from ipc.build_view import BuildView, SnapshotView

EVIL = 'it\'s <script>alert(1)</script> & "more" $(rm -rf ~)'


def snapshot(name: str, status: str, review: str | None = None) -> SnapshotView:
    return SnapshotView(
        id=1, name=name, status=status, image_path="images/ab/new.png", image_sha256="ab" * 32,
        width=10, height=10, baseline_id=None, baseline_image=None, baseline_build_id=None,
        metric=None, threshold=None, flat_threshold=None, count_aa=None, diff_pixels=None,
        diff_ratio=None, diff_path=None, diff_box=None,
        error="boom" if status == "failed" else None, review=review,
    )  # fmt: skip


def view(
    *snapshots: SnapshotView, status: str = "changed", review: str | None = "pending"
) -> BuildView:
    counts = {
        s: sum(1 for x in snapshots if x.status == s)
        for s in ("new", "unchanged", "changed", "failed")
    }
    return BuildView(
        id=7, project="web", branch="feature", commit=None, status=status, counts=counts,
        created_at=datetime(2026, 1, 2, tzinfo=UTC), finished_at=datetime(2026, 1, 2, 0, 1, tzinfo=UTC),
        report_url=None, error=None, snapshots=snapshots, review=review,
    )  # fmt: skip


class Page(HTMLParser):
    """The text of every `<code>` and the attributes of every tag, as a browser reads them."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.codes: list[str] = []
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self._code: list[str] | None = None
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag == "code":
            self._code = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "code" and self._code is not None:
            self.codes.append("".join(self._code))
            self._code = None

    def handle_data(self, data: str) -> None:
        if self._code is not None:
            self._code.append(data)

    def having(self, attribute: str) -> list[dict[str, str | None]]:
        return [attrs for _tag, attrs in self.tags if attribute in attrs]


def test_each_changed_or_new_snapshot_shows_its_commands_shell_quoted() -> None:
    page = Page(render_report(view(snapshot(EVIL, "changed"), snapshot("plain/name", "new"))))
    for name in (EVIL, "plain/name"):
        for verb in ("accept", "reject"):
            command = f"storyshelf review 7 --{verb} --snapshot {shlex.quote(name)} --by <you>"
            assert command in page.codes
            assert shlex.split(command)[5] == name  # a shell gives the command the name as it is
    assert "storyshelf review 7 --accept --by <you>" in page.codes
    assert "storyshelf review 7 --reject --by <you>" in page.codes
    assert [attrs["data-name"] for attrs in page.having("data-name")] == [EVIL, "plain/name"]


def test_no_name_can_inject_markup_through_the_review_markup() -> None:
    html = render_report(view(snapshot(EVIL, "changed")))
    assert "<script>alert(1)</script>" not in html
    assert html.count("<script>") == 1  # the page's own


def test_the_state_and_decisions_are_shown_as_published() -> None:
    page = Page(
        render_report(
            view(snapshot("a", "changed", "accepted"), snapshot("b", "new", None), review="pending")
        )
    )
    (state,) = page.having("data-review-state")
    assert state["data-review-state"] == "pending" and "hidden" not in state
    decisions = {
        attrs["data-decision"]: "hidden" in attrs for attrs in page.having("data-decision")
    }
    assert decisions == {"accepted": False, "": True}


@pytest.mark.parametrize(
    ("snapshots", "status"),
    [
        ((snapshot("a", "unchanged"), snapshot("b", "failed")), "failed"),
        ((snapshot("a", "changed"),), "cancelled"),
        ((snapshot("a", "changed"),), "capturing"),
    ],
)
def test_a_build_with_nothing_to_review_offers_no_review(
    snapshots: tuple[SnapshotView, ...], status: str
) -> None:
    html = render_report(view(*snapshots, status=status, review=None))
    page = Page(html)
    classes = {c for _tag, attrs in page.tags for c in (attrs.get("class") or "").split()}
    assert not classes & {"review-build", "review-keys", "review-snapshot", "review-commands"}
    assert page.having("data-name") == [] and page.having("data-decision") == []
    assert not any("supervisor review" in code for code in page.codes)


def test_unchanged_and_failed_snapshots_offer_no_review() -> None:
    page = Page(
        render_report(
            view(snapshot("c", "changed"), snapshot("u", "unchanged"), snapshot("f", "failed"))
        )
    )
    assert [attrs["data-name"] for attrs in page.having("data-name")] == ["c"]
    assert review_command(7, "accept", "u") not in page.codes
