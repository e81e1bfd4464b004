"""What parent and child agree on about a Storybook build: how its files are stored, what a plan
returns, and what each story snapshot of a capture job says.

A Storybook build is stored content-addressed under the artifacts (DESIGN section 6): every file
at `storybooks/<sha256>/<its file name>`, so an unchanged file is stored once across builds, plus
one manifest, `storybooks/<sha256>/manifest.json`, mapping each path of the build to its file's
digest. Jobs carry only the manifest's path and digest (`StorybookRef`); a child reads the manifest
and serves the build's files from it, and nothing else, to its browser.

The `plan` job opens the build in a browser and returns `PlanResult`: one `StorySnapshot` per
snapshot to take (a story yields several when it asks for several sizes) and the stories it
left out, with why. The parent writes them into shards and `capture` jobs; each capture job's
snapshots are `StorySnapshot`s plus their baseline, and each result adds the captured image.
"""

from __future__ import annotations

import os
from typing import Any, Literal, TypedDict, get_args

#: The manifest's format; a manifest of another version is refused by the child.
MANIFEST_VERSION = 1
#: Where Storybook files live under the artifacts root.
STORYBOOKS_PREFIX = "storybooks"

#: The browser a child drives, unless `STORYSHELF_CHROMIUM` (set by `run --chromium`) says.
CHROMIUM_VARIABLE = "STORYSHELF_CHROMIUM"
#: The browsers looked for when none is named, the first installed one taken: Debian's headless
#: shell (package `chromium-headless-shell`, the same Chromium built without its desktop parts,
#: as Playwright and Puppeteer take for headless runs), else Debian's Chromium. The shell is
#: named by its binary, not by its `/usr/bin` script, which runs it without `exec`: the child's
#: browser must be the process the child started. Measured on the generated 300 stories, two
#: children: 11.20 against 9.48 stories/s, 489 against 653 MiB of peak PSS a slot, the first
#: story 3.0 against 4.6 s. Text can be drawn a little differently by the two (same version,
#: other compositing), so the hosts that share a project run the same one.
DEFAULT_CHROMIUMS = ("/usr/lib/chromium/chromium-headless-shell", "/usr/bin/chromium")

#: How long one story may take to render and settle, in seconds (Chromatic's cap), before its
#: snapshot fails with "did not finish rendering in 15 s". A story's own delay comes after it.
RENDER_CAP_SECONDS = 15.0
#: Shots taken of a story at most until two consecutive ones hash the same.
MAX_SHOTS = 3
#: The viewport of a story that names no size (Chromatic's default width).
DEFAULT_VIEWPORT_WIDTH = 1200
DEFAULT_VIEWPORT_HEIGHT = 900
#: The longest delay a story may ask for before its capture, in milliseconds.
MAX_DELAY_MS = 15_000

#: What a screenshot covers: the story's root element's box (Chromatic's default), the
#: viewport, or the whole page.
Crop = Literal["root", "viewport", "page"]
CROPS: tuple[Crop, ...] = get_args(Crop)

#: The media features a story may ask to be captured under (Chromatic's `prefersReducedMotion`,
#: `forcedColors` and `media`). Reduced motion is on unless a story asks otherwise: the capture
#: wants motion's end, not its course.
ReducedMotion = Literal["reduce", "no-preference"]
ForcedColors = Literal["none", "active"]
MediaType = Literal["screen", "print"]
REDUCED_MOTIONS: tuple[ReducedMotion, ...] = get_args(ReducedMotion)
FORCED_COLORS: tuple[ForcedColors, ...] = get_args(ForcedColors)
MEDIA_TYPES: tuple[MediaType, ...] = get_args(MediaType)

#: What marks an ignore region in every story, as Chromatic marks one.
DEFAULT_IGNORE_SELECTORS = (".chromatic-ignore", '[data-chromatic="ignore"]')
#: A story's own ignore selectors, at most, and the longest one.
MAX_IGNORE_SELECTORS = 50
MAX_SELECTOR_LENGTH = 500
#: The most ignore boxes a snapshot records (the first ones in document order).
MAX_IGNORE_BOXES = 200
#: The most globals one Chromatic mode may set for its snapshot.
MAX_MODE_GLOBALS = 20
#: The longest reason a plan gives for a story it cannot capture.
MAX_PROBLEM_LENGTH = 1000


class StorybookRef(TypedDict):
    """A stored Storybook build: its manifest's path under the artifacts, and its SHA-256."""

    manifest: str
    sha256: str


class Viewport(TypedDict):
    width: int
    height: int


def default_viewport() -> Viewport:
    """The viewport of a story that asks for none (a new dict each call: snapshots own theirs)."""
    return {"width": DEFAULT_VIEWPORT_WIDTH, "height": DEFAULT_VIEWPORT_HEIGHT}


class Media(TypedDict):
    """The media features a story is captured under."""

    reduced_motion: ReducedMotion
    forced_colors: ForcedColors
    media: MediaType


DEFAULT_MEDIA: Media = {"reduced_motion": "reduce", "forced_colors": "none", "media": "screen"}


class StorySnapshot(TypedDict):
    """One snapshot a plan asks for: a story at one size, with the story's own settings."""

    #: The snapshot's name: the story id, with " [mode]" appended when the story has several.
    name: str
    story_id: str
    #: The story's title ("Example/Button") and name ("Primary"), as Storybook shows them.
    title: str
    story: str
    #: The mode's name ("320", "mobile"), or None for a story with one size.
    mode: str | None
    viewport: Viewport
    #: Waited after the story settled (`chromatic.delay`, `lostpixel.waitBeforeScreenshot`,
    #: storycap's `screenshot.delay`), at most `MAX_DELAY_MS`.
    delay_ms: int
    #: Animations paused at their end (True, Chromatic's default) or at their first frame.
    pause_animation_at_end: bool
    crop: Crop
    #: This snapshot's own diff settings (`chromatic.diffThreshold`, `lostpixel.threshold`;
    #: `chromatic.diffIncludeAntiAliasing`), or None for the project's.
    threshold: float | None
    count_aa: bool | None
    #: The story's own ignore regions, as CSS selectors (`chromatic.ignoreSelectors`, Lost
    #: Pixel's `mask`), besides `DEFAULT_IGNORE_SELECTORS`: their boxes are recorded with the
    #: capture and their pixels are not compared.
    ignore: list[str]
    media: Media
    #: Globals the story is rendered under, over the preview's own: a Chromatic mode's besides
    #: its viewport (`{"theme": "dark"}`); empty for none.
    globals: dict[str, Any]
    #: Why the story cannot be captured as it asks (a size that cannot be honoured): the
    #: snapshot is then `failed` with this reason, never left out unseen. None to capture it.
    problem: str | None


class SkippedStory(TypedDict):
    """A story the plan left out, and why ("chromatic.disableSnapshot", "no snapshot tag")."""

    story_id: str
    title: str
    story: str
    reason: str


class PlanResult(TypedDict):
    """What a `plan` job returns to the parent."""

    snapshots: list[StorySnapshot]
    skipped: list[SkippedStory]
    #: Docs entries of the index, dropped.
    docs: int
    #: Why the build cannot be planned (its preview does not load, its index is not Storybook's),
    #: in the browser's words; the parent fails the build with it. None when planned.
    error: str | None


#: The fields a story capture's snapshot result adds to an uploaded image's: where the capture
#: was stored (`images/ab/<sha256>.png`), its digest, whether two consecutive shots agreed
#: (False: the story never settled in `MAX_SHOTS` shots; the last shot is kept), and the
#: seconds the story took in the browser, failed or not (a float: 9 bytes a story, for the
#: host's `storyshelf_story_render_seconds`), and the boxes of its ignore regions in the image,
#: `[left, top, width, height]` each (None when it failed).
STORY_RESULT_FIELDS = ("image", "sha256", "settled", "render_seconds", "ignore_boxes")

#: The error of a snapshot the build stopped before rendering: every story tried before it failed
#: with one and the same error (`child.storybook.breakdown`), which a story capture's result
#: names as its `"stopped"` (at most `MAX_STOPPED_LENGTH` characters) and the build's error says
#: once (`stopped_error`).
NOT_RENDERED = "not rendered: the build stopped, its stories all failing with one error"
MAX_STOPPED_LENGTH = 4000
STOPPED_PREFIX = "every story tried failed with the same error, so the rest were not rendered: "


def stopped_error(error: str) -> str:
    """The error of a build stopped by `error`, the one error its stories failed with."""
    return STOPPED_PREFIX + error


def stopped_by(build_error: str | None) -> str | None:
    """The one error that stopped a build, from its error (None when it did not stop so)."""
    if build_error is None or not build_error.startswith(STOPPED_PREFIX):
        return None
    return build_error.removeprefix(STOPPED_PREFIX)


def configured_chromium() -> str:
    """The browser's path as this process's environment gives it: `STORYSHELF_CHROMIUM`, else
    the first of `DEFAULT_CHROMIUMS` installed (the last when none is, for the message that says
    so). The host sets the variable before forking (`supervisor.host.chromium`)."""
    named = os.environ.get(CHROMIUM_VARIABLE)
    if named:
        return named
    return next(
        (path for path in DEFAULT_CHROMIUMS if os.access(path, os.X_OK)), DEFAULT_CHROMIUMS[-1]
    )


def file_key(path: str, sha256: str) -> str:
    """Where the file at `path` in a build, of digest `sha256`, is stored under the artifacts."""
    return f"{STORYBOOKS_PREFIX}/{sha256}/{path.rsplit('/', 1)[-1]}"


def manifest_key(sha256: str) -> str:
    """Where a manifest of digest `sha256` is stored under the artifacts."""
    return f"{STORYBOOKS_PREFIX}/{sha256}/manifest.json"


def manifest_document(files: dict[str, str]) -> dict[str, Any]:
    """The manifest of a build whose files (path under the build, posix) have these digests."""
    return {"version": MANIFEST_VERSION, "files": dict(sorted(files.items()))}
