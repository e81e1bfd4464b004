"""The database tables of DESIGN section 4, in SQLAlchemy Core.

One schema serves PostgreSQL (JSON as JSONB, timestamps with time zone) and SQLite (JSON as
text, timestamps as naive UTC text that `UtcDateTime` turns back into aware datetimes). The
partial indexes are the ones the claim and rescue statements of `supervisor.db.queue` use.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal, get_args

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    DateTime,
    Dialect,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    TypeDecorator,
    UniqueConstraint,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB

from ipc.build_view import BuildSource
from ipc.diff_settings import (
    DEFAULT_BUDGET_PIXELS,
    DEFAULT_COUNT_AA,
    DEFAULT_METRIC,
    DEFAULT_THRESHOLD,
)

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)


class UtcDateTime(TypeDecorator[datetime]):
    """Aware UTC datetimes on both databases (SQLite keeps no zone, so it stores naive UTC)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        moment = datetime.fromisoformat(value) if isinstance(value, str) else value
        assert isinstance(moment, datetime)
        return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


#: Integer keys: BIGINT on PostgreSQL, INTEGER on SQLite (so it aliases the rowid).
Key = BigInteger().with_variant(Integer(), "sqlite")
#: JSON documents: JSONB on PostgreSQL.
Document = JSON().with_variant(JSONB(), "postgresql")

#: The states of DESIGN sections 3 and 4, each a closed type and the tuple its CHECK allows.
JobStatus = Literal["queued", "running", "completed", "failed", "cancelled"]
ShardStatus = Literal["queued", "running", "completed", "failed", "cancelled"]
BuildStatus = Literal["pending", "capturing", "passed", "changed", "failed", "cancelled"]
SnapshotStatus = Literal["new", "unchanged", "changed", "failed"]
#: A person's decision on a snapshot, and a changed build's review state (DESIGN section 4).
Decision = Literal["accepted", "rejected"]
ReviewState = Literal["pending", "accepted", "rejected"]
JOB_STATES: tuple[JobStatus, ...] = get_args(JobStatus)
SHARD_STATES: tuple[ShardStatus, ...] = get_args(ShardStatus)
BUILD_STATES: tuple[BuildStatus, ...] = get_args(BuildStatus)
SNAPSHOT_STATES: tuple[SnapshotStatus, ...] = get_args(SnapshotStatus)
DECISIONS: tuple[Decision, ...] = get_args(Decision)
REVIEW_STATES: tuple[ReviewState, ...] = get_args(ReviewState)
BUILD_SOURCES: tuple[BuildSource, ...] = get_args(BuildSource)


def _one_of(column: str, states: tuple[str, ...]) -> CheckConstraint:
    allowed = ", ".join(f"'{state}'" for state in states)
    return CheckConstraint(f"{column} IN ({allowed})", name=f"{column}_known")


projects = Table(
    "projects",
    metadata,
    Column("id", Key, primary_key=True),
    Column("name", String(200), nullable=False, unique=True),
    Column("baseline_branch", Text, nullable=False, server_default="main"),
    # Diff settings, stored per project so thresholds mean the same on every host.
    Column("metric", String(10), nullable=False, server_default=DEFAULT_METRIC),
    Column("threshold", Float, nullable=False, server_default=str(DEFAULT_THRESHOLD)),
    Column("count_aa", Boolean, nullable=False, server_default=text(str(DEFAULT_COUNT_AA).lower())),
    Column("budget_pixels", Integer, nullable=False, server_default=str(DEFAULT_BUDGET_PIXELS)),
    # The finer pass where both images are flat; NULL: off, counts are pixelmatch's exactly.
    Column("flat_threshold", Float),
    # Whether a change in a snapshot whose shots never settled (unstable) makes the build
    # `changed`; false: such changes are shown, and the build passes if nothing else changed.
    Column("unstable_fails", Boolean, nullable=False, server_default=text("true")),
    # Whether the project's webhooks may reach loopback and private addresses
    # (`ipc.webhook_target`); link-local and cloud metadata never.
    Column("webhook_allow_private", Boolean, nullable=False, server_default=text("false")),
    # Whether a build on the baseline branch is accepted when it ends (its snapshots become the
    # baselines); false: such builds wait for a review like any other branch's.
    Column("auto_accept", Boolean, nullable=False, server_default=text("true")),
    Column("created_at", UtcDateTime, nullable=False, server_default=text("CURRENT_TIMESTAMP")),
)

webhooks = Table(
    "webhooks",
    metadata,
    Column("id", Key, primary_key=True),
    Column("project_id", Key, ForeignKey("projects.id"), nullable=False),
    # Where a build's end is POSTed (`supervisor.builds.notify`): http or https, with a host.
    Column("url", Text, nullable=False),
    # Signs each body (HMAC-SHA256, `X-Storyshelf-Signature`) when set.
    Column("secret", Text),
    Column("created_at", UtcDateTime, nullable=False, server_default=text("CURRENT_TIMESTAMP")),
    UniqueConstraint("project_id", "url"),
)

builds = Table(
    "builds",
    metadata,
    Column("id", Key, primary_key=True),
    Column("project_id", Key, ForeignKey("projects.id"), nullable=False, index=True),
    Column("branch", Text, nullable=False),
    Column("commit", String(64)),
    Column("status", String(12), nullable=False, server_default="pending"),
    Column("source", String(12), nullable=False, server_default="images"),
    # A Storybook build's stored files (`ipc.storybook.StorybookRef`), and what its plan left
    # out (`{"skipped": [SkippedStory], "docs": int}`) once it has run.
    Column("storybook", Document),
    Column("plan", Document),
    Column("new", Integer, nullable=False, server_default="0"),
    Column("unchanged", Integer, nullable=False, server_default="0"),
    Column("changed", Integer, nullable=False, server_default="0"),
    Column("failed", Integer, nullable=False, server_default="0"),
    # Set when a build on the baseline branch ends: its snapshots become baselines.
    Column("accepted_at", UtcDateTime),
    # A changed (or reviewed) build's review state, kept by `supervisor.review.decisions` in
    # the transaction that records each decision; NULL for a build nobody needs to review.
    Column("review", String(12)),
    # Where its published report opens (`store.where` of its `index.html`); None until the
    # build's `publish` job has written it.
    Column("report_url", Text),
    Column("created_at", UtcDateTime, nullable=False, server_default=text("CURRENT_TIMESTAMP")),
    # When it left `pending` (its plan or its first capture job began); NULL until then, for a
    # build cancelled while pending, and for builds from before migration 0013.
    Column("started_at", UtcDateTime),
    Column("finished_at", UtcDateTime),
    Column("error", Text),
    _one_of("status", BUILD_STATES),
    _one_of("review", REVIEW_STATES),
)

capture_shards = Table(
    "capture_shards",
    metadata,
    Column("id", Key, primary_key=True),
    Column("build_id", Key, ForeignKey("builds.id"), nullable=False),
    Column("index", Integer, nullable=False),
    Column("status", String(12), nullable=False, server_default="queued"),
    Column("error", Text),
    UniqueConstraint("build_id", "index"),
    _one_of("status", SHARD_STATES),
)

capture_attempts = Table(
    "capture_attempts",
    metadata,
    Column("id", Key, primary_key=True),
    Column("build_id", Key, ForeignKey("builds.id"), nullable=False, index=True),
    Column("status", String(12), nullable=False, server_default="running"),
    Column("error", Text),
    Column("summary", Document),
    Column("started_at", UtcDateTime, nullable=False, server_default=text("CURRENT_TIMESTAMP")),
    Column("finished_at", UtcDateTime),
)

snapshots = Table(
    "snapshots",
    metadata,
    Column("id", Key, primary_key=True),
    Column("build_id", Key, ForeignKey("builds.id"), nullable=False),
    Column("shard_id", Key, ForeignKey("capture_shards.id"), nullable=False, index=True),
    Column("name", Text, nullable=False),
    # None for a story that failed before it gave an image.
    Column("image_path", Text),
    Column("image_sha256", String(64)),
    Column("width", Integer),
    Column("height", Integer),
    Column("baseline_id", Key, ForeignKey("snapshots.id"), index=True),
    Column("status", String(12), nullable=False),
    # The settings its comparison used (a story's own folded in); NULL when nothing was
    # compared (a new or failed snapshot). A NULL flat_threshold beside a metric: the pass was off.
    Column("metric", String(10)),
    Column("threshold", Float),
    Column("flat_threshold", Float),
    Column("count_aa", Boolean),
    Column("diff_pixels", BigInteger),
    Column("diff_ratio", Float),
    Column("diff_path", Text),
    Column("error", Text),
    # A Storybook snapshot's story: its id, title and name, and its mode when it has several.
    Column("story_id", Text),
    Column("mode", Text),
    Column("title", Text),
    Column("story", Text),
    # False when its story never gave two equal shots in a row (the last one is kept).
    Column("settled", Boolean),
    # The box around the pixels that counted, [left, top, width, height], for a changed one.
    Column("diff_box", Document),
    # A story capture's ignore regions in its image, [[left, top, width, height], ...]: their
    # pixels are not compared, in this snapshot nor in any that takes it as its baseline.
    Column("ignore_boxes", Document),
    UniqueConstraint("build_id", "name"),
    _one_of("status", SNAPSHOT_STATES),
)

baselines = Table(
    "baselines",
    metadata,
    Column("project_id", Key, ForeignKey("projects.id"), nullable=False),
    Column("name", Text, nullable=False),
    # The accepted snapshot of that name later builds compare with, and the build it came from.
    Column("snapshot_id", Key, ForeignKey("snapshots.id"), nullable=False, index=True),
    Column("build_id", Key, ForeignKey("builds.id"), nullable=False),
    # The key is the lookup: a new build reads its baselines by (project, name), whatever the
    # number of builds before it.
    PrimaryKeyConstraint("project_id", "name"),
)

build_baselines = Table(
    "build_baselines",
    metadata,
    # A Storybook build's baselines as they were when it was created (its snapshots' names are
    # known only after its plan): the project's `baselines` rows of that moment.
    Column("build_id", Key, ForeignKey("builds.id"), nullable=False),
    Column("name", Text, nullable=False),
    Column("snapshot_id", Key, ForeignKey("snapshots.id"), nullable=False, index=True),
    PrimaryKeyConstraint("build_id", "name"),
)

branch_baselines = Table(
    "branch_baselines",
    metadata,
    Column("project_id", Key, ForeignKey("projects.id"), nullable=False),
    Column("branch", Text, nullable=False),
    Column("name", Text, nullable=False),
    # The snapshot accepted on that branch, compared with before the baseline branch's.
    Column("snapshot_id", Key, ForeignKey("snapshots.id"), nullable=False, index=True),
    Column("build_id", Key, ForeignKey("builds.id"), nullable=False),
    PrimaryKeyConstraint("project_id", "branch", "name"),
)

reviews = Table(
    "reviews",
    metadata,
    Column("id", Key, primary_key=True),
    Column("build_id", Key, ForeignKey("builds.id"), nullable=False, index=True),
    Column("snapshot_id", Key, ForeignKey("snapshots.id"), nullable=False, index=True),
    Column("decision", String(12), nullable=False),
    Column("by", Text, nullable=False),
    Column("comment", Text),
    Column("created_at", UtcDateTime, nullable=False, server_default=text("CURRENT_TIMESTAMP")),
    _one_of("decision", DECISIONS),
)

jobs = Table(
    "jobs",
    metadata,
    Column("id", Key, primary_key=True),
    Column("kind", String(50), nullable=False),
    Column("status", String(12), nullable=False, server_default="queued"),
    Column("build_id", Key, ForeignKey("builds.id")),
    Column("shard_id", Key, ForeignKey("capture_shards.id")),
    Column("data", Document, nullable=False),
    Column("attempt", Integer, nullable=False, server_default="0"),
    Column("max_attempts", Integer, nullable=False, server_default="5"),
    Column("crashes", Integer, nullable=False, server_default="0"),
    # Why each crash happened ("SIGSEGV", "SIGKILL (out of memory)"), so the final error names it.
    Column("crash_causes", Document),
    Column("run_at", UtcDateTime, nullable=False, server_default=text("CURRENT_TIMESTAMP")),
    Column("locked_by", String(200)),
    Column("child_pid", Integer),
    Column("lease_expires_at", UtcDateTime),
    Column("cancel_requested", Boolean, nullable=False, server_default=text("false")),
    Column("error", Text),
    Column("created_at", UtcDateTime, nullable=False, server_default=text("CURRENT_TIMESTAMP")),
    Column("finished_at", UtcDateTime),
    _one_of("status", JOB_STATES),
    # The claim reads queued jobs in run_at order: only queued rows are in this index.
    Index(
        "ix_jobs_queued_run_at",
        "run_at",
        "id",
        postgresql_where=text("status = 'queued'"),
        sqlite_where=text("status = 'queued'"),
    ),
    # The rescue reads running jobs whose lease ran out.
    Index(
        "ix_jobs_running_lease",
        "lease_expires_at",
        postgresql_where=text("status = 'running'"),
        sqlite_where=text("status = 'running'"),
    ),
    Index("ix_jobs_build_id", "build_id"),
)
