"""A story reaches nothing but its own build, writes nothing to the host's disk, and a page it
broke is not handed to the next story.

In one process, as a child renders them (`tests.hostile` says what the stories do and how they
are watched); `tests/processes/test_containment.py` runs them through real hosts.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from child.artifacts.access import for_job
from child.browser.launch import ChildBrowser
from child.browser.render import StoryRenderer
from child.browser.site import Site
from child.storybook import capture
from child.storybook.stored import load
from ipc.artifacts.folder import FolderStore
from supervisor.builds.storybooks import store_storybook
from tests.browser.conftest import Stored, capture_payload, snapshot
from tests.hostile import (
    BREAKS_THE_PAGE,
    DOWNLOAD,
    FAILS_AFTER_IT,
    LEAVES_A_GLOBAL,
    PLAIN,
    WEB_RTC,
    WEB_SOCKET,
    Listeners,
    aimed_copy,
    large_files,
)


@pytest.fixture
def hostile(tmp_path: Path, listeners: Listeners) -> Stored:
    """The hostile build, aimed at this test's listeners, stored as the parent stores it."""
    folder = aimed_copy(tmp_path, listeners)
    artifacts = tmp_path / "artifacts"
    return Stored(artifacts, store_storybook(FolderStore(artifacts), folder).ref)


def _run(stored: Stored, *story_ids: str) -> list[dict[str, Any]]:
    result = capture.run(capture_payload(stored, [snapshot(s) for s in story_ids]), lambda _: None)
    snapshots: list[dict[str, Any]] = result["snapshots"]
    return snapshots


def _settle_listeners(listeners: Listeners) -> None:
    time.sleep(1.0)  # what was sent in the story's last moments arrives


def test_a_web_socket_reaches_no_loopback_port(
    browser: ChildBrowser, hostile: Stored, listeners: Listeners
) -> None:
    (result,) = _run(hostile, WEB_SOCKET)
    _settle_listeners(listeners)
    assert result["status"] == "new", result["error"]
    assert listeners.reached == []


def test_web_rtc_sends_nothing_to_any_address(
    browser: ChildBrowser, hostile: Stored, listeners: Listeners
) -> None:
    (result,) = _run(hostile, WEB_RTC)
    _settle_listeners(listeners)
    assert result["status"] == "new", result["error"]
    assert listeners.reached == []


def test_a_download_writes_nothing_to_the_hosts_disk(
    browser: ChildBrowser, hostile: Stored
) -> None:
    """Looked for while the story's page is still open (a download is kept until then)."""
    before = set(large_files())
    build = load(for_job(str(hostile.artifacts), lambda: None), hostile.ref)
    with Site(build) as site, StoryRenderer(site) as renderer:
        shot = renderer.take(snapshot(DOWNLOAD))
        assert shot.error is None, shot.error
        time.sleep(2.0)  # a download is written after the click, in the background
        written = set(large_files()) - before
    assert written == set()


def _sockets(pid: int) -> list[tuple[str, str, str]]:
    """Every TCP and UDP socket of the network namespace `pid` lives in, as (table, local,
    remote), the addresses in the kernel's hexadecimal form."""
    found = []
    for table in ("tcp", "tcp6", "udp", "udp6"):
        with contextlib.suppress(OSError):
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
            found += [(table, line.split()[1], line.split()[2]) for line in lines]
    return found


def _loopback(address: str) -> bool:
    """Whether a /proc/net address (`0100007F:1F90`, or 32 hex digits for IPv6) is on
    loopback, or unset (a listening socket's remote end)."""
    host = address.rsplit(":", 1)[0]
    if len(host) == 8:
        return host.endswith("7F") or (host == "00000000" and address.endswith(":0000"))
    return host in ("00000000000000000000000001000000", "0" * 32)


def test_every_socket_of_the_browser_stays_in_its_own_network(
    browser: ChildBrowser, hostile: Stored, listeners: Listeners
) -> None:
    """Listed while a page that tried to reach out is open: the browser's process tree lives in
    a network namespace that is not the host's, and every socket there is a loopback one."""
    build = load(for_job(str(hostile.artifacts), lambda: None), hostile.ref)
    with Site(build) as site, StoryRenderer(site) as renderer:
        assert renderer.take(snapshot(WEB_RTC)).error is None
        host_network = os.readlink("/proc/self/ns/net")
        tree = [psutil.Process(browser.pid), *psutil.Process(browser.pid).children(True)]
        networks: dict[str, int] = {}
        for process in tree:
            with contextlib.suppress(OSError):
                networks.setdefault(os.readlink(f"/proc/{process.pid}/ns/net"), process.pid)
        sockets = {network: _sockets(pid) for network, pid in networks.items()}
        with pytest.raises(ConnectionRefusedError):  # nor is the build's server in the host's
            socket.create_connection(("127.0.0.1", int(site.origin.rsplit(":", 1)[1])), 2)
    assert host_network not in sockets, "a process of the browser is in the host's network"
    listed = [entry for entries in sockets.values() for entry in entries]
    assert any(table == "tcp" for table, _, _ in listed), "no socket listed: the listing is wrong"
    for table, local, remote in listed:
        assert _loopback(local) and _loopback(remote), f"{table} {local} -> {remote}"


def test_a_page_a_story_broke_is_replaced_before_the_next_story(
    browser: ChildBrowser, hostile: Stored
) -> None:
    breaker, after, again = _run(hostile, BREAKS_THE_PAGE, PLAIN, PLAIN)
    assert breaker["status"] == "new", breaker["error"]
    assert after["status"] == "new", after["error"]
    assert again["status"] == "new", again["error"]


def test_a_story_that_fails_on_a_page_others_used_is_tried_on_a_fresh_one(
    browser: ChildBrowser, hostile: Stored
) -> None:
    """On the page the story before left changed it throws; on a fresh page it renders. (A story that
    fails on a fresh page too keeps its own message: `test_capture`'s broken story.)"""
    leaves, after = _run(hostile, LEAVES_A_GLOBAL, FAILS_AFTER_IT)
    assert leaves["status"] == "new", leaves["error"]
    assert after["status"] == "new", after["error"]
    (alone,) = _run(hostile, FAILS_AFTER_IT)
    assert alone["status"] == "new", alone["error"]
