"""The promises of `supervisor.builds.projects` and `python -m supervisor project`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ipc.diff_settings import DEFAULT_FLAT_THRESHOLD, DEFAULT_THRESHOLD
from tests.capture_helpers import run_cli


def project(database_url: str, capsys: pytest.CaptureFixture[str], *options: str) -> Any:
    code = run_cli(["project", f"--database-url={database_url}", "web", "--json", *options])
    captured = capsys.readouterr()
    return code, json.loads(captured.out) if code == 0 else captured.err


def test_showing_a_new_project_creates_it_with_the_defaults(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, settings = project(database_url, capsys)
    assert code == 0
    assert settings == {
        "id": 1,
        "name": "web",
        "baseline_branch": "main",
        "metric": "oklab",
        "threshold": DEFAULT_THRESHOLD,
        "count_aa": False,
        "budget_pixels": 0,
        "flat_threshold": DEFAULT_FLAT_THRESHOLD,
    }


def test_options_change_only_the_settings_named(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    project(database_url, capsys, "--metric=yiq", "--threshold=0.1", "--count-aa")
    code, settings = project(database_url, capsys, "--budget=25", "--baseline-branch=trunk")
    assert code == 0
    assert (settings["metric"], settings["threshold"], settings["count_aa"]) == ("yiq", 0.1, True)
    assert (settings["budget_pixels"], settings["baseline_branch"]) == (25, "trunk")
    _, settings = project(database_url, capsys, "--ignore-aa")
    assert settings["count_aa"] is False


def test_the_flat_area_pass_is_turned_off_and_on_again(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, settings = project(database_url, capsys, "--flat-threshold=off")
    assert (code, settings["flat_threshold"]) == (0, None)
    _, settings = project(database_url, capsys, "--threshold=0.2")
    assert (settings["flat_threshold"], settings["threshold"]) == (None, 0.2)
    _, settings = project(database_url, capsys, "--flat-threshold=0.03")
    assert settings["flat_threshold"] == 0.03
    assert run_cli(["project", f"--database-url={database_url}", "web"]) == 0
    assert "flat threshold   0.03 where both images are flat" in capsys.readouterr().out
    project(database_url, capsys, "--flat-threshold=off")
    assert run_cli(["project", f"--database-url={database_url}", "web"]) == 0
    assert "flat threshold   off" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("--threshold=1.5", "threshold must be between 0 and 1"),
        ("--budget=-1", "budget must be 0 or more pixels"),
        ("--flat-threshold=2", "flat threshold must be between 0 and 1 or off"),
        ("--baseline-branch= ", "the baseline branch must not be empty"),
    ],
)
def test_invalid_settings_are_refused_with_a_clear_message(
    database_url: str, capsys: pytest.CaptureFixture[str], option: str, message: str
) -> None:
    code, error = project(database_url, capsys, option)
    assert code == 1
    assert message in error


def test_the_readable_form_lists_every_setting(
    database_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(["project", f"--database-url={database_url}", "web"]) == 0
    out = capsys.readouterr().out
    for line in ("project          web", "metric           oklab", "anti-aliasing    ignored"):
        assert line in out
