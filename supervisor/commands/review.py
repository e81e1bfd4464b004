"""`python -m supervisor review ID (--accept | --reject) ...`: a person's decision on a build.

Without `--snapshot`, the decision covers every changed and new snapshot of the build. What a
review records and moves (the history, the branch's baselines, the build's review state, its
report and webhooks) is `supervisor.review.decisions`; this command is its command line, as
`serve`'s review API is its HTTP side.
"""

from __future__ import annotations

import argparse

from supervisor.commands.options import ID_MAX, open_database, whole
from supervisor.db.connection import transaction
from supervisor.logs import complain
from supervisor.review.decisions import NoSuchBuild, ReviewRefused, review_build

#: Exit statuses: a review refused (a build not ended, a snapshot failed or not in it), and
#: no such build (as `build ID` says it).
REFUSED, NO_SUCH_BUILD = 1, 5


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `python -m supervisor review`."""
    parser.add_argument("build_id", metavar="ID", type=whole(1, ID_MAX), help="the build to review")
    decision = parser.add_mutually_exclusive_group(required=True)
    decision.add_argument(
        "--accept",
        dest="decision",
        action="store_const",
        const="accepted",
        help="accept: the snapshots become the baselines of their branch",
    )
    decision.add_argument(
        "--reject",
        dest="decision",
        action="store_const",
        const="rejected",
        help="reject: the build fails its gate (exit 6 from `build`)",
    )
    parser.add_argument(
        "--snapshot",
        action="append",
        metavar="NAME",
        help="a snapshot to decide on (repeatable); default: every changed and new one",
    )
    parser.add_argument("--by", required=True, metavar="WHO", help="who decides (kept with it)")
    parser.add_argument("--comment", metavar="TEXT", help="why (kept with the decision)")


def execute(args: argparse.Namespace) -> int:
    """Record the decision and print what it did; one line and exit 1 (5: no such build) when
    it cannot be taken, with nothing written."""
    engine = open_database(args.database_url)
    try:
        with transaction(engine) as conn:
            outcome = review_build(
                conn, args.build_id, args.decision, args.snapshot, args.by, args.comment
            )
    except NoSuchBuild as error:
        complain("review", str(error))
        return NO_SUCH_BUILD
    except ReviewRefused as error:
        complain("review", str(error))
        return REFUSED
    finally:
        engine.dispose()
    count = len(outcome.names)
    print(
        f"build {outcome.build_id}: {outcome.decision} {count} snapshot{'s' if count != 1 else ''}"
        f" by {args.by.strip()}; review {outcome.state or 'not needed'}"
    )
    return 0
