"""A host told to stop: it claims nothing more, and its running jobs have until a deadline.

The first SIGTERM or SIGINT starts the drain with `drain_seconds` to go; a second one moves the
deadline to now, so what is still running is given back at once.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Drain:
    """The drain's deadline, on the caller's clock."""

    seconds: float
    #: When running jobs are given back (monotonic); None while the host is not draining.
    until: float | None = None

    @property
    def active(self) -> bool:
        """The host was told to stop: it claims nothing more."""
        return self.until is not None

    def begin(self, now: float) -> None:
        """The first signal: running jobs have `seconds` to finish."""
        self.until = now + self.seconds

    def hurry(self, now: float) -> None:
        """A second signal: give everything back now."""
        self.until = now

    def over(self, now: float) -> bool:
        """Whether what still runs must be given back now."""
        return self.until is not None and now >= self.until
