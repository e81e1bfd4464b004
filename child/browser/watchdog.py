"""What ends a page whose main thread hangs: Playwright cannot.

Measured: a page that spins its main thread (`while (performance.now() < Infinity) {}`) never
lets `wait_for_function` time out, nor any evaluation return; the call blocks the child until
the renderer dies, and a child blocked that long is killed by the parent as stalled, losing the
whole shard. So every story runs under a deadline kept by a thread of the child's: when it
passes, the thread kills the browser's renderers (the child has one page), the blocked call
fails with a crash, and the story fails with the watchdog's reason. The browser itself lives
on, and the next story gets a new page; only a call that waits for a renderer Chromium could
not start, with none to kill, costs the browser (`ChildBrowser.rescue`).

While a deadline is armed and not yet passed, the same thread also beats for the page (the job's
progress, every `BEAT_SECONDS`): a page call that blocks (a navigation while Chromium cannot
start a renderer under a pids limit, a screenshot of a busy page) gives the main thread no
chance to, and a child waiting on a page its deadline will end is not hung. Once the deadline
passes the beats stop, so a child whose main thread stays stuck past the rescue is still the
parent's stall watchdog's to kill.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from types import TracebackType

import structlog

from child.worker.resources import OutOfResources

log = structlog.get_logger(__name__)

#: The longest a wait on a slow (not hung) page goes between two beats: the job's progress, so
#: that the parent's stall watchdog sees a child waiting on its browser alive. A hung page gives
#: no beat; this module's watchdog ends it.
BEAT_SECONDS = 1.0
#: How often a wait on a page (a story, a preview) looks again, in milliseconds.
POLL_MS = 20
#: How long after its rescue a deadline's call may still block before the last resort: within
#: the shortest stall time a host is run with (the soak's 6 s), so that the child is not killed
#: as hung while a second rescue can still free it.
LAST_RESORT_SECONDS = 3.0


class Watchdog:
    """Calls `rescue` from its own thread when an armed deadline passes, and `last_resort`
    should the deadline's call still block `LAST_RESORT_SECONDS` later (not disarmed nor armed
    again by then); a context manager."""

    def __init__(
        self,
        rescue: Callable[[], object],
        clock: Callable[[], float] = time.monotonic,
        beat: Callable[[], object] = lambda: None,
        last_resort: Callable[[], object] | None = None,
    ):
        self._rescue = rescue
        self._last_resort = last_resort
        self._clock = clock
        self._beat = beat
        self._changed = threading.Condition()
        self._deadline: float | None = None
        #: Counts arms and disarms: the last resort is for the deadline that fired, not a later one.
        self._generation = 0
        self._beat_at = 0.0
        self._reason = ""
        self._closed = False
        #: The reason of the deadline that passed since the last `arm`, else None.
        self.fired: str | None = None
        self._thread = threading.Thread(target=self._watch, name="page-watchdog", daemon=True)
        try:
            self._thread.start()
        except RuntimeError as error:  # no thread to be had: the host's trouble, not the job's
            raise OutOfResources(f"out of resources: {error}") from error

    def arm(self, seconds: float, reason: str) -> None:
        """Rescue in `seconds` unless disarmed or armed again before; `fired` is cleared."""
        with self._changed:
            self._deadline = self._clock() + seconds
            self._generation += 1
            self._beat_at = self._clock() + BEAT_SECONDS
            self._reason = reason
            self.fired = None
            self._changed.notify()

    def disarm(self) -> None:
        with self._changed:
            self._deadline = None
            self._generation += 1
            self._changed.notify()

    @contextlib.contextmanager
    def armed(self, seconds: float, reason: str) -> Iterator[None]:
        """Armed (`arm`) for the block, disarmed however it ends; the block may arm again."""
        self.arm(seconds, reason)
        try:
            yield
        finally:
            self.disarm()

    def _watch(self) -> None:
        while True:
            with self._changed:
                while not self._closed and (
                    self._deadline is None or self._clock() < self._deadline
                ):
                    if self._deadline is None:
                        self._changed.wait()
                        continue
                    if self._clock() >= self._beat_at:
                        self._beat_for_the_page()
                    self._changed.wait(min(self._deadline, self._beat_at) - self._clock())
                if self._closed:
                    return
                self._deadline = None
                self.fired = self._reason
                fired = self._generation
            log.warning("deadline passed, rescuing", reason=self.fired)
            self._rescue()
            if self._last_resort is not None and self._still_blocked(fired):
                log.warning("still blocked after the rescue; the last resort", reason=self.fired)
                self._last_resort()

    def _still_blocked(self, fired: int) -> bool:
        """Whether `LAST_RESORT_SECONDS` pass with the deadline of generation `fired` neither
        disarmed nor armed again."""
        until = self._clock() + LAST_RESORT_SECONDS
        with self._changed:
            while not self._closed and self._generation == fired and self._clock() < until:
                self._changed.wait(until - self._clock())
            return not self._closed and self._generation == fired

    def _beat_for_the_page(self) -> None:
        """Beat, under the lock: once `disarm` returns no beat of the story is on its way."""
        self._beat_at = self._clock() + BEAT_SECONDS
        with contextlib.suppress(Exception):  # the parent gone: the child is ending anyway
            self._beat()

    def close(self) -> None:
        with self._changed:
            self._closed = True
            self._changed.notify()
        self._thread.join()

    def __enter__(self) -> Watchdog:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
