"""The demo's bundled Storybook builds: a baseline and a branch whose stories differ as the
demo promises (scripts/demo_storybook/README.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from child.storybook.parameters import plan_snapshots
from ipc.storybook_index import read_index_file

BUILDS = Path(__file__).parents[2] / "supervisor" / "commands" / "demo_storybook"
SHARED = [
    "demo-alert--info",
    "demo-badge--statuses",
    "demo-button--primary",
    "demo-button--secondary",
    "demo-card--article",
    "demo-form-field--email",
]


@pytest.mark.parametrize(
    ("variant", "own"), [("main", "demo-toast--saved"), ("branch", "demo-button-group--actions")]
)
def test_each_build_has_the_shared_stories_and_its_own(variant: str, own: str) -> None:
    entries = read_index_file(BUILDS / variant)
    plan = plan_snapshots(entries, {}, {})
    assert [s["name"] for s in plan["snapshots"]] == sorted([*SHARED, own])
    assert (plan["skipped"], plan["docs"]) == ([], 0)


@pytest.mark.parametrize("variant", ["main", "branch"])
def test_a_build_holds_no_file_that_differs_on_every_rebuild(variant: str) -> None:
    assert (BUILDS / variant / "iframe.html").is_file()
    assert not (BUILDS / variant / "project.json").exists()


def test_the_two_builds_share_storybook_s_own_code() -> None:
    vendor = "vite-inject-mocker-entry.js"
    assert (BUILDS / "main" / vendor).read_bytes() == (BUILDS / "branch" / vendor).read_bytes()
