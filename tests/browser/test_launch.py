"""The child's browser as a process: in the child's group, reused, gone with the child, and a
missing executable said in one line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from child.browser.launch import (
    LAUNCH_TRIES,
    BrowserKilled,
    BrowserUnavailable,
    ChildBrowser,
    ChromiumNotFound,
    child_browser,
    launch,
)
from child.worker.resources import OutOfResources
from ipc import storybook
from ipc.storybook import CHROMIUM_VARIABLE, configured_chromium
from tests.chromium import require_chromium

ROOT = Path(__file__).resolve().parents[2]
#: A stand-in child: its own process group (as the fork server makes it), one browser, then sleep.
HOLDER = """
import sys, time
from child.browser.launch import launch
browser = launch()
print("browser", browser.pid, flush=True)
time.sleep(120)
"""


def test_a_missing_executable_is_one_line_that_says_what_to_do(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    missing = tmp_path / "no-chromium"
    monkeypatch.setenv(CHROMIUM_VARIABLE, str(missing))
    assert configured_chromium() == str(missing)
    with pytest.raises(ChromiumNotFound) as raised:
        launch()
    assert str(raised.value) == (
        f"Chromium not found at {missing}: install Debian's chromium-headless-shell package "
        "(apt-get install chromium-headless-shell) or give run --chromium PATH"
    )


def test_with_none_named_the_first_installed_browser_is_taken(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    shell, full = tmp_path / "headless-shell", tmp_path / "chromium"
    monkeypatch.delenv(CHROMIUM_VARIABLE, raising=False)
    monkeypatch.setattr(storybook, "DEFAULT_CHROMIUMS", (str(shell), str(full)))
    assert configured_chromium() == str(full), "none installed: the last, for the message"
    full.write_text("#!/bin/sh\n")
    full.chmod(0o755)
    shell.write_text("#!/bin/sh\n")  # there, but not executable: not a browser
    assert configured_chromium() == str(full)
    shell.chmod(0o755)
    assert configured_chromium() == str(shell)
    monkeypatch.setenv(CHROMIUM_VARIABLE, str(full))
    assert configured_chromium() == str(full), "a browser named is taken as named"


def _fake_chromium(folder: Path, says: str, status: int) -> str:
    fake = folder / "chromium"
    fake.write_text(f"#!/bin/sh\necho '{says}' >&2\nexit {status}\n")
    fake.chmod(0o755)
    return str(fake)


def test_a_browser_that_exits_at_start_says_so_with_its_last_words(tmp_path: Path) -> None:
    with pytest.raises(BrowserUnavailable) as raised:
        launch(_fake_chromium(tmp_path, "cannot open display: nothing here", 3))
    assert str(raised.value) == (
        "Chromium exited with status 3 before it was ready: cannot open display: nothing here"
    )


def _chromium_killed_at_start(folder: Path, times: int) -> str:
    """A Chromium that is SIGKILLed as it starts its first `times` launches, then the real one."""
    fake, count = folder / "chromium", folder / "launches"
    fake.write_text(
        f"#!/bin/sh\necho x >> {count}\n"
        f'if [ "$(wc -l < {count})" -le {times} ]; then kill -KILL $$; fi\n'
        f'exec {configured_chromium()} "$@"\n'
    )
    fake.chmod(0o755)
    return str(fake)


def test_a_browser_killed_while_it_starts_is_launched_again(tmp_path: Path) -> None:
    started = launch(_chromium_killed_at_start(tmp_path, LAUNCH_TRIES - 1))
    try:
        assert started.alive()
        assert len((tmp_path / "launches").read_text().splitlines()) == LAUNCH_TRIES
    finally:
        started.close()


def test_a_browser_killed_at_every_start_gives_up_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(BrowserKilled) as raised:
        launch(_chromium_killed_at_start(tmp_path, LAUNCH_TRIES))
    assert str(raised.value).startswith("Chromium was killed by signal 9 before it was ready")
    assert "\n" not in str(raised.value)
    assert len((tmp_path / "launches").read_text().splitlines()) == LAUNCH_TRIES


def test_a_browser_that_dies_for_want_of_processes_after_its_port_is_the_hosts_trouble(
    tmp_path: Path,
) -> None:
    """Announces a port, says it cannot fork and dies of SIGTRAP (what Debian's Chromium does
    under a pids limit): not a browser killed (tried again), but the host's trouble."""
    fake = tmp_path / "chromium"
    fake.write_text(
        "#!/bin/sh\n"
        'for arg in "$@"; do case "$arg" in --user-data-dir=*) profile="${arg#*=}";; esac; done\n'
        'echo 1 > "$profile/DevToolsActivePort"\n'
        "echo '/usr/bin/chromium: 121: Cannot fork' >&2\n"
        "sleep 0.5\n"
        "kill -TRAP $$\n"
    )
    fake.chmod(0o755)
    with pytest.raises(OutOfResources, match="Cannot fork"):
        launch(str(fake))


def test_a_browser_without_threads_at_start_is_the_hosts_trouble(tmp_path: Path) -> None:
    says = "pthread_create: Resource temporarily unavailable (11)"
    with pytest.raises(OutOfResources):
        launch(_fake_chromium(tmp_path, says, 1))


def test_the_browser_is_in_the_childs_group_and_reused(browser: ChildBrowser) -> None:
    assert os.getpgid(browser.pid) == os.getpgid(0)
    assert child_browser() is browser
    page = browser.browser.new_page()
    assert page.evaluate("1 + 1") == 2
    page.close()


def test_a_browser_found_dead_is_replaced_beating_between_the_blocking_steps(
    browser: ChildBrowser,
) -> None:
    """Closing the dead browser, starting the driver and connecting each block the child's
    main thread: a beat between them keeps the parent's stall watchdog from taking a relaunch
    on a loaded host for a hang."""
    os.kill(browser.pid, signal.SIGKILL)
    browser.process.wait()
    beats: list[float] = []
    again = child_browser(beat=lambda: beats.append(time.monotonic()))
    assert again is not browser and again.alive()
    assert len(beats) >= 3, "after the dead one is closed, after the port, after the driver"
    assert child_browser() is again


def _holder() -> tuple[subprocess.Popen[str], set[int]]:
    """A process in a group of its own holding a browser, and every process of its tree."""
    require_chromium()
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert holder.stdout is not None
        line = ""
        while not line.startswith("browser "):  # the launch logs a line of its own first
            line = holder.stdout.readline()
            assert line, "the holder exited before its browser was up"
        browser_pid = int(line.split()[1])
        tree = {holder.pid, *(p.pid for p in psutil.Process(holder.pid).children(recursive=True))}
        assert browser_pid in tree
        assert sum(1 for pid in tree if "chromium" in _name(pid)) >= 3, "browser, zygote, renderer"
    except BaseException:
        os.killpg(holder.pid, signal.SIGKILL)
        holder.wait()
        raise
    return holder, tree


def _name(pid: int) -> str:
    try:
        return psutil.Process(pid).name()
    except psutil.Error:
        return ""


def _left(tree: set[int], seconds: float = 10.0) -> list[int]:
    """The processes of `tree` still running after at most `seconds` (zombies do not run)."""
    deadline = time.monotonic() + seconds
    while True:
        running = []
        for pid in tree:
            try:
                if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                    running.append(pid)
            except psutil.Error:
                continue
        if not running or time.monotonic() > deadline:
            return running
        time.sleep(0.05)


def test_a_sigkilled_process_group_leaves_no_chromium() -> None:
    holder, tree = _holder()
    os.killpg(holder.pid, signal.SIGKILL)
    holder.wait()
    assert _left(tree) == []


def test_a_child_sigkilled_alone_takes_its_browser_with_it() -> None:
    holder, tree = _holder()
    os.kill(holder.pid, signal.SIGKILL)  # its group lives on: the death signal must end it
    holder.wait()
    left = _left(tree)
    for pid in left:  # leave nothing behind for the next test, whatever the verdict
        os.kill(pid, signal.SIGKILL)
    assert left == []
