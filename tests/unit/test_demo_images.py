"""The promises of `supervisor.commands.demo_images`: fast, deterministic, realistic differences."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyvips

from supervisor.commands.demo_images import BRANCH_STORIES, render_story, write_demo_images

CHANGED = {"button/primary", "form/login", "typography/paragraph", "card/list"}


def test_the_branch_changes_some_stories_keeps_others_and_adds_one(tmp_path: Path) -> None:
    baseline = write_demo_images(tmp_path / "baseline", "baseline")
    branch = write_demo_images(tmp_path / "branch", "branch")
    assert len(baseline) == 8
    names = {p.relative_to(tmp_path / "branch").with_suffix("").as_posix() for p in branch}
    assert names - {
        p.relative_to(tmp_path / "baseline").with_suffix("").as_posix() for p in baseline
    } == {"badge/status"}
    for path in baseline:
        name = path.relative_to(tmp_path / "baseline").with_suffix("").as_posix()
        same = path.read_bytes() == (tmp_path / "branch" / f"{name}.png").read_bytes()
        assert same is (name not in CHANGED), name


def test_images_are_deterministic_valid_pngs_of_screenshot_size() -> None:
    for name in BRANCH_STORIES:
        data = render_story(name, "branch")
        assert data == render_story(name, "branch")
        image = pyvips.Image.new_from_buffer(data, "", fail_on="error")
        assert (image.width, image.height, image.bands) == (800, 600, 3)
        assert image.avg() > 0


def test_the_parent_side_modules_never_load_libvips() -> None:
    modules = "supervisor.commands.main, supervisor.commands.demo_images, supervisor.builds.capture, supervisor.builds.reduce"
    check = f"import sys, {modules}; sys.exit('pyvips' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", check], check=False).returncode == 0
