"""Failure is contained to its story: a hung page, a crashed renderer, a dead browser.

The hang test costs the 15 s render cap by nature; it is the only one that waits for it. The
crash tests kill the renderer or the browser while the hang story spins, so they fail fast, and
each time the next story must still be captured.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from child.artifacts.access import CachedArtifacts, for_job
from child.browser import network
from child.browser.frames import advance
from child.browser.launch import ChildBrowser, child_browser
from child.browser.render import SHOTS_SECONDS, StoryRenderer
from child.browser.site import ServeFailed, Site
from child.browser.watchdog import BEAT_SECONDS, LAST_RESORT_SECONDS, Watchdog
from child.cache.content import ContentCache
from child.storybook import capture
from child.storybook.stored import StoredBuild, load
from child.worker.resources import OutOfResources
from ipc.artifacts.s3 import S3Store
from ipc.storybook import RENDER_CAP_SECONDS, StorySnapshot
from supervisor.builds.storybooks import store_storybook
from tests.browser.conftest import FIXTURE, Stored, capture_payload, snapshot
from tests.cgroups import confine, pids_cgroup
from tests.chromium import require_chromium
from tests.hosts import wait_for
from tests.object_store_server import TemporaryObjectStore, own_server
from tests.scripts import start_script

HANG = "example-hang--main-thread-hang"
NEXT = "example-button--primary"


def test_a_hung_story_fails_on_the_cap_and_the_next_story_is_captured(
    browser: ChildBrowser, stored: Stored
) -> None:
    """Its page blocks the child's calls until the cap, and the child beats all along (from the
    watchdog's thread): a child waiting on a page its deadline will end is not hung."""
    reports: list[dict[str, Any]] = []
    beats: list[float] = []

    def progress(report: dict[str, Any]) -> None:
        beats.append(time.monotonic())
        reports.append(report)

    started = time.monotonic()
    result = capture.run(capture_payload(stored, [snapshot(HANG), snapshot(NEXT)]), progress)
    elapsed = time.monotonic() - started
    gaps = [later - earlier for earlier, later in itertools.pairwise([started, *beats])]
    assert max(gaps) < BEAT_SECONDS + 1.5, f"{max(gaps):.1f} s without a beat"
    hung, after = result["snapshots"]
    assert hung["status"] == "failed"
    assert hung["error"] == "did not finish rendering in 15 s"
    assert hung["image"] is None
    assert after["status"] == "new", after["error"]
    assert [r["story_id"] for r in reports if "story_id" in r] == [HANG, NEXT]
    assert RENDER_CAP_SECONDS <= elapsed < RENDER_CAP_SECONDS + 8


def _later(seconds: float, action: Any) -> threading.Timer:
    timer = threading.Timer(seconds, action)
    timer.start()
    return timer


def test_a_renderer_that_crashes_fails_its_story_and_the_next_goes_on(
    browser: ChildBrowser, stored: Stored
) -> None:
    browser = child_browser()  # the module's, or the one launched after a test killed it
    with (
        Site(load(for_job(str(stored.artifacts)), stored.ref)) as site,
        StoryRenderer(site) as renderer,
    ):
        assert renderer.take(snapshot(NEXT)).error is None
        timer = _later(1.0, browser.kill_renderers)
        started = time.monotonic()
        crashed = renderer.take(snapshot(HANG))
        timer.join()
        assert time.monotonic() - started < 5
        assert crashed.error == "the page crashed while rendering the story"
        assert crashed.png is None
        after = renderer.take(snapshot(NEXT))
    assert after.error is None and after.png is not None
    assert browser.alive(), "a renderer crash leaves the browser running"


class _CrashDuringTheShot(StoryRenderer):
    """A renderer whose page's renderer crashes while its first shot is being taken: stopped
    as the shot is asked for (so the shot waits on it), killed half a second later."""

    def __init__(self, site: Site, browser: ChildBrowser) -> None:
        super().__init__(site)
        self.doomed: ChildBrowser | None = browser

    def _shot(self, snapshot: StorySnapshot, **options: Any) -> Any:
        if self.doomed is not None:
            for pid in self.doomed.renderer_pids():
                os.kill(pid, signal.SIGSTOP)
            _later(0.5, self.doomed.kill_renderers)
            self.doomed = None
        return super()._shot(snapshot, **options)


def test_a_renderer_that_crashes_at_the_shot_fails_its_story_at_once(
    browser: ChildBrowser, stored: Stored
) -> None:
    browser = child_browser()
    with (
        Site(load(for_job(str(stored.artifacts)), stored.ref)) as site,
        _CrashDuringTheShot(site, browser) as renderer,
    ):
        started = time.monotonic()
        crashed = renderer.take(snapshot(NEXT))
        assert crashed.error == "the page crashed while rendering the story"
        assert time.monotonic() - started < SHOTS_SECONDS / 2, "not the watchdog's deadline"
        after = renderer.take(snapshot(NEXT))
    assert after.error is None and after.png is not None
    assert browser.alive(), "a renderer crash leaves the browser running"


def test_a_browser_that_dies_fails_its_story_and_is_launched_again(
    browser: ChildBrowser, stored: Stored
) -> None:
    browser = child_browser()
    with (
        Site(load(for_job(str(stored.artifacts)), stored.ref)) as site,
        StoryRenderer(site) as renderer,
    ):
        assert renderer.take(snapshot(NEXT)).error is None
        timer = _later(1.0, lambda: os.kill(browser.pid, signal.SIGKILL))
        died = renderer.take(snapshot(HANG))
        timer.join()
        assert died.error == "the browser crashed while rendering the story"
        after = renderer.take(snapshot(NEXT))
    assert after.error is None and after.png is not None
    relaunched = child_browser()
    assert relaunched.pid != browser.pid and relaunched.alive()


def test_the_watchdog_rescues_once_past_its_deadline_and_never_when_disarmed() -> None:
    rescued: list[float] = []
    with Watchdog(lambda: rescued.append(time.monotonic())) as watchdog:
        watchdog.arm(0.05, "late")
        time.sleep(0.3)
        assert watchdog.fired == "late" and len(rescued) == 1
        watchdog.arm(0.05, "again")
        watchdog.disarm()
        time.sleep(0.2)
        assert watchdog.fired is None and len(rescued) == 1


def test_the_watchdog_takes_its_last_resort_only_while_the_call_still_blocks() -> None:
    """A rescue that did not free the call (a driver that stopped answering) is followed by the
    last resort; a call the rescue freed (disarmed meanwhile) is not."""
    calls: list[tuple[str, float]] = []
    with Watchdog(
        lambda: calls.append(("rescue", time.monotonic())),
        last_resort=lambda: calls.append(("last resort", time.monotonic())),
    ) as watchdog:
        armed = time.monotonic()
        watchdog.arm(0.05, "late")
        time.sleep(LAST_RESORT_SECONDS + 0.5)  # still blocked
        assert [what for what, _ in calls] == ["rescue", "last resort"]
        assert calls[1][1] - armed >= LAST_RESORT_SECONDS
        calls.clear()
        watchdog.arm(0.05, "freed")
        time.sleep(0.3)
        watchdog.disarm()  # the rescue freed the call
        time.sleep(LAST_RESORT_SECONDS + 0.3)
        assert [what for what, _ in calls] == ["rescue"]


def test_the_watchdog_beats_while_armed_and_stops_at_its_deadline_or_disarm() -> None:
    """The thread blocked in a page call cannot beat: the watchdog does, until the deadline
    that will end the call, and never after it or once disarmed."""
    beats: list[float] = []
    with Watchdog(lambda: None, beat=lambda: beats.append(time.monotonic())) as watchdog:
        armed = time.monotonic()
        watchdog.arm(BEAT_SECONDS * 3.5, "late")
        time.sleep(BEAT_SECONDS * 5)  # the main thread blocked past the deadline
        assert watchdog.fired == "late"
        assert [round((beat - armed) / BEAT_SECONDS) for beat in beats] == [1, 2, 3]
        watchdog.arm(BEAT_SECONDS * 10, "again")
        watchdog.disarm()
        time.sleep(BEAT_SECONDS * 1.5)
    assert len(beats) == 3


def test_a_build_file_the_store_lost_fails_the_job_instead_of_recording_a_bare_page(
    browser: ChildBrowser, store_variant: Any
) -> None:
    """The stylesheet is listed by the manifest but gone from the artifacts: the page would
    render unstyled, and two equal shots of it would be recorded as the story. The job fails
    (and is tried again) naming the file instead."""
    variant: Stored = store_variant(lambda folder: None)
    build = load(for_job(str(variant.artifacts)), variant.ref)
    (css,) = [path for path in build.files if path.endswith(".css")]
    stored = build.path_of(css)
    assert stored is not None
    stored.unlink()
    with pytest.raises(ServeFailed, match=f"/{css}: HTTP 500"):
        capture.run(capture_payload(variant, [snapshot(NEXT)]), lambda _report: None)


@pytest.fixture
def frozen_store() -> Iterator[TemporaryObjectStore]:
    """An object store of the test's own, for it to freeze."""
    yield from own_server()


def stored_but(
    frozen_store: TemporaryObjectStore,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    suffix: str,
) -> tuple[StoredBuild, set[str]]:
    """The fixture stored in a bucket of `frozen_store`, every file of it already in the host's
    cache but those ending in `suffix`: those are all a story has left to read from the
    bucket. The build, and the files left."""
    for name, value in frozen_store.environment().items():
        monkeypatch.setenv(name, value)
    store = S3Store(frozen_store.new_bucket("frozen"))
    ref = store_storybook(store, FIXTURE).ref
    artifacts = CachedArtifacts(store, ContentCache(tmp_path, 2**30), tmp_path)
    build = load(artifacts, ref)
    left = {path for path in build.files if path.endswith(suffix)}
    for path in build.files.keys() - left:
        build.path_of(path)
    return build, left


@contextlib.contextmanager
def frozen(server: TemporaryObjectStore) -> Iterator[None]:
    """The object store's process stopped (SIGSTOP) while the block runs: it answers nothing."""
    assert server.process is not None
    server.process.send_signal(signal.SIGSTOP)
    try:
        yield
    finally:
        server.process.send_signal(signal.SIGCONT)


def test_a_story_that_waited_on_a_frozen_store_is_the_hosts_trouble(
    browser: ChildBrowser,
    frozen_store: TemporaryObjectStore,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The bucket stops answering (its process frozen) while the story's stylesheet is read
    from it: the render cap passes with the request still waiting on the store. The job fails,
    to be tried again, instead of recording the story as failed."""
    build, (css,) = stored_but(frozen_store, tmp_path, monkeypatch, suffix=".css")
    with (
        frozen(frozen_store),
        Site(build) as site,
        StoryRenderer(site, cap_seconds=3) as renderer,
        pytest.raises(ServeFailed, match=f"still waited on the store for {css}"),
    ):
        renderer.take(snapshot(NEXT))


def test_a_story_that_throws_is_its_own_failure_while_the_store_still_sends_a_font(
    browser: ChildBrowser,
    frozen_store: TemporaryObjectStore,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A story whose render throws is recorded as failed with its own error, even when its
    error page's font is still on its way from a store that stopped answering: only a page
    that broke or ran out of time is the store's doing."""
    build, _fonts = stored_but(frozen_store, tmp_path, monkeypatch, suffix=".woff2")
    with (
        frozen(frozen_store),
        Site(build) as site,
        StoryRenderer(site, cap_seconds=3) as renderer,
    ):
        result = renderer.take(snapshot("example-broken--throws-in-render"))
        page = renderer.page
        assert page is not None
        # The error page's font is asked for as the page lays it out: on a frame begun for it.
        frames = page.context.new_cdp_session(page)

        def font_asked_for() -> bool:
            advance(frames)
            return bool(page.evaluate("document.fonts.status === 'loading'"))

        wait_for(font_asked_for, timeout=5.0)
        waiting = site.still_reading("the story threw")
    assert result.error is not None and "render threw on purpose" in result.error
    assert waiting is not None, "the error page asked the frozen store for a font"


def test_a_server_that_cannot_start_its_thread_is_the_hosts_trouble(
    stored: Stored, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under a pids limit `Thread.start` raises RuntimeError: the job is given back without
    spending an attempt (`OutOfResources`), not failed (the soak's forks-refused fault)."""
    start = threading.Thread.start

    def refuse(thread: threading.Thread) -> None:
        if thread.name == "storybook-site":
            raise RuntimeError("can't start new thread")
        start(thread)

    monkeypatch.setattr(threading.Thread, "start", refuse)
    with pytest.raises(OutOfResources, match="out of resources: can't start new thread"):
        Site(load(for_job(str(stored.artifacts)), stored.ref))


def test_a_server_without_threads_for_requests_serves_them_on_its_own(
    browser: ChildBrowser, stored: Stored, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pids limit that comes after the server started refuses its per-connection threads:
    each request is then served on the server's own thread and its connection closed, never
    dropped (a dropped request failed the story it belonged to, in the soak)."""
    browser = child_browser()
    with (
        Site(load(for_job(str(stored.artifacts)), stored.ref)) as site,
        StoryRenderer(site) as renderer,
    ):
        start = threading.Thread.start

        def refuse(thread: threading.Thread) -> None:
            if "process_request_thread" in thread.name:
                raise RuntimeError("can't start new thread")
            start(thread)

        monkeypatch.setattr(threading.Thread, "start", refuse)
        with (
            network.entered(),  # where the server listens, beside the browser
            urllib.request.urlopen(site.url("index.json"), timeout=5) as response,
        ):
            assert response.status == 200
            assert response.headers["Connection"] == "close"
            assert json.loads(response.read())
        captured = renderer.take(snapshot(NEXT))
    assert captured.error is None and captured.png is not None
    assert browser.alive()


#: Renders a story, kills its renderers (the next take fails on the crashed page and closes it),
#: then, once told to, renders it again: that needs a new renderer forked, which a pids limit
#: set meanwhile refuses.
RENDERER_HOLDER = """
import json, sys
from child.artifacts.access import CachedArtifacts, for_job
from child.browser.launch import child_browser
from child.browser.render import SHOTS_SECONDS, StoryRenderer
from child.browser.site import Site
from child.storybook.stored import load
from child.worker.resources import OutOfResources
from tests.browser.conftest import snapshot
artifacts, ref = sys.argv[1], json.loads(sys.argv[2])
with Site(load(for_job(artifacts), ref)) as site, StoryRenderer(site, cap_seconds=6) as renderer:
    first = renderer.take(snapshot(sys.argv[3]))
    child_browser().kill_renderers()
    crashed = renderer.take(snapshot(sys.argv[3]))  # the story's own failure: no limit yet
    print("said:", "ready" if first.error is None and crashed.error else "no crash", flush=True)
    sys.stdin.readline()
    try:
        again = renderer.take(snapshot(sys.argv[3]))
    except OutOfResources as error:
        print("said: OutOfResources", error, flush=True)
    else:
        print("said:", "captured" if again.error is None else f"failed: {again.error}", flush=True)
"""


#: How long the renderer's forks are refused: as the soak refuses them, for a few seconds.
REFUSED_SECONDS = 3.0


def _said(holder: subprocess.Popen[str]) -> str:
    """The holder's next line that is not a log line."""
    assert holder.stdout is not None
    while line := holder.stdout.readline():
        if line.startswith("said: "):
            return line.removeprefix("said: ").strip()
    return "(exited)"


def test_a_story_whose_renderer_the_pids_limit_refused_is_the_hosts_trouble(
    stored: Stored,
) -> None:
    """Chromium refused a renderer shows only as a page that crashed or never loaded; the
    kernel's count of refused forks tells it apart, and the job is given back instead of the
    story failing for good (the soak's forks-refused fault, "results equal calm")."""
    require_chromium()
    holder = start_script(
        RENDERER_HOLDER, str(stored.artifacts), json.dumps(stored.ref), NEXT, new_session=True
    )
    try:
        assert holder.stdin is not None
        assert _said(holder) == "ready"
        with pids_cgroup("renderer") as group:
            tree = [holder.pid, *(p.pid for p in psutil.Process(holder.pid).children(True))]
            for pid in tree:
                confine(group, pid, "max")
            (group / "pids.max").write_text((group / "pids.current").read_text().strip())
            holder.stdin.write("go\n")
            holder.stdin.flush()
            time.sleep(REFUSED_SECONDS)
            (group / "pids.max").write_text("max")
            said = _said(holder)
    finally:
        with contextlib.suppress(OSError):
            os.killpg(holder.pid, signal.SIGKILL)
        holder.wait()
    # Chromium either reports the page crashed, or leaves the call waiting for a renderer (and
    # its driver, refused threads too, stuck) until the watchdog's rescue and last resort.
    assert said.startswith("OutOfResources out of resources: the pids limit refused "), said
    assert said.endswith(
        (
            f"{NEXT}: the page crashed while rendering the story",
            f"{NEXT}: did not finish rendering in 6 s",
        )
    ), said
