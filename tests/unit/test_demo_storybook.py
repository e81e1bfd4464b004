"""The demo's bundled Storybook builds: a baseline and a branch whose stories differ as the
demo promises (scripts/demo_storybook/README.md), shipped with the package."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from child.storybook.parameters import plan_snapshots
from ipc.storybook_index import read_index_file
from supervisor.commands.demo import STORYBOOKS as BUILDS

ROOT = Path(__file__).resolve().parents[2]
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


def files_under(folder: Path) -> set[Path]:
    return {path.relative_to(folder) for path in folder.rglob("*") if path.is_file()}


def test_a_built_package_ships_both_builds_whole(tmp_path: Path) -> None:
    """A non-editable install has only the files setuptools copies: its `build_py`, what a
    wheel holds, run on a copy of the sources (nothing written in the checkout)."""
    source = tmp_path / "source"
    for name in ("supervisor", "child", "ipc"):
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    built = tmp_path / "built"
    command = ["-c", "import setuptools; setuptools.setup()", "-q", "build_py", "--build-lib"]
    done = subprocess.run(
        [sys.executable, *command, str(built)],
        cwd=source, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    shipped = built / BUILDS.resolve().relative_to(ROOT)
    assert files_under(BUILDS), "the builds are where the demo reads them"
    assert files_under(shipped) == files_under(BUILDS)
