"""Hostile stories through real hosts: a story reaches nothing but its build, writes nothing to
the host's disk, and a page it broke costs no later story (`tests.hostile` says what each story
tries). Twice: a host whose browser gets a network of its own (root here), and one without
CAP_SYS_ADMIN, whose browser shares the host's network and is held by its switches, its
proxy and the request interception alone.

The database does not matter here (`tests/database` runs what does on both): SQLite.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from pathlib import Path

import pytest
from sqlalchemy import Engine

from tests.chromium import require_chromium
from tests.hostile import (
    BREAKS_THE_PAGE,
    DOWNLOAD,
    FAILS_AFTER_IT,
    FAILS_BY_DESIGN,
    LEAVES_A_GLOBAL,
    PLAIN,
    WEB_RTC,
    WEB_SOCKET,
    Listeners,
    aimed_copy,
    large_files,
)
from tests.hosts import StartHost, build_row
from tests.processes.test_storybook_hosts import queue_storybook, results

#: One child, so that the stories share pages in the order of the index: each page story runs
#: after the one that broke or changed the page.
HOST = (
    "--concurrency", "1", "--lease-seconds", "60", "--stall-seconds", "40",
    "--backoff-base-seconds", "0.1", "--poll-seconds", "0.3", "--drain-seconds", "10",
)  # fmt: skip
#: Runs a host without CAP_SYS_ADMIN (from the bounding set: gone after its exec, as root too).
WITHOUT_NAMESPACES = ("setpriv", "--bounding-set=-sys_admin")


@pytest.fixture(autouse=True)
def chromium_is_required() -> None:
    require_chromium()


class DiskWatch:
    """Polls a host's temporary folder for a download's worth of file while the host runs."""

    def __init__(self, temporary: Path) -> None:
        self.temporary = temporary
        self.found: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.wait(0.1):
            self.found.update(large_files(self.temporary))

    def stop(self) -> set[str]:
        self._stop.set()
        self._thread.join()
        return self.found


@pytest.mark.timeout(600)
@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
@pytest.mark.parametrize("network", ["own", "shared"])
def test_hostile_stories_reach_nothing_write_nothing_and_break_no_later_story(
    network: str, engine: Engine, start_host: StartHost, listeners: Listeners, tmp_path: Path
) -> None:
    folder = aimed_copy(tmp_path, listeners)
    build_id = queue_storybook(engine, tmp_path / "artifacts", folder, "main")
    # Short: Chromium's singleton socket lives there, and a Unix socket's path is 107 bytes.
    temporary = Path(tempfile.mkdtemp(prefix="host-tmp-"))
    watch = DiskWatch(temporary)
    host = start_host(
        *HOST,
        "--drain",
        wrapper=WITHOUT_NAMESPACES if network == "shared" else (),
        environment={"TMPDIR": str(temporary)},
    )
    assert host.wait(300) == 0, host.log_tail()
    assert watch.stop() == set()
    shutil.rmtree(temporary, ignore_errors=True)
    assert listeners.reached == []
    captured = results(engine, build_id)
    assert captured, build_row(engine, build_id)["error"]
    stories = {WEB_SOCKET, WEB_RTC, DOWNLOAD, BREAKS_THE_PAGE, PLAIN, LEAVES_A_GLOBAL}
    assert {FAILS_AFTER_IT} | stories <= set(captured)
    failed = {name: r["error"] for name, r in captured.items() if r["status"] != "new"}
    assert set(failed) == set(FAILS_BY_DESIGN), failed
    for name, error in failed.items():
        assert error.endswith(FAILS_BY_DESIGN[name]) and "\n" not in error, (name, error)
    shared = host.events("network shared")
    assert bool(shared) == (network == "shared")
    if network == "shared":  # the WebSocket, closed by the page's guard
        assert host.events("request blocked")
