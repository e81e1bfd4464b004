"""The child's side of a `plan` job: which snapshots a stored Storybook build asks for.

The index (`index.json`, v4 and v5, or Storybook 6's `stories.json` v3) lists the entries; the
preview, loaded once in the child's browser, gives every story's parameters, tags and globals
(`child.browser.preview`); `plan_snapshots` turns both into snapshots, dropping docs entries and
the stories that opt out. The preview is read in the page the child then keeps for its first
shard of the build (`child.storybook.kept.read_stories`): the plan's load is that shard's, and
its stories' files are imported already. A build that cannot be planned (no index, an index
that is not Storybook's, a preview that does not load) is a `PlanResult` whose `error` says why
in the browser's words: the parent fails the build with it. Only trouble of the host's making (no
browser, no resources, a store that does not answer, whether the manifest's read or a file the
preview asked the child's server for: `ServeFailed`) raises, so that the job is tried again.

Payload: `{"artifacts": str (the store's location), "build_id": int, "storybook": StorybookRef}`.
"""

from __future__ import annotations

from typing import Any

import structlog
from playwright.sync_api import Error as PlaywrightError

from child.artifacts.access import for_job
from child.browser.errors import first_line
from child.browser.launch import child_browser
from child.browser.preview import PreviewError
from child.storybook import kept
from child.storybook.parameters import plan_snapshots
from child.storybook.stored import StoredBuild, StorybookProblem, load
from child.worker.handler import Progress
from child.worker.resources import RefusedForks
from ipc.storybook import PlanResult
from ipc.storybook_index import INDEX_FILES, IndexEntry, IndexProblem, parse_index_bytes

log = structlog.get_logger(__name__)


def run(payload: dict[str, Any], progress: Progress) -> PlanResult:
    """Plan the payload's build; its problems are the result's `error`, never an exception."""
    try:
        artifacts = for_job(payload["artifacts"], lambda: progress({"waiting": True}))
        build = load(artifacts, payload["storybook"])
        entries = _entries(build)
    except (StorybookProblem, IndexProblem) as error:
        return _failed(str(error))
    progress({"entries": len(entries)})
    if "iframe.html" not in build.files:
        return _failed("the Storybook build has no iframe.html (is it a static build?)")

    def beat() -> None:
        progress({"entries": len(entries), "waiting": True})

    browser = child_browser(beat)
    progress({"entries": len(entries), "browser": True})
    refused = RefusedForks()  # a page that crashed while forks were refused: not the build's
    try:
        described = kept.read_stories(payload, build, browser, beat)
    except PreviewError as error:
        refused.blame(f"the Storybook preview did not load: {error}")
        log.info("preview did not load", build_id=payload.get("build_id"), error=str(error))
        return _failed(f"the Storybook preview did not load: {error}")
    except PlaywrightError as error:
        refused.blame(f"the Storybook preview did not load: {first_line(error)}")
        raise
    progress({"entries": len(entries), "stories": len(described.stories)})
    result = plan_snapshots(entries, described.stories, described.initial_globals)
    log.info(
        "build planned",
        build_id=payload.get("build_id"),
        snapshots=len(result["snapshots"]),
        skipped=len(result["skipped"]),
        docs=result["docs"],
    )
    return result


def _entries(build: StoredBuild) -> list[IndexEntry]:
    """The build's index entries (`ipc.storybook_index`); its messages name the file as the
    build has it, not where it is stored."""
    for name in INDEX_FILES:
        data = build.read(name)
        if data is not None:
            return parse_index_bytes(data, name)
    raise StorybookProblem("the Storybook build has neither index.json nor stories.json")


def _failed(message: str) -> PlanResult:
    return {"snapshots": [], "skipped": [], "docs": 0, "error": message}
