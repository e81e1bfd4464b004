"""The image-engine check a child runs when it starts: a host that cannot diff must not claim.

It runs in the child, never in the fork server: a process that ran a libvips operation and then
forks can deadlock its children.
"""

from __future__ import annotations

import contextlib
import ctypes
import time

#: How long a child waits before trying the check again when it lacked a thread or memory.
RESOURCE_RETRY_SECONDS = 0.25


def check_engine() -> tuple[str, str | None]:
    """("libvips X.Y.Z", None) when libvips loads and computes; ("", why) otherwise.

    A check that fails for want of a thread or memory (a pids limit at the moment the child
    starts) says nothing about the engine: it is tried again until it can answer, and the
    parent, which waits for the hello, decides how long that may take.
    """
    while True:
        try:
            import pyvips

            probe = pyvips.Image.black(2, 2) + 1
            if probe.avg() != 1.0:
                return "", "libvips computed a wrong value in its self-check"
            return f"libvips {pyvips.version(0)}.{pyvips.version(1)}.{pyvips.version(2)}", None
        except Exception as error:
            if not _lacks_resources(error):
                return "", f"{type(error).__name__}: {error}"
        time.sleep(RESOURCE_RETRY_SECONDS)


def _lacks_resources(error: Exception) -> bool:
    """Whether `error` is a thread or memory the child could not get; False for a libvips so
    broken that it cannot even be asked."""
    try:
        from child.worker import resources
    except Exception:
        return False
    try:
        resources.check(error)
    except resources.OutOfResources:
        return True
    except Exception:
        return False
    return False


def configure_libvips(threads: int) -> None:
    """libvips in this child: the worker threads it may use, so that children x threads fits
    the CPUs; and no cache of operations: libvips keeps the last 100 (up to 100 MB of their
    pixels) for one asked again with the same arguments, which a child never does (each shot,
    each diff is of new pixels), and a capture's decoded frames kept a slot 50 MiB above its
    peak."""
    import pyvips

    pyvips.concurrency_set(max(1, threads))
    pyvips.cache_set_max(0)


#: glibc's `mallopt` parameter for the size from which an allocation is a mapping of its own.
_M_MMAP_THRESHOLD = -3
#: A capture decodes frames of megabytes, two at a time; from this size (glibc's initial
#: threshold, which it otherwise raises after the first such block is freed) each is mapped
#: and unmapped, so a child's memory falls back after each shot instead of keeping its peak.
MMAP_THRESHOLD_BYTES = 128 * 1024


def return_large_blocks() -> None:
    """Have glibc give large blocks back to the kernel as they are freed (see
    `MMAP_THRESHOLD_BYTES`); nothing where the C library is not glibc."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)
