"""A build as people and CI read it, and `python -m supervisor build ID`.

One reading of a build and its snapshots (`load_build`) serves the command's table, its JSON
(which CI scripts parse, so its keys are a contract) and the HTML report.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Row, Select, case, select

from ipc.artifacts.store import ArtifactStore
from ipc.capture import SETTING_FIELDS
from supervisor.db.tables import BuildSource, build_baselines, builds, projects, snapshots


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

    @property
    def label(self) -> str:
        """How people know the snapshot: the story's title and name ("Example/Button: Primary
        [320]"), or the uploaded image's name."""
        if self.title is None or self.story is None:
            return self.name
        return f"{self.title}: {self.story}" + (f" [{self.mode}]" if self.mode else "")

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
    report_path: str | None
    error: str | None
    snapshots: tuple[SnapshotView, ...]
    source: BuildSource = "images"
    #: A Storybook build's plan once it has run: the stories it left out, and why.
    skipped: tuple[dict[str, str], ...] = ()
    #: Names its baselines had that it has not (a story deleted or renamed), once it ended.
    removed: tuple[str, ...] = ()

    @property
    def ended(self) -> bool:
        """Whether the build has its verdict (and so a report to show)."""
        return self.status not in ("pending", "capturing")

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
            "source": self.source,
            "counts": dict(self.counts),
            "created_at": self.created_at.isoformat(),
            "finished_at": self.finished_at.isoformat() if self.finished_at else None,
            "report_path": self.report_path,
            "error": self.error,
            "snapshots": [snapshot.as_json() for snapshot in self.snapshots],
            "skipped": [dict(story) for story in self.skipped],
            "removed": list(self.removed),
        }


def load_build(conn: Connection, build_id: int, *, with_snapshots: bool = True) -> BuildView | None:
    """Build `build_id` with its snapshots; None when there is no such build.

    Without its snapshots (`with_snapshots=False`) the view is for a reader that streams them
    (`report_snapshots`, `baseline_builds`): its own `snapshots` and `baseline_builds` are then
    empty."""
    row = conn.execute(
        select(builds, projects.c.name.label("project"))
        .join(projects, projects.c.id == builds.c.project_id)
        .where(builds.c.id == build_id)
    ).one_or_none()
    if row is None:
        return None
    m = row._mapping
    plan = m["plan"] if isinstance(m["plan"], dict) else {}
    return BuildView(
        id=m["id"],
        project=m["project"],
        branch=m["branch"],
        commit=m["commit"],
        status=m["status"],
        counts={status: m[status] for status in ("new", "unchanged", "changed", "failed")},
        created_at=m["created_at"],
        finished_at=m["finished_at"],
        report_path=m["report_path"],
        error=m["error"],
        snapshots=_load_snapshots(conn, build_id) if with_snapshots else (),
        source=m["source"],
        skipped=tuple(plan.get("skipped", ())),
        removed=_removed(conn, build_id, plan) if m["finished_at"] is not None else (),
    )


def _removed(conn: Connection, build_id: int, plan: dict[str, Any]) -> tuple[str, ...]:
    """The names a Storybook build's frozen baselines have and its snapshots lack, less the
    stories its plan left out on purpose (an opted-out story is not a removed one)."""
    skipped = {story["story_id"] for story in plan.get("skipped", ())}
    captured = select(snapshots.c.name).where(snapshots.c.build_id == build_id)
    names = conn.execute(
        select(build_baselines.c.name)
        .where(build_baselines.c.build_id == build_id, build_baselines.c.name.not_in(captured))
        .order_by(build_baselines.c.name)
    ).scalars()
    return tuple(name for name in names if name.split(" [", 1)[0] not in skipped)


#: A report's groups, in the order it shows them: what needs a look first.
REPORT_ORDER = ("changed", "failed", "new", "unchanged")
#: Snapshot rows read at a time when they are streamed.
STREAM_ROWS = 500


def _load_snapshots(conn: Connection, build_id: int) -> tuple[SnapshotView, ...]:
    rows = conn.execute(_snapshots_query(build_id).order_by(snapshots.c.name))
    return tuple(_snapshot_view(row) for row in rows)


def report_snapshots(conn: Connection, build_id: int) -> Iterator[SnapshotView]:
    """Build `build_id`'s snapshots in the order its report shows them (`REPORT_ORDER`, then by
    name), read `STREAM_ROWS` at a time, so that writing the report of a build of any size
    holds a few hundred of them, not all."""
    order = case(
        {status: index for index, status in enumerate(REPORT_ORDER)}, value=snapshots.c.status
    )
    query = _snapshots_query(build_id).order_by(order, snapshots.c.name)
    rows = conn.execution_options(yield_per=STREAM_ROWS).execute(query)
    for row in rows:
        yield _snapshot_view(row)


def baseline_builds(conn: Connection, build_id: int) -> tuple[int, ...]:
    """The builds build `build_id`'s baselines came from, oldest first (`BuildView`'s, read
    without its snapshots)."""
    baseline = snapshots.alias("baseline")
    found = conn.execute(
        select(baseline.c.build_id)
        .distinct()
        .join(snapshots, snapshots.c.baseline_id == baseline.c.id)
        .where(snapshots.c.build_id == build_id)
        .order_by(baseline.c.build_id)
    ).scalars()
    return tuple(found)


def _snapshots_query(build_id: int) -> Select[Any]:
    """A build's snapshots, a column per field of `SnapshotView`, in the fields' order."""
    baseline = snapshots.alias("baseline")
    joined = {"baseline_image": baseline.c.image_path, "baseline_build_id": baseline.c.build_id}
    columns = [
        joined[name].label(name) if name in joined else snapshots.c[name] for name in _FIELDS
    ]
    return (
        select(*columns)
        .outerjoin(baseline, baseline.c.id == snapshots.c.baseline_id)
        .where(snapshots.c.build_id == build_id)
    )


_FIELDS = [field.name for field in fields(SnapshotView)]
#: Where `diff_box` sits among them (a JSON list in the row, a tuple in the view).
_BOX = _FIELDS.index("diff_box")


def _snapshot_view(row: Row[Any]) -> SnapshotView:
    """One row of `_snapshots_query`: its columns are the view's fields, in order, so that a
    build of thousands of snapshots is read without a lookup by name per field."""
    values = list(row)
    box = values[_BOX]
    values[_BOX] = tuple(box) if box else None
    return SnapshotView(*values)


def format_build(view: BuildView, store: ArtifactStore) -> str:
    """The build as an aligned, readable table, with where its report is and where its
    baselines came from."""
    counts = "  ".join(f"{status} {count}" for status, count in view.counts.items())
    sources = ", ".join(str(build_id) for build_id in view.baseline_builds)
    lines = [
        f"build {view.id}  {view.project} @ {view.branch}"
        + (f" ({view.commit})" if view.commit else ""),
        f"status    {view.status}" + (f": {view.error}" if view.error else ""),
        f"snapshots {counts}",
        f"created   {view.created_at:%Y-%m-%d %H:%M:%S}",
        f"finished  {view.finished_at:%Y-%m-%d %H:%M:%S}" if view.finished_at else "finished  -",
        f"baselines {'from build ' + sources if sources else '-'}",
        f"report    {_report_line(view, store)}",
    ]
    if view.skipped:
        lines.append(f"skipped   {len(view.skipped)} stories opted out")
    if view.snapshots:
        lines += ["", *_table(view.snapshots, stories=view.source == "storybook")]
    if view.skipped:
        lines += ["", *(f"skipped   {s['story_id']}: {s['reason']}" for s in view.skipped)]
    if view.removed:
        lines += [
            "",
            *(
                f"removed   {name} (a baseline this build has no story for)"
                for name in view.removed
            ),
        ]
    return "\n".join(lines)


def _report_line(view: BuildView, store: ArtifactStore) -> str:
    if view.report_path:
        return store.where(view.report_path)
    return "not written: see the log for why" if view.ended else "-"


def _table(rows: tuple[SnapshotView, ...], *, stories: bool) -> list[str]:
    """The snapshots, a line each; a Storybook build's with each story's title and name first."""
    header = ("NAME", "STATUS", "DIFF PIXELS", "DIFF %", "BASELINE", "FROM BUILD", "DIFF / ERROR")
    cells = [header, *(_cells(snapshot) for snapshot in rows)]
    if stories:
        cells = [("STORY", *header), *((s.label, *c) for s, c in zip(rows, cells[1:], strict=True))]
    widths = [max(len(row[column]) for row in cells) for column in range(len(cells[0]) - 1)]
    right = {2, 3, 4, 5} if not stories else {3, 4, 5, 6}
    return [
        "  ".join(
            [
                cell.rjust(width) if column in right else cell.ljust(width)
                for column, (cell, width) in enumerate(zip(row[:-1], widths, strict=True))
            ]
            + [row[-1]]
        ).rstrip()
        for row in cells
    ]


def _cells(snapshot: SnapshotView) -> tuple[str, ...]:
    return (
        snapshot.name,
        snapshot.status,
        "-" if snapshot.diff_pixels is None else str(snapshot.diff_pixels),
        "-" if snapshot.diff_ratio is None else f"{snapshot.diff_ratio * 100:.2f}",
        "-" if snapshot.baseline_id is None else str(snapshot.baseline_id),
        "-" if snapshot.baseline_build_id is None else str(snapshot.baseline_build_id),
        (snapshot.error or snapshot.diff_path or "")
        + ("  (never settled: the last of its shots is kept)" if snapshot.settled is False else ""),
    )
