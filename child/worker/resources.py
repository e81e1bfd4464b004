"""A child that runs out of threads, memory, file descriptors or disk is in trouble of the host's
making (a pids limit, a full disk), not the image's: the snapshot must not be failed for it.

libvips reports such a failure as an ordinary error (through glib: "Error creating thread:
Resource temporarily unavailable"), the kernel as an `OSError` with its errno; `check` turns
either into `OutOfResources`, which the capture lets escape and the child's loop answers with
`Unable`: the job goes back to the queue without spending an attempt (for this host, once it has
what it needs again, or another), instead of its snapshot being recorded as failed for good.
"""

from __future__ import annotations

import errno

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
)


class OutOfResources(Exception):
    """The child could not get a thread, memory, a descriptor or disk space: not the job's fault."""


def check(error: BaseException) -> None:
    """Raise `OutOfResources` from `error` when it says a resource ran out; else return."""
    if isinstance(error, OSError) and error.errno in RESOURCE_ERRNOS:
        raise OutOfResources(f"out of resources: {error.strerror or error}") from error
    if isinstance(error, pyvips.Error):
        text = f"{error.message or ''}\n{error.detail or ''}"
        for phrase in RESOURCE_MESSAGES:
            if phrase in text:
                line = next((ln.strip() for ln in text.splitlines() if phrase in ln), phrase)
                raise OutOfResources(f"out of resources: {line}") from error
