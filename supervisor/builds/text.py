"""A build as `storyshelf build ID` prints it for a person: what needs a look first.

The snapshots that changed, are unstable, failed or are new come first, a row each and in that
order (`LISTED`); the unchanged are one line that counts them, since a build of a thousand
stories is mostly those and the rows that matter would scroll away. Rows fit the reader's
window (`supervisor.terminal`): a name too long is cut in its middle with an ellipsis. Under a
changed snapshot's row is its diff picture, a path that opens from the current folder (or the
bucket's URL); under a failed one's, its reason, wrapped, once for a run of rows that share it.
A build stopped because its stories all fail with one error (`supervisor.builds.stop`) says
that error once, in its status, and counts the snapshots it did not render.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ipc.artifacts.store import ArtifactStore
from ipc.build_view import BuildView, SnapshotView, spoken_duration
from ipc.storybook import NOT_RENDERED, stopped_by
from supervisor.terminal import NO_LIMIT, cut, openable, wrap

#: The groups listed a row each, in order: what needs a look first. An unstable snapshot is a
#: group of its own whatever it was judged, since its pixels may be flake, not change.
LISTED = ("changed", "unstable", "failed", "new")
#: The narrowest a name column is cut to: a window narrower than the other columns and this
#: much gets rows as wide as that.
NAME_MIN = 5
#: How a fact of the build that wraps continues: under its value, past its label ("status    ").
HANGING = " " * 10
#: How the lines under a snapshot's row (its diff picture or reason) are set in.
DETAIL = "  "


def _group(snapshot: SnapshotView) -> str:
    return "unstable" if snapshot.unstable else snapshot.status


def is_change(snapshot: SnapshotView) -> bool:
    """Whether `snapshot` needs a look: it is listed (`LISTED`), where the unchanged are counted."""
    return _group(snapshot) in LISTED


def changes(snapshots: Iterable[SnapshotView]) -> list[SnapshotView]:
    """The snapshots that need a look, grouped in `LISTED` order, each group in the order given."""
    return sorted(
        (snapshot for snapshot in snapshots if is_change(snapshot)),
        key=lambda snapshot: LISTED.index(_group(snapshot)),
    )


def format_build(
    view: BuildView,
    store: ArtifactStore,
    *,
    publishing: str | None = None,
    width: int = NO_LIMIT,
    changes_only: bool = False,
) -> str:
    """The build's facts, its changes a row each and a count of the rest, in lines of at most
    `width` characters; `publishing`: why its report is not there yet; `changes_only`: without
    the count of the unchanged (`build --changed`)."""
    facts = [
        f"build {view.id}  {view.project} @ {view.branch}"
        + (f" ({view.commit})" if view.commit else ""),
        f"status    {view.status}"
        + (f", review {view.review}" if view.review else "")
        + (f": {view.error}" if view.error else ""),
        "snapshots " + "  ".join(f"{status} {count}" for status, count in view.counts.items()),
        f"created   {view.created_at:%Y-%m-%d %H:%M:%S}",
        *_started(view),
        _finished(view),
        f"baselines {_baselines(view.baseline_builds)}",
        f"report    {_report_line(view, publishing)}",
    ]
    if view.skipped:
        facts.append(f"skipped   {len(view.skipped)} stories opted out")
    if view.unstable:
        counted = "fail the gate" if view.unstable_fails else "are shown, not failing the gate"
        facts.append(
            f"unstable  {len(view.unstable)} snapshots never settled: their changes {counted}"
        )
    lines = [part for fact in facts for part in wrap(fact, width, rest=HANGING)]
    unrendered = sum(1 for snapshot in view.snapshots if snapshot.error == NOT_RENDERED)
    listed = [snapshot for snapshot in changes(view.snapshots) if snapshot.error != NOT_RENDERED]
    if listed:
        table = _table(listed, store, width, stories=view.source == "storybook", said=view.error)
        lines += ["", *table]
    unchanged = len(view.snapshots) - len(listed) - unrendered
    if unrendered:
        lines += ["", f"not rendered {unrendered} {_plural(unrendered)}: the build stopped"]
    if unchanged and not changes_only:
        lines += ["", f"unchanged {unchanged} {_plural(unchanged)}, not listed"]
    notes = [f"skipped   {s['story_id']}: {s['reason']}" for s in view.skipped]
    if notes:
        lines += ["", *(part for note in notes for part in wrap(note, width, rest=HANGING))]
    removed = [
        f"removed   {name} (a baseline this build has no story for)" for name in view.removed
    ]
    if removed:
        lines += ["", *(part for note in removed for part in wrap(note, width, rest=HANGING))]
    return "\n".join(lines)


def _started(view: BuildView) -> list[str]:
    """When work began, with the queue's wait apart; no line for a build that has not begun,
    never did, or began before that was recorded."""
    waited = view.queued_seconds
    if view.started_at is None or waited is None:
        return []
    return [f"started   {view.started_at:%Y-%m-%d %H:%M:%S} (queued {spoken_duration(waited)})"]


def _finished(view: BuildView) -> str:
    if view.finished_at is None:
        return "finished  -"
    took = view.took_seconds
    return f"finished  {view.finished_at:%Y-%m-%d %H:%M:%S}" + (
        "" if took is None else f" (took {spoken_duration(took)})"
    )


def _baselines(builds: tuple[int, ...]) -> str:
    return "from build " + ", ".join(str(build_id) for build_id in builds) if builds else "-"


def _report_line(view: BuildView, publishing: str | None) -> str:
    if view.report_url:
        return openable(view.report_url)
    return (publishing or "not published") if view.ended else "-"


def _plural(count: int) -> str:
    return "snapshot" if count == 1 else "snapshots"


def _table(
    rows: Sequence[SnapshotView],
    store: ArtifactStore,
    width: int,
    *,
    stories: bool,
    said: str | None,
) -> list[str]:
    """The snapshots a row each, a Storybook build's with each story's title and name first;
    under a row, its diff picture or its reason, which rows in a row that fail alike share
    ("these 3: ..."); `said`: the build's error, which names a reason it stopped with."""
    header = ("NAME", "STATUS", "PIXELS", "DIFF %", "FROM BUILD")
    cells = [header, *(_cells(snapshot) for snapshot in rows)]
    if stories:
        cells = [("STORY", *header), *((s.label, *c) for s, c in zip(rows, cells[1:], strict=True))]
    names = 2 if stories else 1
    widths = _widths(cells, names, width)
    lines = [_row(cells[0], widths, names)]
    alike = 1
    for index, (snapshot, row) in enumerate(zip(rows, cells[1:], strict=True)):
        lines.append(_row(row, widths, names))
        following = rows[index + 1] if index + 1 < len(rows) else None
        if snapshot.error and following is not None and following.error == snapshot.error:
            alike += 1
            continue
        lines += _detail(snapshot, store, width, alike=alike, stopped_by=stopped_by(said))
        alike = 1
    return lines


def _row(cells: tuple[str, ...], widths: list[int], names: int) -> str:
    """A line of the table: its names cut to their widths, the status after them, the numbers
    to the right."""
    return "  ".join(
        cut(cell, size, middle=True).ljust(size) if column < names
        else cell.ljust(size) if column == names
        else cell.rjust(size)
        for column, (cell, size) in enumerate(zip(cells, widths, strict=True))
    ).rstrip()  # fmt: skip


def _widths(cells: list[tuple[str, ...]], names: int, width: int) -> list[int]:
    """Each column's width: the widest of its cells, the first `names` columns (which may be
    cut) narrowed to share what the others leave of `width`, each its fair part of it."""
    natural = [max(len(row[column]) for row in cells) for column in range(len(cells[0]))]
    if width <= NO_LIMIT:
        return natural
    room = width - sum(natural[names:]) - 2 * (len(natural) - 1)
    sizes = natural[:names]
    # The narrowest first, so that what one does not need is left to the others.
    for placed, column in enumerate(sorted(range(names), key=natural.__getitem__)):
        sizes[column] = max(min(natural[column], room // (names - placed)), NAME_MIN)
        room -= sizes[column]
    return sizes + natural[names:]


def _cells(snapshot: SnapshotView) -> tuple[str, ...]:
    return (
        snapshot.name,
        ", ".join(
            part
            for part in (snapshot.status, snapshot.unstable and "unstable", snapshot.review)
            if part
        ),
        "-" if snapshot.diff_pixels is None else str(snapshot.diff_pixels),
        "-" if snapshot.diff_ratio is None else f"{snapshot.diff_ratio * 100:.2f}",
        "-" if snapshot.baseline_build_id is None else str(snapshot.baseline_build_id),
    )


def _detail(
    snapshot: SnapshotView,
    store: ArtifactStore,
    width: int,
    *,
    alike: int = 1,
    stopped_by: str | None = None,
) -> list[str]:
    """The line under a snapshot's row: its reason (wrapped; of the `alike` rows it ends, and
    not said again when it is the one the build stopped with), or its diff picture (whole)."""
    if snapshot.error:
        reason = " ".join(snapshot.error.split())
        if snapshot.error == stopped_by:
            reason = "the error the build stopped with, above"
        if alike > 1:
            reason = f"these {alike}: {reason}"
        return wrap(reason, width, first=DETAIL, rest=DETAIL)
    if snapshot.diff_path:
        return [DETAIL + openable(store.where(snapshot.diff_path))]
    return []
