"""The child's browser: Chromium started by the child itself, in the child's process group, and
driven by Playwright over the DevTools protocol.

Why not Playwright's own `launch()`: its launcher starts the browser `detached` (a new session,
`setsid`), so the browser leaves the child's process group, and the parent, which ends a child
by killing its group, would leave a SIGKILLed child's Chromium running (measured). Here the
child starts Chromium with `subprocess.Popen`, which keeps it in the child's group, and asks the
kernel to SIGKILL it should the child die alone (`PR_SET_PDEATHSIG`). That signal follows the
*thread* that forked, so the browser is launched from the thread the child runs its jobs on, its
main thread, which lives as long as the child. Playwright then connects to the port Chromium
writes to `<profile>/DevToolsActivePort` (`connect_over_cdp`). Both run in the browser's own
network (`child.browser.network`), where that port is the driver's to reach and no one else's.

Nothing is ever downloaded: the executable is `STORYSHELF_CHROMIUM` (set by `run --chromium`) or
Debian's (its headless shell when installed, else `/usr/bin/chromium`: `ipc.storybook`). A
child has one browser, launched on its first job that needs it and reused by the next ones
(`child_browser`); a browser found dead is launched again. It is never closed at the child's
exit: it dies with the child's process group.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil
import structlog
from playwright.sync_api import Browser

from child.browser import driver, network
from child.browser.errors import BrowserUnavailable
from child.browser.flags import chromium_flags, write_preferences
from child.browser.watchdog import BEAT_SECONDS
from child.worker import resources
from child.worker.resources import OutOfResources, RefusedForks
from ipc.storybook import configured_chromium

log = structlog.get_logger(__name__)

#: How long Chromium may take to open its DevTools port (measured: 0.25 s on an idle host).
START_TIMEOUT_SECONDS = 20.0
#: How many times a browser killed while it starts is launched before its job is given up on.
LAUNCH_TRIES = 3
#: The end of Chromium's own output shown when it exits before it is ready.
STDERR_TAIL_CHARS = 2000
#: Profiles are named after the child, so one left by a killed child is found and removed.
PROFILE_PREFIX = "storyshelf-chromium-"
_PR_SET_PDEATHSIG = 1
_LIBC = ctypes.CDLL(None, use_errno=True)  # resolved before any fork: preexec_fn only calls it


class ChromiumNotFound(BrowserUnavailable):
    """No executable at the configured path."""


class BrowserKilled(BrowserUnavailable):
    """Chromium died of a signal while it started (the OOM killer, a crash): worth another try,
    where an exit of its own (a bad flag, no display) would only repeat."""


@dataclass
class ChildBrowser:
    """A running Chromium of this child and Playwright's connection to it."""

    process: subprocess.Popen[bytes]
    profile: Path
    driver: driver.Driver
    browser: Browser

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        """Whether the browser process runs and Playwright is still connected to it, through a
        driver that still runs (a browser keeps saying it is connected when the driver died)."""
        return self.process.poll() is None and self.driver.alive() and self.browser.is_connected()

    def renderer_pids(self) -> list[int]:
        """The pids of the browser's renderer processes (one per page of the child, plus spares)."""
        pids = []
        try:
            children = psutil.Process(self.pid).children(recursive=True)
        except psutil.Error:
            return []
        for process in children:
            with contextlib.suppress(psutil.Error):
                if "--type=renderer" in process.cmdline():
                    pids.append(process.pid)
        return pids

    def kill_renderers(self) -> int:
        """SIGKILL every renderer: what unblocks a call into a page whose main thread hangs.

        Safe from any thread (it only sends signals); the browser survives and reports the
        pages crashed. Returns how many were killed.
        """
        killed = 0
        for pid in self.renderer_pids():
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
                killed += 1
        return killed

    def rescue(self) -> None:
        """End whatever a blocked page call waits on: the renderers, or the browser itself when
        it has none, since a call waiting for a renderer Chromium could not start (refused a
        process under a pids limit, measured) never returns otherwise. Only signals: safe from
        the watchdog's thread. A browser killed here is launched again by `child_browser`."""
        if self.kill_renderers() == 0:
            log.warning("no renderer to end; killing the browser", pid=self.pid)
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGKILL)

    def last_resort(self) -> None:
        """End the browser and its driver: what frees a page call still blocked after `rescue`,
        a driver that stopped answering (its Node.js refused a thread under a pids limit,
        measured: the call never returned, though the browser was dead). Only signals."""
        log.warning("page call still blocked; killing the browser and its driver", pid=self.pid)
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGKILL)
        self.driver.kill()

    def close(self) -> None:
        """Stop the browser and remove its profile (a dead browser is only cleaned up)."""
        with contextlib.suppress(Exception):
            self.browser.close()
        if self.process.poll() is None:
            self.process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=5)
        shutil.rmtree(self.profile, ignore_errors=True)


def launch(
    executable: str | None = None,
    *,
    timeout: float = START_TIMEOUT_SECONDS,
    beat: Callable[[], None] = lambda: None,
) -> ChildBrowser:
    """Start Chromium in this process's group and connect Playwright to it.

    Must run on the child's main thread (see the module docstring). Raises `ChromiumNotFound`
    or `BrowserUnavailable` with one line, or `OutOfResources` when the host lacks a process
    or memory for it. `beat` is called every `BEAT_SECONDS` while Chromium starts (slow on a
    loaded host), and between the steps after it (starting Playwright's driver, connecting),
    which block the thread that beats and each take seconds on a loaded host. A browser killed
    while it starts is launched again, `LAUNCH_TRIES` times in all.
    """
    path = executable or configured_chromium()
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise ChromiumNotFound(
            f"Chromium not found at {path}: install Debian's chromium-headless-shell package "
            "(apt-get install chromium-headless-shell) or give run --chromium PATH"
        )
    tries = 1
    while True:
        try:
            return _launch_once(path, timeout, beat)
        except BrowserKilled as error:
            if tries == LAUNCH_TRIES:
                raise
            tries += 1
            log.warning("browser killed while it started; launching another", error=str(error))
            beat()


def _launch_once(path: str, timeout: float, beat: Callable[[], None]) -> ChildBrowser:
    _remove_stale_profiles()
    refused = RefusedForks()
    profile = Path(tempfile.mkdtemp(prefix=f"{PROFILE_PREFIX}{os.getpid()}-"))
    try:
        write_preferences(profile)
        with network.entered():  # the browser and the driver that talks to its port
            process = _start(path, profile)
        try:
            port = _wait_for_port(process, profile, timeout, beat)
            beat()
            with network.entered():
                child_driver = driver.current(beat)
            beat()
            browser = child_driver.playwright.chromium.connect_over_cdp(f"http://127.0.0.1:{port}")
        except OutOfResources:
            process.kill()
            process.wait()
            raise
        except BrowserUnavailable as error:
            process.kill()
            process.wait()
            refused.blame(str(error))
            raise
        except Exception as error:
            died = process.poll()  # before the kill below: did it die on its own, of a signal?
            process.kill()
            process.wait()
            tail = _tail(profile)
            # Chromium dead after it announced its port: for want of a process or a thread (a
            # pids limit), it is the host's trouble.
            _check_resources(f"{error}\n{tail}")
            refused.blame(f"Chromium did not start: {tail}")
            if died is not None and died < 0:
                raise BrowserKilled(
                    f"Chromium was killed by signal {-died} while it started: {tail}"
                ) from error
            raise
    except BaseException:
        shutil.rmtree(profile, ignore_errors=True)
        raise
    log.info("browser launched", pid=process.pid, executable=path, version=browser.version)
    return ChildBrowser(process, profile, child_driver, browser)


def _start(path: str, profile: Path) -> subprocess.Popen[bytes]:
    parent = os.getpid()

    def die_with_child() -> None:  # runs in the forked process, before exec
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the child died before the signal was armed
            os._exit(1)

    environment = {**os.environ, "TZ": "UTC"}
    try:
        with (profile / "chromium.log").open("wb") as output:
            return subprocess.Popen(
                [path, *chromium_flags(profile, as_root=os.geteuid() == 0)],
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                env=environment,
                preexec_fn=die_with_child,
                close_fds=True,
            )
    except OSError as error:
        resources.check(error)
        raise BrowserUnavailable(
            f"cannot start Chromium at {path}: {error.strerror or error}"
        ) from None


def _wait_for_port(
    process: subprocess.Popen[bytes], profile: Path, timeout: float, beat: Callable[[], None]
) -> int:
    """The DevTools port Chromium announces once it is ready; an error if it exits or stalls."""
    announced = profile / "DevToolsActivePort"
    deadline = time.monotonic() + timeout
    beaten = time.monotonic()
    while True:
        if time.monotonic() - beaten >= BEAT_SECONDS:
            beaten = time.monotonic()
            beat()
        with contextlib.suppress(OSError, ValueError, IndexError):
            return int(announced.read_text().split()[0])
        status = process.poll()
        if status is not None:
            tail = _tail(profile)
            _check_resources(tail)  # no thread or memory for it: the host's trouble
            if status < 0:
                raise BrowserKilled(
                    f"Chromium was killed by signal {-status} before it was ready: {tail}"
                )
            raise BrowserUnavailable(
                f"Chromium exited with status {status} before it was ready: {tail}"
            )
        if time.monotonic() > deadline:
            raise BrowserUnavailable(
                f"Chromium did not open its DevTools port in {timeout:g} s: {_tail(profile)}"
            )
        time.sleep(0.01)


def _check_resources(said: str) -> None:
    """`OutOfResources` naming the line of `said` that tells of a resource refused, if any."""
    for line in said.splitlines():
        for part in line.split(" | "):
            if any(phrase in part for phrase in resources.RESOURCE_MESSAGES):
                raise OutOfResources(f"out of resources: Chromium could not start: {part.strip()}")


def _tail(profile: Path) -> str:
    try:
        text = (profile / "chromium.log").read_bytes()[-STDERR_TAIL_CHARS:]
    except OSError:
        return "(no output)"
    lines = [line.strip() for line in text.decode(errors="replace").splitlines() if line.strip()]
    return " | ".join(lines[-5:]) or "(no output)"


def _remove_stale_profiles() -> None:
    """Remove the profiles of children that no longer run (a killed child cannot clean up)."""
    for path in Path(tempfile.gettempdir()).glob(f"{PROFILE_PREFIX}*"):
        owner = path.name[len(PROFILE_PREFIX) :].split("-", 1)[0]
        if owner.isdigit() and not _running(int(owner)):
            shutil.rmtree(path, ignore_errors=True)


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


_current: ChildBrowser | None = None


def child_browser(beat: Callable[[], None] = lambda: None) -> ChildBrowser:
    """This child's browser: launched on first use, reused after, launched again once dead
    (`beat`: see `launch`)."""
    global _current
    if _current is not None and _current.alive():
        return _current
    if _current is not None:
        log.warning("browser found dead, launching another", pid=_current.pid)
        _current.close()
        _current = None
        beat()
    _current = launch(beat=beat)
    return _current


def discard_child_browser() -> None:
    """Stop this child's browser and its driver, if any (a test that needs fresh ones)."""
    global _current
    if _current is not None:
        _current.close()
        _current = None
    driver.discard()
