"""`python -m supervisor build ID`: a build's state and every snapshot's result.

Its exit status is the build's verdict and review, so one CI step can gate on it
(`BuildExit`): a changed build passes once a person accepted its changes; with
`--wait` it first waits for the build to end and for its report to be published (a host's
`publish` job), so that the command can say where the report opens.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from dataclasses import replace
from enum import IntEnum

from sqlalchemy import Engine

from ipc.build_view import BuildView
from supervisor.builds.publish import PUBLISHING, mend, publish_state
from supervisor.builds.text import format_build, is_change
from supervisor.builds.view import load_build
from supervisor.commands.options import ID_MAX, open_database, seconds, whole
from supervisor.db.connection import DatabaseProblem, DatabaseUnavailable, transaction
from supervisor.logs import complain
from supervisor.terminal import output_width


class BuildExit(IntEnum):
    """The exit statuses of `build ID`, one per verdict (README and `--help` list them)."""

    PASSED = 0  # every snapshot new or unchanged, or every change accepted
    CHANGED = 1  # changes await review: a person should look
    USAGE = 2  # the command line was wrong (argparse's own status; never returned here)
    FAILED = 3  # a snapshot or shard failed, or the build was cancelled
    NOT_ENDED = 4  # still pending or capturing: without --wait, or --timeout ran out
    ERROR = 5  # no such build, or the database cannot be used
    REJECTED = 6  # a reviewer rejected a change


def verdict(view: BuildView, *, zero_on_changes: bool = False) -> BuildExit:
    """The exit status that says `view`'s state: a failure first, then a rejection, then
    changes awaiting review (0 with `zero_on_changes`, as Chromatic's `--exit-zero-on-changes`)."""
    if not view.ended:
        return BuildExit.NOT_ENDED
    if view.status in ("failed", "cancelled"):
        return BuildExit.FAILED
    if view.review == "rejected":
        return BuildExit.REJECTED
    if view.status == "changed" and view.review != "accepted" and not zero_on_changes:
        return BuildExit.CHANGED
    return BuildExit.PASSED


#: How often `--wait` reads the build: a build takes seconds at least, and a read is one query.
WAIT_POLL_SECONDS = 1.0

EPILOG = """exit status:
  0  passed: every snapshot is new or unchanged, or every change was accepted
  1  changed: changes await review (0 with --exit-zero-on-changes)
  2  the command line was wrong
  3  failed or cancelled
  4  not ended yet (without --wait, or when --timeout ran out)
  5  no such build, or the database cannot be used
  6  a reviewer rejected a change"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `python -m supervisor build`."""
    parser.add_argument("build_id", metavar="ID", type=whole(1, ID_MAX), help="the build's id")
    parser.add_argument("--json", action="store_true", help="print the build as JSON")
    parser.add_argument(
        "--changed",
        action="store_true",
        help="list only the snapshots that need a look (changed, unstable, failed, new)",
    )
    parser.add_argument(
        "--wait", action="store_true", help="wait for the build to end (the host does the work)"
    )
    parser.add_argument(
        "--exit-zero-on-changes",
        action="store_true",
        help="exit 0 while changes await review (a rejection still exits 6)",
    )
    parser.add_argument(
        "--timeout",
        type=seconds,
        metavar="SECONDS",
        help="with --wait: give up after this long (exit 4); default: wait as long as it takes",
    )


def execute(args: argparse.Namespace) -> int:
    """Print a build's state and every snapshot's result; the exit status is its verdict."""
    if args.timeout is not None and (not args.wait or args.timeout <= 0):
        complain("build", "--timeout takes --wait and a number of seconds above 0")
        return BuildExit.USAGE
    try:
        engine = open_database(args.database_url)
    except DatabaseProblem as error:
        complain("build", str(error))
        return BuildExit.ERROR
    try:
        view, publishing = _read(engine, args) if not args.wait else _wait(engine, args)
    except DatabaseProblem as error:
        complain("build", str(error))
        return BuildExit.ERROR
    except KeyboardInterrupt:
        complain("build", f"stopped waiting for build {args.build_id}")
        return BuildExit.NOT_ENDED
    finally:
        engine.dispose()
    if view is None:
        complain("build", f"no build with id {args.build_id}")
        return BuildExit.ERROR
    print(_json(view, changed=args.changed) if args.json else _text(view, publishing, args))
    if args.wait and not view.ended:
        complain("build", f"build {view.id} is still {view.status} after {args.timeout:g} s")
    return verdict(view, zero_on_changes=args.exit_zero_on_changes)


def _json(view: BuildView, *, changed: bool) -> str:
    """The build's JSON; `changed`: its snapshots only those that need a look, its other keys
    (counts included) those of the whole build."""
    shown = replace(view, snapshots=tuple(filter(is_change, view.snapshots))) if changed else view
    return json.dumps(shown.as_json(), indent=2)


def _text(view: BuildView, publishing: str | None, args: argparse.Namespace) -> str:
    return format_build(
        view,
        args.artifacts,
        publishing=publishing,
        width=output_width(),
        changes_only=args.changed,
    )


#: A build as read, with why its report is not there yet (`publish_state`) if it has ended
#: without one.
Reading = tuple[BuildView | None, str | None]


def _read(engine: Engine, args: argparse.Namespace, *, mending: bool = True) -> Reading:
    """The build, and for an ended one whose report is not stored, why; `mending`: its
    publish job is queued again if none is on the way (`supervisor.builds.publish.mend`),
    which `--wait` does once, so that a report that cannot be published is not tried forever.
    """
    with transaction(engine) as conn:
        view = load_build(conn, args.build_id)
        if view is None or not view.ended:
            return view, None
        if view.report_url and not mending:
            return view, None
        publishing = mend(conn, view, args.artifacts) if mending else publish_state(conn, view.id)
    return (view if publishing is None else replace(view, report_url=None)), publishing


def _settled(reading: Reading) -> bool:
    """Whether there is nothing more to wait for: no such build, or an ended one whose report
    is published or will not be."""
    view, publishing = reading
    if view is None:
        return True
    return view.ended and not (publishing and publishing.startswith(PUBLISHING))


def _wait(
    engine: Engine,
    args: argparse.Namespace,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Reading:
    """The build once it has ended and its report is published (or failed to be), or as it
    stands when `--timeout` runs out; None when there is no such build. A database that goes
    away meanwhile is waited for too (said once), since the hosts doing the work wait for it
    as well."""
    deadline = None if args.timeout is None else clock() + args.timeout
    said_unavailable = mended = False
    reading: Reading | None
    while True:
        try:
            reading = _read(engine, args, mending=not mended)
        except DatabaseUnavailable as error:
            if not said_unavailable:
                complain("build", f"waiting for the database: {error}")
                said_unavailable = True
            reading = None
        else:
            if _settled(reading):
                return reading
            mended = mended or (reading[0] is not None and reading[0].ended)
        if deadline is not None and clock() >= deadline:
            return reading if reading is not None else _read(engine, args, mending=False)
        sleep(
            WAIT_POLL_SECONDS
            if deadline is None
            else min(WAIT_POLL_SECONDS, max(deadline - clock(), 0.0))
        )
