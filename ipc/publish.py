"""Where a build's published report lives, and what a `publish` job sends and returns.

A report is a folder, `reports/<project>/<build>/`: its page `index.html` and a copy of every
image and diff it shows, under the same keys as in the artifacts (`images/ab/<sha256>.png`,
`diffs/<build>/...`), so that every link in it is relative and the folder can be copied, served
or opened from disk on its own. `reports/<project>/latest/<branch>` is a small page that sends
the browser to the newest report of that branch.

A project's name and a branch's go into keys quoted (`quote`): a name with `/`, `%` or spaces
stays one folder, and no name can climb out with `..`. A branch keeps its `/` as folders
(`feature/login` is `latest/feature/login`), each part quoted likewise.
"""

from __future__ import annotations

import re
from typing import Any, TypedDict
from urllib.parse import quote

from ipc.artifacts.keys import REPORTS_PREFIX
from ipc.framing import MAX_FRAME_BYTES

#: The page of a report, in its folder.
INDEX = "index.html"
#: Where the newest report of each branch is pointed at, in a project's reports.
LATEST = "latest"
#: The most bytes of snapshot rows a `publish` payload holds: half a frame, the rest left for
#: the build's own facts. Some 20,000 snapshots of usual names fit; past it the page lists
#: what needs a look first and counts the rest (the last of the unchanged ones).
LISTING_BYTES = MAX_FRAME_BYTES // 2


def _segment(name: str) -> str:
    """`name` as one folder of a key: quoted, and never empty, `.` or `..`."""
    quoted = quote(name, safe="")
    if quoted in ("", ".", ".."):
        return quoted.replace(".", "%2E") or "%20"
    return quoted


def project_reports(project: str) -> str:
    """The folder of `project`'s reports."""
    return f"{REPORTS_PREFIX}/{_segment(project)}"


def report_folder(project: str, build_id: int) -> str:
    """The folder of build `build_id`'s report."""
    return f"{project_reports(project)}/{build_id}"


def report_index(project: str, build_id: int) -> str:
    """The key of build `build_id`'s report page."""
    return f"{report_folder(project, build_id)}/{INDEX}"


def _branch_parts(branch: str) -> list[str]:
    return [_segment(part) for part in branch.split("/") if part] or [_segment(branch)]


def latest_pointer(project: str, branch: str) -> str:
    """The key of the page that points at `branch`'s newest report."""
    return "/".join((project_reports(project), LATEST, *_branch_parts(branch)))


def pointer_target(branch: str, build_id: int) -> str:
    """Build `build_id`'s report page as linked from `branch`'s pointer (relative: up from
    `latest/<branch parts>` to the project's reports)."""
    return "../" * len(_branch_parts(branch)) + f"{build_id}/{INDEX}"


def pointer_meta(build_id: int) -> str:
    """The tag by which a pointer page names the build it points at: the next publish of its
    branch reads it to never point back at an older build, and prune to drop a pointer whose
    build it deletes."""
    return f'<meta name="storyshelf-build" content="{build_id}">'


_POINTED = re.compile(r'<meta name="storyshelf-build" content="(\d+)">')


def pointed_build(page: bytes) -> int | None:
    """The build a pointer page points at (`pointer_meta`), None if it names none."""
    found = _POINTED.search(page.decode("utf-8", "replace"))
    return None if found is None else int(found.group(1))


def other_report(build_id: int) -> str:
    """Another report of the same project, as linked from a report page."""
    return f"../{build_id}/{INDEX}"


class PublishPayload(TypedDict):
    """What the parent sends a `publish` job's child: the build as `ipc.build_view` puts it on
    the wire, its snapshots as rows in report order, and where to write."""

    artifacts: str
    build: dict[str, Any]
    snapshots: list[list[Any]]
    #: The snapshots past `LISTING_BYTES`, left out of the listing (counted, not shown).
    unlisted: int
    counts: dict[str, int]
    baseline_builds: list[int]
    folder: str
    #: The pointer to write, None when a newer build of the branch has already ended.
    latest: str | None


class PublishResult(TypedDict):
    """What the child answers: its page's key and where it opens (`ArtifactStore.where`), the
    files it copied, and the ones it could not find (shown broken, not a failure)."""

    index: str
    url: str
    copied: int
    missing: list[str]


PUBLISH_RESULT_FIELDS = frozenset(PublishResult.__annotations__)
