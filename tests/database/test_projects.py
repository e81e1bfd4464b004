"""The promises of `supervisor.builds.projects`, `supervisor.builds.webhooks` and
`python -m supervisor project`."""

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
        "unstable_fails": True,
        "webhook_allow_private": False,
        "auto_accept": True,
        "webhooks": [],
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
    _, settings = project(database_url, capsys, "--unstable-passes")
    assert (settings["unstable_fails"], settings["count_aa"]) == (False, False)
    _, settings = project(database_url, capsys, "--unstable-fails")
    assert settings["unstable_fails"] is True


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


def test_webhooks_are_added_with_their_secret_shown_masked_and_removed(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, settings = project(
        database_url,
        capsys,
        "--webhook=https://ci.example.com/hooks/storyshelf",
        "--webhook=http://user:pa55@10.0.0.5:8080/built",
        "--webhook-secret=s3cret",
        "--webhook-allow-private",
    )
    assert code == 0
    shown = [(hook["id"], hook["url"], hook["secret"]) for hook in settings["webhooks"]]
    assert shown == [
        (1, "https://ci.example.com/hooks/storyshelf", "****"),
        (2, "http://user:****@10.0.0.5:8080/built", "****"),
    ]
    # Added again without a secret: kept once, its secret kept; a third one unsigned.
    _, settings = project(
        database_url,
        capsys,
        "--webhook=https://ci.example.com/hooks/storyshelf",
        "--webhook=https://chat.example.com/in",
    )
    assert [hook["secret"] for hook in settings["webhooks"]] == ["****", "****", None]
    assert run_cli(["project", f"--database-url={database_url}", "web"]) == 0
    out = capsys.readouterr().out
    assert "webhooks         https://ci.example.com/hooks/storyshelf (signed, secret ****)" in out
    assert "                 https://chat.example.com/in (unsigned)" in out
    assert "s3cret" not in out and "pa55" not in out
    _, settings = project(database_url, capsys, "--no-webhook=https://chat.example.com/in")
    assert [hook["id"] for hook in settings["webhooks"]] == [1, 2]
    _, settings = project(
        database_url, capsys, "--clear-webhooks", "--webhook=https://new.example.com/"
    )
    assert [hook["url"] for hook in settings["webhooks"]] == ["https://new.example.com/"]
    assert run_cli(["project", f"--database-url={database_url}", "web", "--clear-webhooks"]) == 0
    assert "webhooks         none" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("ftp://example.com/hook", "it must start with http:// or https://"),
        ("example.com/hook", "it must start with http:// or https://"),
        ("https:///hook", "it has no host"),
        ("http://example.com:99999/", "its port is not a number from 0 to 65535"),
        ("http://example.com/a b", "it holds a space or a control character"),
    ],
)
def test_a_bad_webhook_url_is_one_line_and_exit_2(
    database_url: str, capsys: pytest.CaptureFixture[str], url: str, why: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        run_cli(["project", f"--database-url={database_url}", "web", "--webhook", url])
    err = capsys.readouterr().err
    assert exited.value.code == 2
    assert err == (f"storyshelf project: argument --webhook: {url!r} is not a webhook URL: {why}\n")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--no-webhook=https://nowhere.example.com/"], "the project has no webhook"),
        (["--webhook-secret=s"], "--webhook-secret signs the webhooks given with --webhook"),
        (["--webhook=https://a.example.com/", "--webhook-secret="], "must not be empty"),
    ],
)
def test_a_webhook_change_that_cannot_be_made_changes_nothing(
    database_url: str, capsys: pytest.CaptureFixture[str], options: list[str], message: str
) -> None:
    project(database_url, capsys, "--webhook=https://kept.example.com/")
    code, error = project(database_url, capsys, "--threshold=0.3", *options)
    assert code == 1 and message in error
    _, settings = project(database_url, capsys)
    assert [hook["url"] for hook in settings["webhooks"]] == ["https://kept.example.com/"]
    assert settings["threshold"] == DEFAULT_THRESHOLD


@pytest.mark.parametrize(
    ("url", "host", "what"),
    [
        (
            "http://169.254.169.254/latest/meta-data/",
            "169.254.169.254",
            "link-local (cloud metadata)",
        ),
        (
            "http://[::ffff:169.254.169.254]/",
            "::ffff:169.254.169.254",
            "link-local (cloud metadata)",
        ),
        ("http://[fd00:ec2::254]/", "fd00:ec2::254", "cloud metadata"),
        ("http://[fe80::1]:8080/hook", "fe80::1", "link-local"),
        ("http://0xa9fea9fe/", "0xa9fea9fe", "link-local (cloud metadata)"),
    ],
)
def test_a_link_local_or_metadata_target_is_refused_in_one_line_with_or_without_the_option(
    database_url: str, capsys: pytest.CaptureFixture[str], url: str, host: str, what: str
) -> None:
    for options in ([], ["--webhook-allow-private"]):
        with pytest.raises(SystemExit) as exited:
            run_cli(
                ["project", f"--database-url={database_url}", "web", "--webhook", url, *options]
            )
        assert exited.value.code == 2
        assert capsys.readouterr().err == (
            f"storyshelf project: argument --webhook: {url!r} is not a webhook URL: its host "
            f"{host} is a {what} address, never a webhook target\n"
        )


def test_a_private_target_needs_the_project_option_and_keeps_it_while_one_is_there(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    refused = "a webhook target only with --webhook-allow-private"
    for url, what in (
        ("http://10.0.0.5:8080/built", "10.0.0.5 is a private"),
        ("http://u:hunter2@127.0.0.1/", "127.0.0.1 is a loopback"),
        ("http://[::1]/", "::1 is a loopback"),
    ):
        code, error = project(database_url, capsys, f"--webhook={url}")
        assert code == 2
        shown = url.replace("hunter2", "****")
        said = error.splitlines()[-1]  # after the log's lines
        assert said == f"storyshelf project: webhook {shown}: {what} address, {refused}"
    _, settings = project(database_url, capsys)
    assert (settings["webhooks"], settings["webhook_allow_private"]) == ([], False)

    code, settings = project(
        database_url, capsys, "--webhook-allow-private", "--webhook=http://u:hunter2@10.0.0.5/"
    )
    assert code == 0 and settings["webhook_allow_private"] is True
    assert [hook["url"] for hook in settings["webhooks"]] == ["http://u:****@10.0.0.5/"]
    # Turned off while a private target is there: refused, and nothing changes.
    code, error = project(database_url, capsys, "--no-webhook-allow-private")
    assert code == 2 and "hunter2" not in error
    assert error.splitlines()[-1].endswith(f"10.0.0.5 is a private address, {refused}")
    assert project(database_url, capsys)[1]["webhook_allow_private"] is True
    assert run_cli(["project", f"--database-url={database_url}", "web"]) == 0
    out = capsys.readouterr().out
    assert "webhook targets  public, loopback and private addresses" in out
    assert "hunter2" not in out
    # A name is judged when it is delivered, on what it resolves to then.
    code, settings = project(
        database_url, capsys, "--clear-webhooks", "--no-webhook-allow-private",
        "--webhook=http://hooks.internal.example/",
    )  # fmt: skip
    assert code == 0 and settings["webhook_allow_private"] is False


def test_a_refused_url_s_password_is_never_quoted(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        run_cli(
            ["project", f"--database-url={database_url}", "web",
             "--webhook", "http://u:hunter2@169.254.169.254:99999/"]
        )  # fmt: skip
    err = capsys.readouterr().err
    assert "hunter2" not in err and "u:****@169.254.169.254" in err
