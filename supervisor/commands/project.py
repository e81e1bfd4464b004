"""`python -m supervisor project P`: show or change a project's diff settings and webhooks."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict

from ipc.diff_settings import METRICS
from supervisor.builds.projects import (
    ProjectError,
    ProjectSettings,
    SettingsChange,
    change_settings,
)
from supervisor.builds.webhooks import (
    MASK,
    BadWebhookUrl,
    RefusedTarget,
    Webhook,
    WebhookChange,
    change_webhooks,
    check_targets,
    check_url,
    masked_url,
)
from supervisor.commands.options import (
    INT32_MAX,
    choice,
    number,
    number_or_off,
    open_database,
    whole,
)
from supervisor.db.connection import transaction
from supervisor.logs import complain


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `python -m supervisor project`."""
    parser.add_argument("name", metavar="P", help="project name (created if new)")
    parser.add_argument("--metric", type=choice(METRICS), help="colour metric of the diff")
    parser.add_argument("--threshold", type=number, help="colour distance threshold, 0 to 1")
    parser.add_argument(
        "--flat-threshold",
        type=number_or_off,
        metavar="T|off",
        help="finer threshold where both images are flat (catches one-step colour changes); "
        "off: counts equal pixelmatch's",
    )
    aa = parser.add_mutually_exclusive_group()
    aa.add_argument(
        "--count-aa",
        dest="count_aa",
        action="store_const",
        const=True,
        help="count anti-aliased pixels as changed",
    )
    aa.add_argument(
        "--ignore-aa",
        dest="count_aa",
        action="store_const",
        const=False,
        help="ignore anti-aliased pixels (the default)",
    )
    parser.add_argument(
        "--budget",
        type=whole(high=INT32_MAX),
        dest="budget_pixels",
        help="changed pixels tolerated per snapshot",
    )
    parser.add_argument("--baseline-branch", help="branch whose builds become the baselines")
    unstable = parser.add_mutually_exclusive_group()
    unstable.add_argument(
        "--unstable-fails",
        dest="unstable_fails",
        action="store_const",
        const=True,
        help="a change in a snapshot that never settled makes its build changed (the default)",
    )
    unstable.add_argument(
        "--unstable-passes",
        dest="unstable_fails",
        action="store_const",
        const=False,
        help="changes in snapshots that never settled are shown but do not fail the gate",
    )
    accept = parser.add_mutually_exclusive_group()
    accept.add_argument(
        "--auto-accept",
        dest="auto_accept",
        action="store_const",
        const=True,
        help="a build on the baseline branch is accepted when it ends (the default)",
    )
    accept.add_argument(
        "--no-auto-accept",
        dest="auto_accept",
        action="store_const",
        const=False,
        help="builds on the baseline branch wait for a review like any other branch's",
    )
    parser.add_argument(
        "--webhook",
        type=webhook_url,
        action="append",
        default=[],
        metavar="URL",
        help="POST a JSON summary of each ended build to URL (http or https; repeatable)",
    )
    parser.add_argument(
        "--webhook-secret",
        metavar="S",
        help="sign the bodies sent to the --webhook URLs given with this secret (HMAC-SHA256)",
    )
    parser.add_argument(
        "--no-webhook",
        action="append",
        default=[],
        metavar="URL",
        help="stop telling URL (repeatable)",
    )
    parser.add_argument(
        "--clear-webhooks", action="store_true", help="remove every webhook of the project first"
    )
    private = parser.add_mutually_exclusive_group()
    private.add_argument(
        "--webhook-allow-private",
        dest="webhook_allow_private",
        action="store_const",
        const=True,
        help="let the webhooks reach loopback and private addresses (127/8, 10/8, 172.16/12, "
        "192.168/16, fc00::/7...); link-local and cloud metadata never",
    )
    private.add_argument(
        "--no-webhook-allow-private",
        dest="webhook_allow_private",
        action="store_const",
        const=False,
        help="webhooks reach public addresses only (the default)",
    )
    parser.add_argument("--json", action="store_true", help="print the settings as JSON")


def webhook_url(text: str) -> str:
    """A URL a webhook can be POSTed to (`supervisor.builds.webhooks.check_url`)."""
    try:
        return check_url(text)
    except BadWebhookUrl as error:
        shown = masked_url(text)
        raise argparse.ArgumentTypeError(f"{shown!r} is not a webhook URL: {error}") from None


def execute(args: argparse.Namespace) -> int:
    """Show project `P`'s diff settings and webhooks, after applying any option given."""
    change = SettingsChange(
        metric=args.metric,
        threshold=args.threshold,
        count_aa=args.count_aa,
        budget_pixels=args.budget_pixels,
        flat_threshold=args.flat_threshold,
        baseline_branch=args.baseline_branch,
        unstable_fails=args.unstable_fails,
        webhook_allow_private=args.webhook_allow_private,
        auto_accept=args.auto_accept,
    )
    hooks = WebhookChange(
        add=args.webhook,
        secret=args.webhook_secret,
        remove=args.no_webhook,
        clear=args.clear_webhooks,
    )
    engine = open_database(args.database_url)
    try:
        with transaction(engine) as conn:
            settings = change_settings(conn, args.name, change)
            check_targets(hooks.add, settings.webhook_allow_private)
            webhooks = change_webhooks(conn, settings.id, hooks)
            if args.webhook_allow_private is False:  # just turned off: those kept are judged
                check_targets([hook.url for hook in webhooks], allow_private=False)
    except RefusedTarget as error:
        complain("project", str(error))
        return 2
    except ProjectError as error:
        complain("project", str(error))
        return 1
    finally:
        engine.dispose()
    if args.json:
        print(json.dumps({**asdict(settings), "webhooks": [hook.shown() for hook in webhooks]}))
    else:
        print(_describe(settings, webhooks))
    return 0


def _describe(settings: ProjectSettings, webhooks: list[Webhook]) -> str:
    flat = settings.flat_threshold
    rows = [
        ("project", settings.name),
        ("baseline branch", settings.baseline_branch),
        ("metric", settings.metric),
        ("threshold", f"{settings.threshold:g}"),
        ("flat threshold", "off" if flat is None else f"{flat:g} where both images are flat"),
        ("anti-aliasing", "counted" if settings.count_aa else "ignored"),
        ("budget", f"{settings.budget_pixels} pixels"),
        ("unstable", "changes fail the gate" if settings.unstable_fails else "shown, not failing"),
        (
            "accepting",
            f"{settings.baseline_branch} builds when they end, others by review"
            if settings.auto_accept
            else "by review only",
        ),
        (
            "webhook targets",
            "public, loopback and private addresses"
            if settings.webhook_allow_private
            else "public addresses only",
        ),
        *(
            ("webhooks" if index == 0 else "", _webhook_line(hook))
            for index, hook in enumerate(webhooks)
        ),
    ]
    if not webhooks:
        rows.append(("webhooks", "none"))
    width = max(len(label) for label, _ in rows)
    return "\n".join(f"{label:<{width}}  {value}" for label, value in rows)


def _webhook_line(hook: Webhook) -> str:
    signed = f"signed, secret {MASK}" if hook.secret else "unsigned"
    return f"{masked_url(hook.url)} ({signed})"
