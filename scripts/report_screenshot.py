"""The README's picture of a build report: a small real build, and its report shot in Chromium.

The demo's two Storybook builds (`supervisor/data/demo_storybook/`: `main`, then a branch
with a colour token changed, a text edit, a new story and a removed one) go through a real host
(`run --drain`) on a throwaway SQLite database and artifacts folder, through the command line
only, as a user would run them. The branch build's report is then opened from disk in headless
Chromium, 1280 px wide, and shot from the top, where the first changed snapshot's enlarged crop
is.

    python scripts/report_screenshot.py [--out scripts/report-screenshot.png]

It needs Chromium (Debian's headless shell or `/usr/bin/chromium`, or `STORYSHELF_CHROMIUM`), and
never downloads one.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

from ipc.storybook import configured_chromium
from supervisor.commands.demo import STORYBOOKS

ROOT = Path(__file__).resolve().parents[1]
WIDTH, HEIGHT = 1280, 960
#: The builds, in order: (the Storybook folder, its branch).
BUILDS = (("main", "main"), ("branch", "feature/new-buttons"))


def supervisor(database: str, artifacts: Path, *argv: str) -> str:
    """`python -m supervisor ARGV` on the throwaway database; its standard output. Exit status
    1 is `build ID`'s way to say "changed", not a failure."""
    command = [sys.executable, "-m", "supervisor", *argv]
    options = ["--database-url", database, "--artifacts", str(artifacts), "--log-level", "warning"]
    done = subprocess.run(
        [*command, *options], cwd=ROOT, capture_output=True, text=True, timeout=600, check=False
    )
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(argv)} failed: {done.stderr.strip()}")
    return done.stdout


def make_build(folder: Path) -> Path:
    """Both builds captured by a real host; the branch build's report file."""
    database, artifacts = f"sqlite:///{folder / 'storyshelf.db'}", folder / "artifacts"
    supervisor(database, artifacts, "migrate")
    build_id = 0
    for storybook, branch in BUILDS:
        queued = supervisor(
            database, artifacts, "enqueue-build", "--project", "demo", "--branch", branch,
            "--storybook", str(STORYBOOKS / storybook), "--json",
        )  # fmt: skip
        build_id = json.loads(queued)["build_id"]
        supervisor(database, artifacts, "run", "--drain")
    shown = json.loads(supervisor(database, artifacts, "build", str(build_id), "--json"))
    report: str | None = shown["report_url"]
    if not report:
        raise SystemExit(f"build {build_id} has no report: {shown['status']} {shown['error']}")
    return Path(report)


def shoot(report: Path, out: Path) -> None:
    """The report's top at 1280 px wide, light scheme, as a PNG (palette-free, so small)."""
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=configured_chromium(), args=["--no-sandbox"]
        )
        try:
            page = browser.new_page(
                viewport={"width": WIDTH, "height": HEIGHT}, color_scheme="light"
            )
            page.goto(report.as_uri())
            page.wait_for_load_state("load")
            page.locator(".snapshot.changed .crop-frame img").first.wait_for()
            page.wait_for_function(
                "Array.from(document.querySelectorAll('.snapshot.changed')[0]"
                ".querySelectorAll('.crop-frame img')).every(i => i.complete && i.naturalWidth)"
            )
            page.screenshot(path=str(out))
        finally:
            browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "scripts" / "report-screenshot.png")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="storyshelf-report-") as scratch:
        shoot(make_build(Path(scratch)), args.out)
    print(f"{args.out} ({args.out.stat().st_size // 1024} KiB)")


if __name__ == "__main__":
    main()
