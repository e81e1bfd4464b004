"""How much memory a child holds: its whole process tree's, browser included, as the memory
limits count it.

The measure is the sum of the proportional set sizes (PSS) of the child and everything it
started. A child's browser is a dozen processes that share most of their pages: the sum of their
resident sizes counts each shared page a dozen times, PSS counts it once, split among its
sharers, so the total is what the host would get back by killing the child.

PSS costs: the kernel walks every mapping of the process, and a Chromium process has thousands
(a child's browser took ~0.1 CPU s per reading, measured, against 0.3 ms for the child alone).
So the child itself, where libvips can balloon between two readings, is read every time, and its
descendants at most every `DESCENDANTS_SECONDS`, their last reading standing in between: a
browser's growth is bounded by the 15 s render cap, and its page is closed or killed after it.
"""

from __future__ import annotations

import contextlib

import psutil

#: How long a descendant's PSS reading stands before it is read again.
DESCENDANTS_SECONDS = 5.0


class TreeMemory:
    """PSS of children's process trees, descendants' readings kept for a while (see module)."""

    def __init__(self) -> None:
        #: pid -> (when read, PSS in bytes), for the descendants of children.
        self._readings: dict[int, tuple[float, int]] = {}

    def measure(self, pids: list[int], now: float) -> dict[int, int]:
        """Bytes each process of `pids` and its descendants hold (0 for one that is gone);
        readings of processes no longer seen are dropped, for pids are reused."""
        seen: set[int] = set()
        totals = {pid: self._tree(pid, now, seen) for pid in pids}
        self._readings = {pid: r for pid, r in self._readings.items() if pid in seen}
        return totals

    def _tree(self, pid: int, now: float, seen: set[int]) -> int:
        try:
            process = psutil.Process(pid)
            total = int(process.memory_full_info().pss)
            descendants = process.children(recursive=True)
        except psutil.Error:
            return 0
        for descendant in descendants:
            seen.add(descendant.pid)
            total += self._descendant(descendant, now)
        return total

    def _descendant(self, process: psutil.Process, now: float) -> int:
        reading = self._readings.get(process.pid)
        if reading is not None and now - reading[0] < DESCENDANTS_SECONDS:
            return reading[1]
        with contextlib.suppress(psutil.Error):
            self._readings[process.pid] = (now, int(process.memory_full_info().pss))
            return self._readings[process.pid][1]
        return 0
