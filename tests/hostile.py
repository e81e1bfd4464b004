"""The hostile Storybook (`tests/fixtures/storybook/hostile/`): stories that try to leave the
page (sockets, WebRTC, the host's disk) or break it for the stories after them, and what the
tests watch them with.

The build is stored with a `target.json` that aims its stories at `Listeners` of the test: a
TCP port (what a WebSocket or a TURN-over-TCP server would be) and a UDP port (STUN, TURN).
Whatever reaches a listener is counted; nothing may.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import tempfile
import threading
from pathlib import Path

from child.browser.launch import PROFILE_PREFIX

HOSTILE = Path(__file__).resolve().parent / "fixtures" / "storybook" / "hostile-static"
WEB_SOCKET = "hostile-network--web-socket-to-loopback"
WEB_RTC = "hostile-network--web-rtc-to-any-address"
DOWNLOAD = "hostile-disk--downloads-a-blob"
BREAKS_THE_PAGE = "hostile-page--removes-the-root"
PLAIN = "hostile-page--plain"
LEAVES_A_GLOBAL = "hostile-page--leaves-a-global-behind"
FAILS_AFTER_IT = "hostile-page--fails-on-a-page-left-changed"
#: The hostile stories that fail by design, each with the end of its error: workers that
#: throw, never activate, spin, answer without end, or come by the thousand.
FAILS_BY_DESIGN = {
    "hostile-workers--registers-a-worker-that-throws": "ServiceWorker script evaluation failed",
    "hostile-workers--registers-a-worker-that-never-activates": (
        "waiting on a service worker that never activated (./worker-never.js)"
    ),
    "hostile-workers--registers-a-worker-that-spins": (
        "waiting on a service worker that never activated (./worker-loops.js)"
    ),
    "hostile-workers--reads-an-endless-answer": "waiting on api/stream still loading",
    "hostile-workers--registers-a-thousand-workers": (
        "the story registered more than 8 service workers"
    ),
}
#: What the download story would leave on disk, at the least.
DOWNLOAD_BYTES = 64 * 1024 * 1024


class Listeners:
    """A TCP and a UDP socket on loopback, and whatever reaches them."""

    def __init__(self) -> None:
        self.tcp = socket.create_server(("127.0.0.1", 0))
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", 0))
        self.udp.settimeout(0.1)
        self.tcp.settimeout(0.1)
        self.reached: list[str] = []
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._accept, daemon=True),
            threading.Thread(target=self._receive, daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    @property
    def ports(self) -> dict[str, int]:
        return {"tcp": self.tcp.getsockname()[1], "udp": self.udp.getsockname()[1]}

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                connection, peer = self.tcp.accept()
            except TimeoutError:
                continue
            with connection:
                connection.settimeout(1.0)
                with contextlib.suppress(OSError):
                    self.reached.append(f"tcp from {peer}: {connection.recv(200)!r}")

    def _receive(self) -> None:
        while not self._stop.is_set():
            try:
                data, peer = self.udp.recvfrom(2048)
            except TimeoutError:
                continue
            self.reached.append(f"udp from {peer}: {data[:40]!r}")

    def close(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()
        self.tcp.close()
        self.udp.close()


def aimed_copy(folder: Path, listeners: Listeners) -> Path:
    """A copy of the hostile build in `folder`, its `target.json` naming `listeners`."""
    copy = folder / "hostile-static"
    shutil.copytree(HOSTILE, copy)
    (copy / "target.json").write_text(json.dumps(listeners.ports))
    return copy


def large_files(temporary: Path | None = None) -> list[str]:
    """Files of half a hostile download's size or more where a download lands: Playwright's
    artifacts and the browser's profile in `temporary` (this process's), the user's folder."""
    temporary = temporary or Path(tempfile.gettempdir())
    folders = [
        *temporary.glob("playwright-artifacts-*"),
        *temporary.glob(f"{PROFILE_PREFIX}*"),
        Path.home() / "Downloads",
    ]
    found = []
    for folder in folders:
        for root, _dirs, files in os.walk(folder):
            for name in files:
                path = Path(root, name)
                with contextlib.suppress(OSError):
                    if path.stat().st_size >= DOWNLOAD_BYTES // 2:
                        found.append(str(path))
    return found
