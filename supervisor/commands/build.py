"""`python -m supervisor build ID`: a build's state and every snapshot's result.

A build that ended without its report (it could not be written then, or was removed) gets it
written here, so the command can say where it is.
"""

from __future__ import annotations

import argparse
import json
import sys

from supervisor.builds.report import with_report
from supervisor.builds.view import format_build, load_build
from supervisor.commands.options import ID_MAX, open_database, whole
from supervisor.db.connection import transaction


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `python -m supervisor build`."""
    parser.add_argument("build_id", metavar="ID", type=whole(1, ID_MAX), help="the build's id")
    parser.add_argument("--json", action="store_true", help="print the build as JSON")


def execute(args: argparse.Namespace) -> int:
    """Print a build's state and every snapshot's result; exit 1 for an unknown id."""
    engine = open_database(args.database_url)
    try:
        with transaction(engine) as conn:
            view = load_build(conn, args.build_id)
        if view is not None:
            view = with_report(engine, view, args.artifacts)
    finally:
        engine.dispose()
    if view is None:
        print(f"supervisor build: no build with id {args.build_id}", file=sys.stderr)
        return 1
    print(json.dumps(view.as_json(), indent=2) if args.json else format_build(view, args.artifacts))
    return 0
