"""Playwright's driver: bounded and beaten while it starts, the host's trouble when the kernel
refuses it a thread, and started again when it dies under a live browser."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import psutil
import pytest

from child.browser import driver
from child.browser.errors import BrowserUnavailable
from child.browser.launch import child_browser, discard_child_browser
from ipc.artifacts.location import CACHE_DIR_VARIABLE
from tests.cgroups import confine, pids_cgroup
from tests.chromium import require_chromium
from tests.scripts import start_script

#: Starts a driver once told to on stdin, and says how it went in one line.
STARTER = """
import sys
from child.browser import driver
from child.worker.resources import OutOfResources
print("ready", flush=True)
sys.stdin.readline()
try:
    driver.start(timeout=20)
except OutOfResources as error:
    print("OutOfResources", error, flush=True)
except Exception as error:
    print(type(error).__name__, error, flush=True)
else:
    print("started", flush=True)
"""


@pytest.fixture(autouse=True)
def no_driver_of_the_child() -> None:
    """One sync driver per thread: the tests that start their own need the child's stopped."""
    discard_child_browser()


def _fake_node(folder: Path, body: str) -> str:
    """A stand-in for the driver's Node.js (`PLAYWRIGHT_NODEJS_PATH`), run as `node cli.js
    run-driver` like the real one."""
    fake = folder / "node"
    fake.write_text(f"#!/bin/sh\n{body}\n")
    fake.chmod(0o755)
    return str(fake)


def _gone(pids: set[int], seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not any(psutil.pid_exists(pid) for pid in pids):
            return True
        time.sleep(0.05)
    return False


def test_a_driver_that_never_answers_is_ended_at_its_bound_beating_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLAYWRIGHT_NODEJS_PATH", _fake_node(tmp_path, "exec sleep 300"))
    beats: list[float] = []
    started = time.monotonic()
    with pytest.raises(BrowserUnavailable) as raised:
        driver.start(beat=lambda: beats.append(time.monotonic()), timeout=3)
    assert str(raised.value) == "Playwright's driver did not start in 3 s"
    assert 3 <= time.monotonic() - started < 8
    assert len(beats) >= 2, "a beat a second while the driver is waited for"
    sleepers = {p.pid for p in psutil.Process().children() if p.name() == "sleep"}
    assert _gone(sleepers), "the driver that never answered is killed"


def test_a_driver_that_exits_at_start_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = _fake_node(tmp_path, "echo 'node: bad option' >&2; exit 9")
    monkeypatch.setenv("PLAYWRIGHT_NODEJS_PATH", fake)
    with pytest.raises(BrowserUnavailable) as raised:
        driver.start(timeout=10)
    message = str(raised.value)
    assert message.startswith("Playwright's driver did not start: ")
    assert "\n" not in message


@pytest.mark.parametrize("spare", [1, 2, 3])
def test_a_driver_refused_its_processes_or_threads_is_the_hosts_trouble(spare: int) -> None:
    """Under a real pids limit, `spare` tasks above what the starter runs: its watchdog's thread,
    the driver's Node.js, asyncio's thread that waits for it; then Node.js's own threads, which it
    asserts on (`uv_thread_create`) and dies. Whichever is refused, the job is given back."""
    with pids_cgroup(f"driver-{spare}") as group:
        starter = start_script(STARTER)
        try:
            assert starter.stdin is not None and starter.stdout is not None
            assert starter.stdout.readline().strip() == "ready"
            confine(group, starter.pid, "max")
            tasks = int((group / "pids.current").read_text())
            (group / "pids.max").write_text(str(tasks + spare))
            starter.stdin.write("go\n")
            starter.stdin.flush()
            said = starter.stdout.readline().strip()
            assert starter.wait(timeout=30) == 0
        finally:
            if starter.poll() is None:
                starter.kill()
                starter.wait()
    assert said.startswith("OutOfResources out of resources: "), said


def test_a_driver_that_died_under_a_live_browser_is_started_again() -> None:
    """The browser still says it is connected, but every call would fail with "Playwright
    connection closed": the child's browser is launched again, on a new driver."""
    require_chromium()
    browser = child_browser()
    dead = browser.driver.pid
    assert dead is not None and psutil.Process(dead).cmdline()[-1] == "run-driver"
    os.kill(dead, signal.SIGKILL)
    assert _gone({dead})
    assert not browser.alive()
    again = child_browser()
    assert again is not browser and again.alive()
    assert again.driver.pid not in (None, dead)
    page = again.browser.new_page()
    assert page.evaluate("1 + 1") == 2
    page.close()


def test_the_driver_keeps_its_compiled_code_in_the_hosts_cache_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A driver's Node.js compiles Playwright's scripts at every start unless it has a compile
    cache: it gets one under the host's cache folder, written as it exits, and the child's own
    environment is left as it was."""
    require_chromium()
    monkeypatch.setenv(CACHE_DIR_VARIABLE, str(tmp_path))
    monkeypatch.delenv("NODE_COMPILE_CACHE", raising=False)
    monkeypatch.delenv("NODE_OPTIONS", raising=False)
    started = driver.start(timeout=20)
    try:
        assert started.pid is not None
        environment = psutil.Process(started.pid).environ()
        folder = tmp_path / driver.COMPILE_CACHE_FOLDER
        assert environment["NODE_COMPILE_CACHE"] == str(folder)
        assert environment["NODE_OPTIONS"] == driver.NODE_OPTIONS
        assert "NODE_COMPILE_CACHE" not in os.environ and "NODE_OPTIONS" not in os.environ
    finally:
        started.stop()
    assert any(path.is_file() for path in folder.rglob("*")), "compiled code was written"
