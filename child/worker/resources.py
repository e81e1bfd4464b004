"""A child that runs out of threads, memory, file descriptors or disk is in trouble of the host's
making (a pids limit, a full disk), not the image's: the snapshot must not be failed for it.

libvips reports such a failure as an ordinary error (through glib: "Error creating thread:
Resource temporarily unavailable"), the kernel as an `OSError` with its errno; `check` turns
either into `OutOfResources`, which the capture lets escape and the child's loop answers with
`Unable`: the job goes back to the queue without spending an attempt (for this host, once it has
what it needs again, or another), instead of its snapshot being recorded as failed for good.

A browser says less: a renderer that Chromium could not start under a pids limit is only a page
that crashed, or one that never loaded. The kernel keeps count, though: every pids cgroup has a
`pids.events` whose `max` line counts the forks (processes and threads) it refused.
`RefusedForks` marks that count before a story, a plan or a launch, and `blame` turns a failure
that came with refusals into `OutOfResources`, while one without stays the job's.
"""

from __future__ import annotations

import errno
from collections.abc import Callable
from pathlib import Path

import pyvips

#: The errnos of a resource the host ran out of, not of a bad file.
RESOURCE_ERRNOS = frozenset(
    {errno.EAGAIN, errno.ENOMEM, errno.ENOSPC, errno.EDQUOT, errno.EMFILE, errno.ENFILE}
)
#: How glib and libvips word the same failures.
RESOURCE_MESSAGES = (
    "Error creating thread",
    "Resource temporarily unavailable",
    "Cannot allocate memory",
    "out of memory",
    "No space left on device",
    "Too many open files",
    "Cannot fork",  # the shell that starts Chromium (Debian's /usr/bin/chromium is a script)
    "can't start new thread",  # Python's own threads: RuntimeError from Thread.start
)


class OutOfResources(Exception):
    """The child could not get a thread, memory, a descriptor or disk space: not the job's fault."""


def check(error: BaseException) -> None:
    """Raise `OutOfResources` from `error` when it says a resource ran out; else return."""
    if isinstance(error, OSError) and error.errno in RESOURCE_ERRNOS:
        raise OutOfResources(f"out of resources: {error.strerror or error}") from error
    if isinstance(error, RuntimeError) and "can't start new thread" in str(error):
        raise OutOfResources(f"out of resources: {error}") from error
    if isinstance(error, pyvips.Error):
        text = f"{error.message or ''}\n{error.detail or ''}"
        for phrase in RESOURCE_MESSAGES:
            if phrase in text:
                line = next((ln.strip() for ln in text.splitlines() if phrase in ln), phrase)
                raise OutOfResources(f"out of resources: {line}") from error


#: Where the kernel says which cgroups a process is in, and where they are mounted.
PROC_CGROUP = Path("/proc/self/cgroup")
PROC_MOUNTINFO = Path("/proc/self/mountinfo")


def fork_refusals(cgroup: Path = PROC_CGROUP, mountinfo: Path = PROC_MOUNTINFO) -> dict[Path, int]:
    """The forks refused so far by each pids cgroup this process is in, its own and every
    ancestor's, by the `pids.events` file that counts them (cgroup v1 and v2).

    Ancestors too, since the limit that refuses may be set at any level, and kernels differ in
    which group counts the refusal (the forking task's own, up to 6.12; the limited one's after).
    Empty where no pids controller is mounted. Read afresh each time: a process can be moved to
    another group while it runs.
    """
    try:
        mounts = mountinfo.read_text().splitlines()
        memberships = cgroup.read_text().splitlines()
    except OSError:
        return {}
    v1: tuple[str, Path] | None = None  # (the mount's root within the hierarchy, mount point)
    v2: tuple[str, Path] | None = None
    for line in mounts:
        before, _, after = line.partition(" - ")
        fields, kind = before.split(), after.split()
        if len(fields) < 5 or len(kind) < 3:
            continue
        mount = (fields[3], Path(fields[4]))
        if kind[0] == "cgroup" and "pids" in kind[2].split(","):
            v1 = mount
        elif kind[0] == "cgroup2" and v2 is None:
            v2 = mount
    counts: dict[Path, int] = {}
    for line in memberships:
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if "pids" in controllers.split(",") and v1 is not None:
            counts.update(_refusals_up_from(v1, path))
        elif hierarchy == "0" and v2 is not None:
            counts.update(_refusals_up_from(v2, path))
    return counts


def _refusals_up_from(mount: tuple[str, Path], path: str) -> dict[Path, int]:
    root, point = mount
    relative = path[len(root) :] if path.startswith(root) else path
    group = point / relative.strip("/")
    counts: dict[Path, int] = {}
    while True:
        events = group / "pids.events"
        try:
            for line in events.read_text().splitlines():
                name, _, value = line.partition(" ")
                if name == "max" and value.strip().isdigit():
                    counts[events] = int(value)
        except OSError:
            pass  # no pids controller at this level (a v2 group without it, the root)
        if group == point or point not in group.parents:
            return counts
        group = group.parent


class RefusedForks:
    """A mark of the kernel's refused forks, taken when made: what broke after it, while forks
    were being refused, broke for want of a process or a thread."""

    def __init__(self, read: Callable[[], dict[Path, int]] = fork_refusals) -> None:
        self._read = read
        self._mark = read()

    def since(self) -> int:
        """How many forks the pids cgroups refused since the mark (a group joined since counts
        from zero)."""
        return sum(max(0, n - self._mark.get(path, 0)) for path, n in self._read().items())

    def blame(self, failure: str) -> None:
        """Raise `OutOfResources` for `failure` when forks were refused since the mark."""
        refused = self.since()
        if refused:
            raise OutOfResources(
                f"out of resources: the pids limit refused {refused} fork(s) meanwhile: {failure}"
            )
