"""The image-engine check a child runs when it starts: a host that cannot diff must not claim.

It runs in the child, never in the fork server: a process that ran a libvips operation and then
forks can deadlock its children.
"""

from __future__ import annotations

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


def set_threads(threads: int) -> None:
    """Worker threads libvips may use in this child, so that children x threads fits the CPUs."""
    import pyvips

    pyvips.concurrency_set(max(1, threads))
