"""`python -m supervisor enqueue-build`: register a build from a folder of screenshots.

Everything is checked before anything is written, so a refused upload leaves nothing behind. The
images are then stored content-addressed, and the build, its shards and its capture jobs created
in one transaction, so a build is never queued without its files.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from supervisor.builds.projects import ProjectError
from supervisor.builds.uploads import UploadError, check_request, enqueue_build, store_images
from supervisor.commands.options import open_database
from supervisor.db.connection import transaction


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `python -m supervisor enqueue-build`."""
    parser.add_argument("--project", required=True, help="project name (created if new)")
    parser.add_argument("--branch", required=True, help="the branch the screenshots come from")
    parser.add_argument("--images", required=True, type=Path, help="folder of PNGs, one per story")
    parser.add_argument(
        "--shards", type=int, default=1, help="capture jobs to split the build into (default 1)"
    )
    parser.add_argument("--commit", help="commit SHA the screenshots were taken at")
    parser.add_argument(
        "--json", action="store_true", help="print build, shard and job ids as JSON"
    )


def execute(args: argparse.Namespace) -> int:
    """Upload a folder of PNGs as a build and queue its capture; prints the build id."""
    engine = open_database(args.database_url)
    try:
        check_request(args.project, args.branch, args.shards)
        images = store_images(args.artifacts, args.images)
        with transaction(engine) as conn:
            queued = enqueue_build(
                conn,
                project=args.project,
                branch=args.branch,
                images=images,
                shards=args.shards,
                commit=args.commit,
            )
    except (UploadError, ProjectError) as error:
        print(f"supervisor enqueue-build: {error}", file=sys.stderr)
        return 1
    finally:
        engine.dispose()
    print(json.dumps(queued.as_json()) if args.json else queued.build_id)
    return 0
