"""Where a story's time goes: laps of one clock, by phase.

A shard's capture logs the sum of each phase over its stories (`story timings`, at info), so
that where capture time goes is read from any host's log and from `benchmarks/capture_bench.py`,
not guessed: the switch to the story, its render, the held clock run to the end of its motion,
assets, the quiet-network window, the shots (with the ignore boxes), then storing, diffing and
reporting progress.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Literal

#: The phases of one story's capture, in the order they run.
Phase = Literal[
    "page", "show", "render", "motion", "assets", "quiet", "shots", "store", "diff", "progress",
]  # fmt: skip


class Stopwatch:
    """Seconds per phase since the last `restart`: each `lap` charges the time since the one
    before to its phase."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._last = clock()
        self.laps: dict[Phase, float] = {}

    def restart(self) -> None:
        self.laps = {}
        self._last = self._clock()

    def lap(self, phase: Phase) -> None:
        now = self._clock()
        self.laps[phase] = self.laps.get(phase, 0.0) + now - self._last
        self._last = now


def add(totals: dict[Phase, float], laps: Mapping[Phase, float]) -> None:
    """Add one story's `laps` into a shard's `totals`."""
    for phase, seconds in laps.items():
        totals[phase] = totals.get(phase, 0.0) + seconds
