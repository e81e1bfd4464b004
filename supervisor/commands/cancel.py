"""`python -m supervisor cancel ID`: cancel a build's jobs (see `supervisor.builds.cancel`)."""

from __future__ import annotations

import argparse

from supervisor.builds.cancel import cancel_build
from supervisor.commands.options import ID_MAX, open_database, whole
from supervisor.db.connection import transaction
from supervisor.logs import complain


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `python -m supervisor cancel`."""
    parser.add_argument("build_id", metavar="ID", type=whole(1, ID_MAX), help="the build to cancel")


def execute(args: argparse.Namespace) -> int:
    """Cancel a build's jobs and print what happened; exit 1 for an unknown id."""
    engine = open_database(args.database_url)
    try:
        with transaction(engine) as conn:
            outcome = cancel_build(conn, args.build_id)
    except LookupError as error:
        complain("cancel", str(error))
        return 1
    finally:
        engine.dispose()
    print(outcome.describe())
    return 0
