"""The metrics one host records, in a registry of its own.

A host passes its `HostMetrics` to the parts that see things happen (the settler, the lease
keeper, the loop); each calls one method named for what happened. The registry is the host's,
never `prometheus_client`'s global one, so a test builds its own and reads exactly what one
host recorded, and two hosts in one process would not mix their counts.

Labels are closed sets, so a host's series stay few whatever its jobs do: `kind` is a
registered job kind, `outcome` a `JobOutcome`, and `cause` is a death's cause cut down to its
class (`crash_cause_label`): the signal's name, never the detail of a stall or a frame.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, get_args

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from supervisor.host.deaths import cause_class
from supervisor.host.outcome import JobOutcome
from supervisor.metrics.health import HealthBoard

PREFIX = "storyshelf"
#: Seconds from claim to settle: a short job takes milliseconds, a capture shard minutes.
DURATION_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800)
#: Seconds from due to claimed: milliseconds with NOTIFY, the poll interval without.
PICKUP_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 15, 30, 60, 300, 900)
#: Seconds one story takes to render and settle, up to the 15 s cap and its delay.
RENDER_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30)
#: Jobs in one claim: at most one per child plus what is claimed ahead (64 per child).
BATCH_BUCKETS = (0, 1, 2, 4, 8, 16, 32, 64, 128, 256)


class HostMetrics:
    """The metrics of one host, and its health board, recorded by the loop's thread."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.health = HealthBoard()
        reg = self.registry
        self.jobs_finished = Counter(
            f"{PREFIX}_jobs_finished",
            "Jobs this host ended, by kind and outcome (a JobOutcome).",
            ["kind", "outcome"],
            registry=reg,
        )
        self.job_duration = Histogram(
            f"{PREFIX}_job_duration_seconds",
            "Seconds from a job's claim to its settlement on this host.",
            ["kind"],
            buckets=DURATION_BUCKETS,
            registry=reg,
        )
        self.children = Gauge(f"{PREFIX}_children", "Children alive.", registry=reg)
        self.child_crashes = Counter(
            f"{PREFIX}_child_crashes",
            "Children that died unasked, by the class of the cause.",
            ["cause"],
            registry=reg,
        )
        self.lease_renewals = Counter(
            f"{PREFIX}_lease_renewals", "Leases renewed (jobs, not statements).", registry=reg
        )
        self.leases_lost = Counter(
            f"{PREFIX}_leases_lost",
            "Renewals the fence refused: another host owns the job now.",
            registry=reg,
        )
        self.claim_batch = Histogram(
            f"{PREFIX}_claim_batch_size",
            "Jobs one claim statement took.",
            buckets=BATCH_BUCKETS,
            registry=reg,
        )
        self.claimed_ahead = Gauge(
            f"{PREFIX}_claimed_ahead",
            "Jobs claimed that no child has started: held, or waiting behind a running job.",
            registry=reg,
        )
        self.pickup_latency = Histogram(
            f"{PREFIX}_pickup_latency_seconds",
            "Seconds from when a job was due (run_at) to its claim, by the database's clock.",
            buckets=PICKUP_BUCKETS,
            registry=reg,
        )
        self.spawn_backoff = Gauge(
            f"{PREFIX}_spawn_backoff",
            "1 while spawning backs off (children keep dying, or forks fail), else 0.",
            registry=reg,
        )
        self.spawn_backoff_remaining = Gauge(
            f"{PREFIX}_spawn_backoff_remaining_seconds",
            "Seconds until the next spawn is tried, while spawning backs off.",
            registry=reg,
        )
        self.stories_rendered = Counter(
            f"{PREFIX}_stories_rendered",
            "Stories rendered in a child's browser, failed ones included (recorded captures).",
            registry=reg,
        )
        self.story_render = Histogram(
            f"{PREFIX}_story_render_seconds",
            "Seconds one story took to render, settle and be shot.",
            buckets=RENDER_BUCKETS,
            registry=reg,
        )
        self.stories_unsettled = Counter(
            f"{PREFIX}_stories_unsettled",
            "Stories whose shots never agreed: the last one was kept.",
            registry=reg,
        )

    def know_kinds(self, kinds: Iterable[str]) -> None:
        """Start every kind's series at 0, so that a rate over them exists before the first job."""
        for kind in kinds:
            self.job_duration.labels(kind)
            for outcome in get_args(JobOutcome):
                self.jobs_finished.labels(kind, outcome)

    def job_finished(self, kind: str, outcome: JobOutcome, seconds: float | None) -> None:
        """A job ended; `seconds` since its claim, None when it never ran (dropped, unhandled)."""
        self.jobs_finished.labels(kind, outcome).inc()
        if seconds is not None:
            self.job_duration.labels(kind).observe(seconds)

    def child_crashed(self, cause: str) -> None:
        """A child died unasked of `cause` (`death_cause`'s words)."""
        self.child_crashes.labels(cause_class(cause)).inc()

    def leases_renewed(self, renewed: int, lost: int) -> None:
        """One renewal statement: `renewed` leases still ours, `lost` that another host took."""
        if renewed:
            self.lease_renewals.inc(renewed)
        if lost:
            self.leases_lost.inc(lost)

    def claimed(self, jobs: int, pickup_seconds: Iterable[float]) -> None:
        """A claim took `jobs`; each waited `pickup_seconds` after it was due."""
        self.claim_batch.observe(jobs)
        for seconds in pickup_seconds:
            self.pickup_latency.observe(max(0.0, seconds))

    def host_state(
        self, *, children: int, claimed_ahead: int, backoff_remaining: float | None
    ) -> None:
        """The gauges the loop sets each turn; `backoff_remaining` None when not backing off."""
        self.children.set(children)
        self.claimed_ahead.set(claimed_ahead)
        self.spawn_backoff.set(0 if backoff_remaining is None else 1)
        self.spawn_backoff_remaining.set(backoff_remaining or 0.0)

    def captured(self, result: Any) -> None:
        """A capture job's recorded result: the stories it rendered (each result of a Storybook
        snapshot carries `render_seconds` and `settled`, `ipc.storybook.STORY_RESULT_FIELDS`;
        an uploaded image's carries neither and renders nothing)."""
        items = result.get("snapshots") if isinstance(result, Mapping) else None
        for item in items if isinstance(items, list) else ():
            seconds = item.get("render_seconds") if isinstance(item, Mapping) else None
            if not isinstance(seconds, int | float) or isinstance(seconds, bool):
                continue
            self.stories_rendered.inc()
            self.story_render.observe(seconds)
            if item.get("settled") is False:
                self.stories_unsettled.inc()
