"""With the finer pass off, counts through the command line equal the reference tools'.

A team moving from pixelmatch sets its project as it had the tool (`project P --metric yiq
--threshold 0.1 --ignore-aa --flat-threshold off`), uploads builds with `enqueue-build`, runs
a real host (`run --drain`, forked children) and reads `build --json`: every fixture pair of
`tests/fixtures/diff` and `tests/fixtures/screens` must count what pixelmatch 7.1 (`yiq`) or
8.0 (`oklab`) counted at the same threshold and anti-aliasing option (`expected.json`, made by
`scripts/make_diff_fixtures.mjs`).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.capture_helpers import run_cli
from tests.hosts import FAST, ROOT

FOLDERS = [ROOT / "tests" / "fixtures" / name for name in ("diff", "screens")]
#: expected.json's key -> the `project` options that ask for the same.
RUNS = {
    "yiq 0.1": ("--metric=yiq", "--threshold=0.1", "--ignore-aa"),
    "yiq 0.1 aa": ("--metric=yiq", "--threshold=0.1", "--count-aa"),
    "oklab 0.1": ("--metric=oklab", "--threshold=0.1", "--ignore-aa"),
    "oklab 0.05 aa": ("--metric=oklab", "--threshold=0.05", "--count-aa"),
}


def expected() -> dict[str, dict[str, int]]:
    """Snapshot name (`folder-pair`) -> run -> the reference tool's count."""
    table: dict[str, dict[str, int]] = {}
    for folder in FOLDERS:
        for pair, runs in json.loads((folder / "expected.json").read_text()).items():
            table[f"{folder.name}-{pair}"] = runs
    return table


def side(tmp_path: Path, letter: str) -> Path:
    """Every pair's `letter` image in one folder, named `folder-pair.png`."""
    out = tmp_path / letter
    out.mkdir()
    for folder in FOLDERS:
        for image in folder.glob(f"*.{letter}.png"):
            shutil.copyfile(image, out / f"{folder.name}-{image.name[: -len('.a.png')]}.png")
    return out


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    capsys.readouterr()
    code = run_cli(list(argv))
    out = capsys.readouterr().out
    assert code in (0, 1), f"`{' '.join(argv)}` exited {code}"
    return json.loads(out)


def drain(database_url: str, artifacts: Path) -> None:
    host = subprocess.run(
        [sys.executable, "-m", "supervisor", "run", "--drain", *FAST,
         "--database-url", database_url, "--artifacts", str(artifacts)],
        capture_output=True, text=True, cwd=ROOT, timeout=300, check=False,
    )  # fmt: skip
    assert host.returncode == 0, host.stderr[-3000:]


def test_counts_through_the_cli_equal_pixelmatch_with_the_finer_pass_off(
    database_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    artifacts = tmp_path / "artifacts"
    where = (f"--database-url={database_url}", f"--artifacts={artifacts}")
    baseline, branch = side(tmp_path, "a"), side(tmp_path, "b")

    def enqueue(project: str, name: str, images: Path) -> int:
        options = ("--project", project, "--branch", name, "--images", str(images), "--json")
        build_id: int = cli(capsys, "enqueue-build", *where, *options)["build_id"]
        return build_id

    for run, options in RUNS.items():
        settings = cli(capsys, "project", run, *where, *options, "--flat-threshold=off", "--json")
        assert settings["flat_threshold"] is None
        enqueue(run, "main", baseline)
    drain(database_url, artifacts)
    builds = {run: enqueue(run, "feature", branch) for run in RUNS}
    drain(database_url, artifacts)

    reference = expected()
    for run, build_id in builds.items():
        shown = cli(capsys, "build", str(build_id), *where, "--json")
        counts = {s["name"]: s["diff_pixels"] for s in shown["snapshots"]}
        assert counts == {name: runs[run] for name, runs in reference.items()}, run
        compared = [s["settings"] for s in shown["snapshots"] if s["settings"]]
        assert len(compared) == len(reference)
        assert all(s["flat_threshold"] is None for s in compared)
        assert {(s["metric"], s["threshold"], s["count_aa"]) for s in compared} == {
            (run.split()[0], float(run.split()[1]), run.endswith(" aa"))
        }
