"""A build and its snapshots as people read them: the contract between the parent, which reads
them from the database, and the child that publishes their report.

`BuildView` and `SnapshotView` are plain data. The parent makes them (`supervisor.builds.view`)
for `build ID` and its JSON, and sends them to a `publish` job's child in their wire form
(`build_to_wire`, `snapshot_rows`): a build's snapshots go as rows of values in the fields'
order, since a report of ten thousand snapshots must fit in one frame, and a map per row would
repeat every field's name ten thousand times.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any, Literal

from ipc.capture import SETTING_FIELDS

#: Where a build's snapshots come from: screenshots uploaded, or a Storybook the host renders.
BuildSource = Literal["images", "storybook"]
#: A report's groups, in the order it shows them: what needs a look first.
REPORT_ORDER = ("changed", "failed", "new", "unchanged")


@dataclass(frozen=True)
class SnapshotView:
    """One snapshot's result, with its baseline's image and build for side-by-side views."""

    id: int
    name: str
    status: str
    #: None for a story that failed before giving an image.
    image_path: str | None
    image_sha256: str | None
    width: int | None
    height: int | None
    baseline_id: int | None
    baseline_image: str | None
    #: The accepted build the baseline came from (fixed when this snapshot's build was created).
    baseline_build_id: int | None
    #: The diff settings it was judged with; all None for a failed snapshot.
    metric: str | None
    threshold: float | None
    flat_threshold: float | None
    count_aa: bool | None
    diff_pixels: int | None
    diff_ratio: float | None
    diff_path: str | None
    #: Around the pixels that counted: left, top, width, height (of the union of both images).
    diff_box: tuple[int, int, int, int] | None
    error: str | None
    #: A Storybook snapshot's story (all None for an uploaded image).
    story_id: str | None = None
    title: str | None = None
    story: str | None = None
    mode: str | None = None
    #: False when the story never gave two equal shots in a row.
    settled: bool | None = None
    #: Its latest review decision ("accepted", "rejected"); None until someone decides.
    review: str | None = None

    @property
    def label(self) -> str:
        """How people know the snapshot: the story's title and name ("Example/Button: Primary
        [320]"), or the uploaded image's name."""
        if self.title is None or self.story is None:
            return self.name
        return f"{self.title}: {self.story}" + (f" [{self.mode}]" if self.mode else "")

    @property
    def unstable(self) -> bool:
        """Whether its story never gave two equal shots in a row: its pixels may be flake,
        not change."""
        return self.settled is False

    @property
    def settings(self) -> dict[str, Any] | None:
        """The diff settings it was judged with; None for a failed snapshot."""
        if self.metric is None:
            return None
        return {key: getattr(self, key) for key in SETTING_FIELDS}

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "story_id": self.story_id,
            "title": self.title,
            "story": self.story,
            "mode": self.mode,
            "settled": self.settled,
            "unstable": self.unstable,
            "image_path": self.image_path,
            "image_sha256": self.image_sha256,
            "diff_pixels": self.diff_pixels,
            "diff_ratio": self.diff_ratio,
            "diff_path": self.diff_path,
            "diff_box": list(self.diff_box) if self.diff_box else None,
            "settings": self.settings,
            "baseline_id": self.baseline_id,
            "baseline_build_id": self.baseline_build_id,
            "error": self.error,
            "review": self.review,
        }


@dataclass(frozen=True)
class BuildView:
    """A build's state and counts, and its snapshots in name order."""

    id: int
    project: str
    branch: str
    commit: str | None
    status: str
    counts: dict[str, int]
    created_at: datetime
    finished_at: datetime | None
    report_url: str | None
    error: str | None
    snapshots: tuple[SnapshotView, ...]
    source: BuildSource = "images"
    #: A Storybook build's plan once it has run: the stories it left out, and why.
    skipped: tuple[dict[str, str], ...] = ()
    #: Names its baselines had that it has not (a story deleted or renamed), once it ended.
    removed: tuple[str, ...] = ()
    #: Its unstable snapshots' names (their shots never settled), by name.
    unstable: tuple[str, ...] = ()
    #: Whether a change in an unstable snapshot fails the gate (its project's setting).
    unstable_fails: bool = True
    #: Its review state ("pending", "accepted", "rejected"); None when nobody needs to review it.
    review: str | None = None
    #: When it left `pending` (its plan or first capture job began); None until then, for a
    #: build cancelled while pending, and for one from before the column (migration 0013).
    started_at: datetime | None = None

    @property
    def ended(self) -> bool:
        """Whether the build has its verdict (and so a report to show)."""
        return self.status not in ("pending", "capturing")

    @property
    def began_at(self) -> datetime | None:
        """When work on it began, which its length counts from: `started_at`, else, for a build
        that ended with a verdict but has none (one from before migration 0013), `created_at`,
        the best that is known; None for a build that never began (cancelled while pending)
        or has not yet."""
        if self.started_at is not None:
            return self.started_at
        return self.created_at if self.ended and self.status != "cancelled" else None

    @property
    def queued_seconds(self) -> float | None:
        """How long it waited in the queue before work began; None when that is not known."""
        if self.started_at is None:
            return None
        return (self.started_at - self.created_at).total_seconds()

    @property
    def took_seconds(self) -> float | None:
        """How long the work took, from when it began to the verdict; None for a build that
        has not ended or never began."""
        began = self.began_at
        if began is None or self.finished_at is None:
            return None
        return (self.finished_at - began).total_seconds()

    @property
    def baseline_builds(self) -> tuple[int, ...]:
        """The builds its snapshots' baselines came from, oldest first."""
        found = {s.baseline_build_id for s in self.snapshots if s.baseline_build_id is not None}
        return tuple(sorted(found))

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "project": self.project,
            "branch": self.branch,
            "commit": self.commit,
            "status": self.status,
            "review": self.review,
            "source": self.source,
            "counts": dict(self.counts),
            "created_at": self.created_at.isoformat(),
            "started_at": self.started_at.isoformat() if self.started_at else None,
            "finished_at": self.finished_at.isoformat() if self.finished_at else None,
            "report_url": self.report_url,
            "error": self.error,
            "snapshots": [snapshot.as_json() for snapshot in self.snapshots],
            "skipped": [dict(story) for story in self.skipped],
            "removed": list(self.removed),
            "unstable": list(self.unstable),
            "unstable_fails": self.unstable_fails,
        }


def spoken_duration(seconds: float) -> str:
    """A length of time as people say it: 4.2 s, 3 min 5 s, 2 h 10 min."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {rest} s"
    return f"{minutes // 60} h {minutes % 60} min"


#: The fields of a snapshot row on the wire, in order.
SNAPSHOT_FIELDS = tuple(field.name for field in fields(SnapshotView))
#: Where `diff_box` sits among them (a list on the wire and in a JSON column, a tuple here).
_BOX = SNAPSHOT_FIELDS.index("diff_box")


def snapshot_from_values(values: Sequence[Any]) -> SnapshotView:
    """The snapshot whose field values, in `SNAPSHOT_FIELDS` order, are `values` (a database
    row or a wire row): no lookup by name per field, which a build of thousands would pay."""
    row = list(values)
    box = row[_BOX]
    row[_BOX] = tuple(box) if box else None
    return SnapshotView(*row)


def snapshot_rows(snapshots: Iterable[SnapshotView]) -> Iterator[list[Any]]:
    """`snapshots` as wire rows, one at a time (`snapshot_from_values` reads them back)."""
    for snapshot in snapshots:
        row = [getattr(snapshot, name) for name in SNAPSHOT_FIELDS]
        if row[_BOX] is not None:
            row[_BOX] = list(row[_BOX])
        yield row


#: The fields of a build on the wire: all but its snapshots, which travel as rows.
_BUILD_FIELDS = tuple(field.name for field in fields(BuildView) if field.name != "snapshots")
_MOMENTS = ("created_at", "started_at", "finished_at")


def build_to_wire(view: BuildView) -> dict[str, Any]:
    """`view` without its snapshots, as msgpack carries it (moments as ISO text)."""
    wire = {name: getattr(view, name) for name in _BUILD_FIELDS}
    for name in _MOMENTS:
        wire[name] = wire[name].isoformat() if wire[name] is not None else None
    wire["skipped"] = [dict(story) for story in view.skipped]
    wire["removed"] = list(view.removed)
    wire["unstable"] = list(view.unstable)
    return wire


def build_from_wire(wire: dict[str, Any]) -> BuildView:
    """The `BuildView` of `build_to_wire`, without snapshots (`KeyError`/`ValueError` when
    `wire` is not one)."""
    values = {name: wire[name] for name in _BUILD_FIELDS}
    for name in _MOMENTS:
        values[name] = datetime.fromisoformat(values[name]) if values[name] is not None else None
    values["skipped"] = tuple(values["skipped"])
    values["removed"] = tuple(values["removed"])
    values["unstable"] = tuple(values["unstable"])
    return BuildView(**values, snapshots=())
