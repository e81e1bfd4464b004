"""`python -m supervisor demo`: the whole product on the embedded SQLite default, in one command.

It draws screenshot-like images (no image library needed in this process), uploads a baseline
build on `main`, runs a capture host until it ends, uploads a branch build with a few real
changes, runs the host again, and prints both results and the path of the HTML report.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from supervisor.builds.uploads import enqueue_build, store_images
from supervisor.builds.view import format_build, load_build
from supervisor.commands.demo_images import write_demo_images
from supervisor.commands.options import open_database
from supervisor.db.connection import connect, transaction

PROJECT = "demo"


def upload(args: argparse.Namespace, folder: Path, branch: str) -> int:
    engine = connect(args.database_url)
    try:
        images = store_images(args.artifacts, folder)
        with transaction(engine) as conn:
            return enqueue_build(
                conn, project=PROJECT, branch=branch, images=images, shards=2
            ).build_id
    finally:
        engine.dispose()


def run_host(args: argparse.Namespace) -> None:
    """A real host (`run --drain`) in its own process, until the queue is empty."""
    subprocess.run(
        [
            sys.executable, "-m", "supervisor", "run", "--drain",
            "--database-url", args.database_url, "--artifacts", str(args.artifacts),
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
    print(format_build(view, args.artifacts), end="\n\n")
    return view.report_path


def execute(args: argparse.Namespace) -> int:
    open_database(args.database_url, migrate=True).dispose()
    with tempfile.TemporaryDirectory(prefix="storyshelf-demo-") as scratch:
        for step, (variant, branch) in enumerate(
            (("baseline", "main"), ("branch", "feature/new-buttons")), 1
        ):
            folder = Path(scratch) / variant
            stories = write_demo_images(folder, variant)  # type: ignore[arg-type]
            build_id = upload(args, folder, branch)
            print(
                f"[{step}/2] build {build_id}: {len(stories)} screenshots on {branch}; running the host"
            )
            run_host(args)
            report = show(args, build_id)
    if report:
        print(f"open the report: {(args.artifacts / report).resolve()}")
    return 0
