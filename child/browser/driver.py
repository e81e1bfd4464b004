"""Playwright's driver: the Node.js process the child's Playwright talks to, one per child.

Starting it blocks the child's main thread, and can block it for good: under a pids limit the
driver's Node.js, refused a thread, may print `pthread_create: Resource temporarily unavailable`
and never answer (a soak's plan child was killed as hung for it). So it starts under a watchdog
that beats for it meanwhile and, past `START_SECONDS`, kills what it started; a start that fails
while the kernel refused forks (or with Python's own thread or process refused) is the host's
trouble (`OutOfResources`), any other failure one line (`BrowserUnavailable`).

A driver that dies later (Node.js refused a thread once running, or killed) is found dead by
its process, not by Playwright, whose browsers still say they are connected: every call then
fails with "Playwright connection closed", so the browser is launched again on a new driver.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import structlog
from playwright.sync_api import Playwright, sync_playwright

from child.browser.errors import BrowserUnavailable, first_line
from child.browser.watchdog import Watchdog
from child.worker import resources
from child.worker.resources import RefusedForks
from ipc.artifacts.location import cache_dir

log = structlog.get_logger(__name__)

#: How long the driver may take to start and answer (measured: 0.4 s on an idle host).
START_SECONDS = 30.0
#: The driver's Node.js keeps a young generation of 1 MiB halves, not 16: 22 MiB less PSS per
#: child (140 -> 118 MiB, 40 stories), no CPU measurably (60 stories, two runs each way).
NODE_OPTIONS = "--max-semi-space-size=1"
#: Where the driver's Node.js keeps the code it compiled from Playwright's scripts, under the
#: host's cache folder (`ipc.artifacts.location.cache_dir`), so that later drivers load it
#: instead of compiling it again (Node.js's `NODE_COMPILE_CACHE`): a driver's start 0.24 ->
#: 0.18 s, and every child starts one, two at once as a host starts. Not the system's temporary
#: folder, Node.js's own default: compiled code is only as trustworthy as the folder it is in.
COMPILE_CACHE_FOLDER = "node-compile"


@dataclass
class Driver:
    """A running driver: Playwright's side of it, and its process."""

    playwright: Playwright
    pid: int | None

    def alive(self) -> bool:
        """Whether the driver's process still runs (its connection ends with it)."""
        if self.pid is None:
            return True
        try:
            return psutil.Process(self.pid).status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            return False

    def kill(self) -> None:
        """SIGKILL the driver's process: every call waiting on it then fails. Only a signal, so
        safe from a watchdog's thread."""
        if self.pid is not None:
            _kill({self.pid})

    def stop(self) -> None:
        """End the connection, and the process should it outlive it (a dead driver's too)."""
        with contextlib.suppress(Exception):
            self.playwright.stop()
        self.kill()


def start(beat: Callable[[], None] = lambda: None, timeout: float = START_SECONDS) -> Driver:
    """Start a driver within `timeout`, beating every `BEAT_SECONDS` meanwhile."""
    refused = RefusedForks()
    before = _children()
    late = f"Playwright's driver did not start in {timeout:g} s"
    with Watchdog(lambda: _kill(_children() - before), beat=beat) as watchdog:
        watchdog.arm(timeout, late)
        try:
            with _node_environment(NODE_OPTIONS, cache_dir() / COMPILE_CACHE_FOLDER):
                playwright = sync_playwright().start()
        except Exception as error:
            failure = late if watchdog.fired else f"Playwright's driver did not start: {error}"
            _kill(_children() - before)
            refused.blame(first_line(failure))
            resources.check(error)
            raise BrowserUnavailable(first_line(failure)) from None
        finally:
            watchdog.disarm()
    started = _children() - before
    pid = next(iter(started)) if len(started) == 1 else None
    log.debug("browser driver started", driver_pid=pid)
    return Driver(playwright, pid)


@contextlib.contextmanager
def _node_environment(options: str, compile_cache: Path) -> Iterator[None]:
    """The environment a Node.js started in the block inherits: `options` added to
    `NODE_OPTIONS`, after any the host was given (where both set one, this wins), and its
    compile cache in `compile_cache` unless the host names one (`NODE_COMPILE_CACHE`)."""
    given = {name: os.environ.get(name) for name in ("NODE_OPTIONS", "NODE_COMPILE_CACHE")}
    os.environ["NODE_OPTIONS"] = " ".join(filter(None, (given["NODE_OPTIONS"], options)))
    os.environ.setdefault("NODE_COMPILE_CACHE", str(compile_cache))
    try:
        yield
    finally:
        for name, value in given.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


_current: Driver | None = None


def current(beat: Callable[[], None] = lambda: None) -> Driver:
    """This child's driver: started on first use, kept while its process runs, started again
    once it died."""
    global _current
    if _current is not None and not _current.alive():
        log.warning("browser driver found dead, starting another", driver_pid=_current.pid)
        _current.stop()
        _current = None
        beat()
    if _current is None:
        _current = start(beat)
    return _current


def discard() -> None:
    """Stop this child's driver, if any: a thread has one sync driver at a time, so a test
    that starts its own needs the child's gone."""
    global _current
    if _current is not None:
        _current.stop()
        _current = None


def _children() -> set[int]:
    """The pids of this process's children: those that appear while the driver starts are the
    driver's (the child's main thread, which would start any other, waits for it meanwhile)."""
    try:
        return {process.pid for process in psutil.Process().children()}
    except psutil.Error:
        return set()


def _kill(pids: set[int]) -> None:
    """SIGKILL the driver processes `pids`: only signals, so safe from the watchdog's thread."""
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
