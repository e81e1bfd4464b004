"""Projects and their diff settings, and `python -m supervisor project`.

The diff settings live on the project row, not on the hosts, so every host that captures a
project's builds compares with the same metric and threshold, and a team changes them in one
place. A project is created on first use (an upload or this command) with the defaults.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal, cast

import structlog
from sqlalchemy import Connection, select, update

from ipc.diff_settings import (
    DEFAULT_BUDGET_PIXELS,
    DEFAULT_COUNT_AA,
    DEFAULT_FLAT_THRESHOLD,
    DEFAULT_METRIC,
    DEFAULT_THRESHOLD,
    METRICS,
    Metric,
)
from supervisor.db.connection import upsert
from supervisor.db.tables import projects

log = structlog.get_logger(__name__)


#: A new project's diff settings, written explicitly so they come from `ipc.diff_settings` alone.
DEFAULTS: dict[str, Any] = {
    "metric": DEFAULT_METRIC,
    "threshold": DEFAULT_THRESHOLD,
    "count_aa": DEFAULT_COUNT_AA,
    "budget_pixels": DEFAULT_BUDGET_PIXELS,
    "flat_threshold": DEFAULT_FLAT_THRESHOLD,
    "unstable_fails": True,
    "webhook_allow_private": False,
    "auto_accept": True,
}

#: What `--flat-threshold` takes to turn the finer pass off (stored as NULL).
OFF: Literal["off"] = "off"


class ProjectError(ValueError):
    """A project setting that cannot be stored (the message says which and why)."""


@dataclass(frozen=True)
class ProjectSettings:
    """A project's row: what the diff of each of its builds is tuned by."""

    id: int
    name: str
    baseline_branch: str
    metric: Metric
    threshold: float
    count_aa: bool
    budget_pixels: int
    #: The finer pass where both images are flat; None: off.
    flat_threshold: float | None
    #: Whether a change in an unstable snapshot (its shots never settled) fails the gate.
    unstable_fails: bool = True
    #: Whether its webhooks may reach loopback and private addresses (`ipc.webhook_target`).
    webhook_allow_private: bool = False
    #: Whether a build on the baseline branch is accepted when it ends.
    auto_accept: bool = True


@dataclass(frozen=True)
class SettingsChange:
    """The settings a `project` command asked to change; None leaves one as it is (so the
    finer pass is turned off with `OFF`, not None)."""

    metric: Metric | None = None
    threshold: float | None = None
    count_aa: bool | None = None
    budget_pixels: int | None = None
    flat_threshold: float | Literal["off"] | None = None
    baseline_branch: str | None = None
    unstable_fails: bool | None = None
    webhook_allow_private: bool | None = None
    auto_accept: bool | None = None

    def values(self) -> dict[str, Any]:
        """The columns to write: `OFF` is stored as NULL."""
        given = {key: value for key, value in asdict(self).items() if value is not None}
        return {key: None if value == OFF else value for key, value in given.items()}


def ensure_project(conn: Connection, name: str) -> int:
    """The id of project `name`, created with the default settings if new.

    The insert skips a name that exists, so two uploads creating one project at the same time
    both get its id instead of one failing on the unique name.
    """
    if not name.strip():
        raise ProjectError("a project name must not be empty")
    found = _project_id(conn, name)
    if found is not None:
        return found
    conn.execute(upsert(conn, projects).values(name=name, **DEFAULTS).on_conflict_do_nothing())
    created = _project_id(conn, name)
    assert created is not None, "the project exists after the insert"
    log.info("project created", project=name, project_id=created)
    return created


def _project_id(conn: Connection, name: str) -> int | None:
    found: int | None = conn.execute(
        select(projects.c.id).where(projects.c.name == name)
    ).scalar_one_or_none()
    return found


def load_settings(conn: Connection, project_id: int) -> ProjectSettings:
    row = conn.execute(select(projects).where(projects.c.id == project_id)).one()._mapping
    return ProjectSettings(
        id=row["id"],
        name=row["name"],
        baseline_branch=row["baseline_branch"],
        metric=cast(Metric, row["metric"]),
        threshold=float(row["threshold"]),
        count_aa=bool(row["count_aa"]),
        budget_pixels=int(row["budget_pixels"]),
        flat_threshold=None if row["flat_threshold"] is None else float(row["flat_threshold"]),
        unstable_fails=bool(row["unstable_fails"]),
        webhook_allow_private=bool(row["webhook_allow_private"]),
        auto_accept=bool(row["auto_accept"]),
    )


def change_settings(conn: Connection, name: str, change: SettingsChange) -> ProjectSettings:
    """Apply `change` to project `name` (created if new) and return its settings after."""
    _check(change)
    project_id = ensure_project(conn, name)
    values = change.values()
    if values:
        conn.execute(update(projects).where(projects.c.id == project_id).values(**values))
        log.info("project settings changed", project=name, **values)
    return load_settings(conn, project_id)


def _check(change: SettingsChange) -> None:
    if change.metric is not None and change.metric not in METRICS:
        raise ProjectError(f"metric must be one of {', '.join(METRICS)}, not {change.metric!r}")
    if change.threshold is not None and not 0.0 <= change.threshold <= 1.0:
        raise ProjectError(f"threshold must be between 0 and 1, not {change.threshold}")
    flat = change.flat_threshold
    if flat is not None and flat != OFF and not 0.0 <= flat <= 1.0:
        raise ProjectError(f"flat threshold must be between 0 and 1 or off, not {flat}")
    if change.budget_pixels is not None and change.budget_pixels < 0:
        raise ProjectError(f"budget must be 0 or more pixels, not {change.budget_pixels}")
    if change.baseline_branch is not None and not change.baseline_branch.strip():
        raise ProjectError("the baseline branch must not be empty")
