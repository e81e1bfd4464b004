"""Where a build's published report lives, and what a `publish` job sends and returns.

A report is a folder, `reports/<project>/<build>/`: its page `index.html` and a copy of every
image and diff it shows, under the same keys as in the artifacts (`images/ab/<sha256>.png`,
`diffs/<build>/...`), so that every link in it is relative and the folder can be copied, served
or opened from disk on its own. `reports/<project>/latest/<branch>.html` is a small page that
sends the browser to the newest report of that branch: named `.html`, so that a browser opening
it from disk and a static web server (or a bucket) serving it both take it for a page.

A project's name and a branch's go into keys quoted (`quote`): a name with `/`, `%` or spaces
stays one folder, and no name can climb out with `..`. A branch keeps its `/` as folders
(`feature/login` is `latest/feature/login.html`), each part quoted likewise. Every name must
also fit: a file system takes at most `NAME_BYTES` bytes in one name and a bucket 1024 in a
key, while git takes branches of any length. So a name too long to keep whole keeps its quoted
beginning and adds its digest after `DIGEST_MARK`, and a branch too long (or too odd: an empty
part) to keep as folders becomes one such name: every project and branch gets a key, and two
never share one.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, TypedDict
from urllib.parse import quote

from ipc.artifacts.keys import REPORTS_PREFIX
from ipc.framing import MAX_FRAME_BYTES

#: The page of a report, in its folder.
INDEX = "index.html"
#: Where the newest report of each branch is pointed at, in a project's reports.
LATEST = "latest"
#: How a pointer's name ends: a page, by its name, to a browser on disk and to a web server.
POINTER_SUFFIX = ".html"
#: The most bytes of snapshot rows a `publish` payload holds: half a frame, the rest left for
#: the build's own facts. Some 20,000 snapshots of usual names fit; past it the page lists
#: what needs a look first and counts the rest (the last of the unchanged ones).
LISTING_BYTES = MAX_FRAME_BYTES // 2
#: The most bytes of one name (a file's or a folder's) that file systems take (ext4, XFS,
#: btrfs, APFS), and so of each name of a key.
NAME_BYTES = 255
#: The most bytes a branch's pointer takes under `latest/`: with the project's folder (at most
#: `NAME_BYTES`) a pointer's key stays under 700 bytes, inside a bucket's 1024 with room left
#: for the store's own prefix.
BRANCH_BYTES = 400
#: Hex digits of the SHA-256 that tells apart names too long to keep whole (128 bits).
DIGEST_HEX = 32
#: What comes between a shortened name and its digest: `quote` escapes it in every name kept
#: whole, so a shortened name never equals one kept whole; and a bucket and a URL take it as it
#: is (unlike `+`, which some buckets read as a space).
DIGEST_MARK = "!"


def _quoted(name: str) -> str:
    """`name` percent-quoted whole (lone surrogates too, so that every string has a form)."""
    return quote(name, safe="", errors="surrogatepass")


def _segment(name: str, suffix: str = "") -> str:
    """`name` as one name of a key, `suffix` included: quoted, never empty, `.` or `..`, and
    within `NAME_BYTES`; shortened with its digest when it does not fit (`_digested`)."""
    quoted = _quoted(name)
    if quoted in (".", ".."):
        quoted = quoted.replace(".", "%2E")
    if quoted and len(quoted) + len(suffix) <= NAME_BYTES:
        return quoted + suffix
    return _digested(name, NAME_BYTES - len(suffix)) + suffix


def _digested(name: str, room: int) -> str:
    """`name` in at most `room` bytes: as much of its quoted form as fits (never half an
    escape), `DIGEST_MARK`, and the digest of the whole name, which alone tells names apart."""
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:DIGEST_HEX]
    beginning = _quoted(name)[: room - len(DIGEST_MARK) - DIGEST_HEX]
    cut = beginning.find("%", len(beginning) - 2)
    if cut != -1:
        beginning = beginning[:cut]
    return f"{beginning}{DIGEST_MARK}{digest}"


def _folder(name: str) -> str:
    """`name` as a folder's name of a key: as `_segment`, but never ending as a page's name
    does (a project `build-5.html` beside an older store's page `reports/build-5.html`, a
    branch part `x.html` beside the pointer `x.html`): such a name is shortened with its digest,
    whatever its length."""
    return _digested(name, NAME_BYTES) if name.endswith(POINTER_SUFFIX) else _segment(name)


def project_reports(project: str) -> str:
    """The folder of `project`'s reports."""
    return f"{REPORTS_PREFIX}/{_folder(project)}"


def report_folder(project: str, build_id: int) -> str:
    """The folder of build `build_id`'s report."""
    return f"{project_reports(project)}/{build_id}"


def report_index(project: str, build_id: int) -> str:
    """The key of build `build_id`'s report page."""
    return f"{report_folder(project, build_id)}/{INDEX}"


def _branch_path(branch: str) -> list[str]:
    """The names of `branch`'s pointer under `latest/`: its parts as folders and the last as
    the page, while every part has a name and they fit `BRANCH_BYTES`; else the whole branch
    as one page's name (shortened with its digest when long). A folder never takes a
    pointer's name (`x.html/y` beside `x`): such a part is shortened, whatever its length."""
    parts = branch.split("/")
    if all(parts):
        names = [_folder(part) for part in parts[:-1]]
        names.append(_segment(parts[-1], POINTER_SUFFIX))
        if len("/".join(names)) <= BRANCH_BYTES:
            return names
    return [_segment(branch, POINTER_SUFFIX)]


def latest_pointer(project: str, branch: str) -> str:
    """The key of the page that points at `branch`'s newest report."""
    return "/".join((project_reports(project), LATEST, *_branch_path(branch)))


def pointer_target(branch: str, build_id: int) -> str:
    """Build `build_id`'s report page as linked from `branch`'s pointer (relative: up from
    `latest/<branch parts>` to the project's reports)."""
    return "../" * len(_branch_path(branch)) + f"{build_id}/{INDEX}"


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
    files it copied, the ones it could not find (shown broken, not a failure), and why the
    branch's `latest` page could not be moved (None when it was, or was not to be)."""

    index: str
    url: str
    copied: int
    missing: list[str]
    unpointed: str | None


PUBLISH_RESULT_FIELDS = frozenset(PublishResult.__annotations__)
