"""`python -m supervisor enqueue-build`: register a build from screenshots or a Storybook.

Everything is checked before anything is written, so a refused upload leaves nothing behind. The
files are then stored content-addressed, and the build created in one transaction, so a build is
never queued without its files: an upload's shards and capture jobs at once
(`supervisor.builds.uploads`), a Storybook's `plan` job, which makes them once the stories are
known (`supervisor.builds.storybooks`).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from sqlalchemy import Engine

from ipc.artifacts.store import StoreError
from supervisor.builds.files import UploadError
from supervisor.builds.plan import FIRST_SHARD_STORIES
from supervisor.builds.plan import SNAPSHOTS_PER_SHARD as STORIES_PER_SHARD
from supervisor.builds.projects import ProjectError
from supervisor.builds.storybooks import enqueue_storybook, store_storybook
from supervisor.builds.uploads import (
    SNAPSHOTS_PER_SHARD,
    QueuedBuild,
    check_request,
    enqueue_build,
    store_images,
)
from supervisor.commands.options import ID_MAX, open_database, whole
from supervisor.db.connection import transaction
from supervisor.logs import complain


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `python -m supervisor enqueue-build`."""
    parser.add_argument("--project", required=True, help="project name (created if new)")
    parser.add_argument("--branch", required=True, help="the branch the build comes from")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--images", type=Path, help="folder of PNGs, one per story")
    source.add_argument(
        "--storybook",
        type=Path,
        help="a Storybook static build (storybook-static/): the host renders every story",
    )
    parser.add_argument(
        "--shards",
        type=whole(1, ID_MAX),
        help="capture jobs to split the build into (default: one per "
        f"{SNAPSHOTS_PER_SHARD} snapshots for images; for a Storybook, a first of "
        f"{FIRST_SHARD_STORIES} stories, whose results come first, then one per "
        f"{STORIES_PER_SHARD})",
    )
    parser.add_argument("--commit", help="commit SHA the build was made at")
    parser.add_argument(
        "--json", action="store_true", help="print build, shard and job ids as JSON"
    )


def execute(args: argparse.Namespace) -> int:
    """Upload a build and queue its work; prints the build id."""
    engine = open_database(args.database_url)
    try:
        check_request(args.project, args.branch, 1 if args.shards is None else args.shards)
        args.artifacts.check()
        queued = _storybook(engine, args) if args.storybook else _images(engine, args)
    except (UploadError, ProjectError, StoreError) as error:
        complain("enqueue-build", str(error))
        return 1
    finally:
        engine.dispose()
    print(json.dumps(queued.as_json()) if args.json else queued.build_id)
    return 0


def _progress(line: str) -> None:
    """A large upload's progress, on stderr: stdout is the build's id (or its JSON)."""
    complain("enqueue-build", f"{line}")


def _images(engine: Engine, args: argparse.Namespace) -> QueuedBuild:
    images = store_images(args.artifacts, args.images, _progress)
    with transaction(engine) as conn:
        return enqueue_build(
            conn,
            project=args.project,
            branch=args.branch,
            images=images,
            shards=args.shards,
            commit=args.commit,
        )


def _storybook(engine: Engine, args: argparse.Namespace) -> QueuedBuild:
    storybook = store_storybook(args.artifacts, args.storybook, _progress)
    with transaction(engine) as conn:
        return enqueue_storybook(
            conn,
            project=args.project,
            branch=args.branch,
            storybook=storybook,
            shards=args.shards,
            commit=args.commit,
        )
