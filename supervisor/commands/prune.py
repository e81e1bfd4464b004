"""`python -m supervisor prune`: delete what no baseline, build or job still needs
(`supervisor.builds.prune`): finished jobs and ended builds older than `--keep-days`, then the
stored images and Storybook files that nothing names any more and that are older than
`--grace-hours`. Prints one line of counts (`--json`: the counts as JSON); `--dry-run` counts
the same and changes nothing.
"""

from __future__ import annotations

import argparse
import json

from ipc.artifacts.store import StoreError
from supervisor.builds.prune import DEFAULT_GRACE_HOURS, DEFAULT_KEEP_DAYS, Retention, prune
from supervisor.commands.options import open_database, option, whole
from supervisor.logs import complain

#: A hundred years: longer means keep everything, and the databases' date arithmetic has bounds.
MAX_KEEP_DAYS = 36_500
MAX_GRACE_HOURS = MAX_KEEP_DAYS * 24


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `python -m supervisor prune`."""
    option(
        parser,
        "--keep-days",
        whole(0, MAX_KEEP_DAYS),
        DEFAULT_KEEP_DAYS,
        "keep finished jobs and ended builds this many days (by the database's clock); "
        "builds that baselines need are kept whatever their age",
    )
    option(
        parser,
        "--grace-hours",
        whole(0, MAX_GRACE_HOURS),
        DEFAULT_GRACE_HOURS,
        "never delete a stored file younger than this, named or not: an upload stores its "
        "files before its build exists, and marks those it reuses written now if they were "
        "written over an hour ago (so 2 or more keeps every upload shorter than an hour safe)",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="count what would be deleted; change nothing"
    )
    parser.add_argument("--json", action="store_true", help="print the counts as JSON")


def execute(args: argparse.Namespace) -> int:
    """Prune, then print what went (or would go)."""
    engine = open_database(args.database_url)
    retention = Retention(args.keep_days, args.grace_hours, args.dry_run)
    try:
        args.artifacts.check()
        pruned = prune(engine, args.artifacts, retention)
    except (StoreError, OSError) as error:
        complain("prune", str(error))
        return 1
    finally:
        engine.dispose()
    print(json.dumps(pruned.as_json()) if args.json else pruned.describe())
    return 0
