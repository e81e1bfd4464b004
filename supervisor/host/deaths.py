"""Why a child died, read once from its wait status (and the cgroup's OOM counter).

A SIGKILL the parent did not send is most often the kernel's out-of-memory killer; where the
cgroup's `memory.events` shows a new `oom_kill`, the cause says so for certain.
"""

from __future__ import annotations

import os
import re
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from supervisor.host.sizing import own_cgroup_dir

#: Why the parent killed a child; its death is then read with this reason, not its signal.
KillReason = Literal[
    "cancelled",  # its job was cancelled and it did not stop within the grace
    "lost",  # its job's lease was lost and it did not stop within the grace
    "released",  # its job was given back (the drain ran out, or it waited behind a long one)
    "host stopping",  # the host is leaving
    "cannot work",  # the first child could not load the image engine, or the store is refused
    "hung",  # it said nothing of its job for `stall_seconds` (a crash)
    "memory limit",  # its process tree passed the hard memory limit (a crash)
    "protocol error",  # a garbled, oversized or unexpected frame, or another version (a crash)
]
#: Kills that end a child on purpose: its death says nothing about the host's health.
DELIBERATE_KILLS: frozenset[KillReason] = frozenset(
    {"cancelled", "lost", "released", "host stopping", "cannot work"}
)


@dataclass(frozen=True)
class Kill:
    """A kill the parent made: its reason and, for some, what exactly was wrong."""

    reason: KillReason
    detail: str | None = None

    @property
    def cause(self) -> str:
        """How the death reads in a crash count: "hung (no progress for 45 s)",
        "protocol error: undecodable frame", "memory limit"."""
        if self.detail is None:
            return self.reason
        if self.reason == "protocol error":
            return f"{self.reason}: {self.detail}"
        return f"{self.reason} ({self.detail})"


def signal_name(number: int) -> str:
    """ "SIGSEGV" for 11; a number no signal has is named as a number."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def describe_status(status: int) -> str:
    """ "SIGSEGV", "exit status 3": the short form that crash counts are named by."""
    if os.WIFSIGNALED(status):
        return signal_name(os.WTERMSIG(status))
    if os.WIFEXITED(status):
        return f"exit status {os.WEXITSTATUS(status)}"
    return f"wait status {status}"


class OomCounter:
    """Counts the cgroup's `oom_kill` events, so a new one can be pinned on the child that died."""

    def __init__(self, events: Path | None = None) -> None:
        cgroup = own_cgroup_dir()
        self._events = events or (cgroup / "memory.events" if cgroup else None)
        self._seen = self._read()

    def _read(self) -> int:
        if self._events is None:
            return 0
        try:
            for line in self._events.read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except (OSError, ValueError):
            return 0
        return 0

    def new_oom_kill(self) -> bool:
        """True when an OOM kill happened since the last call."""
        now = self._read()
        seen, self._seen = self._seen, now
        return now > seen


def death_cause(status: int, oom: OomCounter, *, killed: Kill | None = None) -> str:
    """The cause a crash is recorded with: our own reason when we killed it, else the status."""
    if killed is not None:
        return killed.cause
    cause = describe_status(status)
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL:
        return (
            f"{cause} (out of memory)" if oom.new_oom_kill() else f"{cause} (likely out of memory)"
        )
    return cause


_EXIT = re.compile(r"exit status (\d+)")
_SIGNAL = re.compile(r"(SIG[A-Z0-9]+|signal \d+)")


def cause_class(cause: str) -> str:
    """The class of a cause `death_cause` gave, few and fixed, for a metric's label (the
    detail of a stall or a frame would make a series per death).

    "SIGSEGV" stays; "SIGKILL (out of memory)" is `oom_kill`, "SIGKILL (likely out of memory)"
    is `SIGKILL`; "exit status 3" is `exit_3`; "hung (no progress for 40 s)" is `stalled`;
    "memory limit" is `memory_limit`; "protocol error: ..." is `protocol_error`.
    """
    if cause.startswith("SIGKILL (out of memory)"):
        return "oom_kill"
    if cause.startswith("hung"):
        return "stalled"
    if cause.startswith("memory limit"):
        return "memory_limit"
    if cause.startswith("protocol error"):
        return "protocol_error"
    if match := _EXIT.match(cause):
        return f"exit_{match.group(1)}"
    if match := _SIGNAL.match(cause):
        return match.group(1).replace(" ", "_")
    return "other"
