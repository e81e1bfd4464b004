"""`python -m supervisor demo`: the whole product on the embedded SQLite default, in one command.

It captures the small Storybook that ships with the package (`supervisor/data/demo_storybook/`, two static
builds made by `scripts/build_demo_storybook.sh`, so the demo needs no npm): a baseline build
on `main`, a real capture host run until it ends, then a branch build with real changes (a
colour token, a text edit, a new story, a removed one), the host again, and the results and
the HTML report's path. Without Chromium it says in one line how to get it and runs the same
demo on drawn screenshots instead (`demo_images`), which need no browser.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from ipc.storybook import configured_chromium
from supervisor.builds.storybooks import enqueue_storybook, store_storybook
from supervisor.builds.text import format_build
from supervisor.builds.uploads import QueuedBuild, enqueue_build, store_images
from supervisor.builds.view import load_build
from supervisor.commands.demo_images import write_demo_images
from supervisor.commands.options import open_database
from supervisor.db.connection import connect, transaction
from supervisor.terminal import output_width

PROJECT = "demo"
#: The demo's two Storybook builds, `main` and `branch`: package data, kept apart from the code.
STORYBOOKS = Path(__file__).parents[1] / "data" / "demo_storybook"
#: The two builds, in order: (what it is, branch).
STEPS = (("main", "main"), ("branch", "feature/new-buttons"))

#: Uploads one variant's build: (the build, a line saying what was uploaded).
Upload = Callable[[argparse.Namespace, str, str], tuple[QueuedBuild, str]]


def upload_storybook(
    args: argparse.Namespace, variant: str, branch: str
) -> tuple[QueuedBuild, str]:
    storybook = store_storybook(args.artifacts, STORYBOOKS / variant)
    engine = connect(args.database_url)
    try:
        with transaction(engine) as conn:
            queued = enqueue_storybook(conn, project=PROJECT, branch=branch, storybook=storybook)
    finally:
        engine.dispose()
    return queued, f"a Storybook of {storybook.stories} stories"


def upload_screenshots(
    args: argparse.Namespace, variant: str, branch: str
) -> tuple[QueuedBuild, str]:
    with tempfile.TemporaryDirectory(prefix="storyshelf-demo-") as scratch:
        folder = Path(scratch)
        stories = write_demo_images(folder, "baseline" if variant == "main" else "branch")
        images = store_images(args.artifacts, folder)
    engine = connect(args.database_url)
    try:
        with transaction(engine) as conn:
            queued = enqueue_build(conn, project=PROJECT, branch=branch, images=images, shards=2)
    finally:
        engine.dispose()
    return queued, f"{len(stories)} screenshots"


def run_host(args: argparse.Namespace) -> None:
    """A real host (`run --drain`) in its own process, until the queue is empty."""
    subprocess.run(
        [
            sys.executable, "-m", "supervisor", "run", "--drain",
            "--database-url", args.database_url, "--artifacts", args.artifacts.location,
            "--log-level", args.log_level,
        ],
        check=True,
    )  # fmt: skip


def show(args: argparse.Namespace, build_id: int) -> str | None:
    engine = connect(args.database_url)
    with engine.connect() as conn:
        view = load_build(conn, build_id)
    engine.dispose()
    assert view is not None
    print(format_build(view, args.artifacts, width=output_width()), end="\n\n")
    return view.report_url


def chosen_upload() -> Upload:
    """The Storybook when there is a browser to render it, else the drawn screenshots."""
    chromium = configured_chromium()
    if shutil.which(chromium) is not None:
        return upload_storybook
    print(
        f"Chromium not found at {chromium}: install it (apt-get install chromium-headless-shell) to capture "
        "the demo Storybook; showing the demo on screenshots instead"
    )
    return upload_screenshots


def execute(args: argparse.Namespace) -> int:
    open_database(args.database_url, migrate=True).dispose()
    upload = chosen_upload()
    report = None
    for step, (variant, branch) in enumerate(STEPS, 1):
        queued, what = upload(args, variant, branch)
        print(
            f"[{step}/{len(STEPS)}] build {queued.build_id}: {what} on {branch}; running the host"
        )
        run_host(args)
        report = show(args, queued.build_id)
    if report:
        print(f"open the report: {report}")
    return 0
