"""Beats for a job while its child waits on a server: the artifact store, a webhook.

A call to a server that does not answer waits out its timeouts (a bucket's and boto3's
retries, `ipc.artifacts.s3`: tens of seconds at worst; a webhook's) on the thread that runs
the job, which then reports no progress; the host would kill the child as hung and count a
crash against the job, where a server that is slow or away is a transient fault of the host's
surroundings (a retry of the job, never a crash). So such a call runs under `beating`: a thread
of its own reports progress every `BEAT_SECONDS` until the call returns, for at most as long as
the call's own timeouts allow, past which a call that still blocks is the stall watchdog's to
end, as any hang is.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from child.worker.resources import OutOfResources

#: Between two beats while a call blocks (a host's shortest stall is seconds).
BEAT_SECONDS = 1.0

Beat = Callable[[], object]


@contextmanager
def beating(
    beat: Beat, longest_seconds: float, clock: Callable[[], float] = time.monotonic
) -> Iterator[None]:
    """Call `beat` every `BEAT_SECONDS` from a thread of its own while the block runs, for at
    most `longest_seconds` (what the call's timeouts allow, and a margin)."""
    done = threading.Event()
    give_up_at = clock() + longest_seconds

    def keep_beating() -> None:
        while not done.wait(BEAT_SECONDS) and clock() < give_up_at:
            beat()

    thread = threading.Thread(target=keep_beating, name="beat", daemon=True)
    try:
        thread.start()
    except RuntimeError as error:  # no thread to be had: the host's trouble, not the job's
        raise OutOfResources(f"out of resources: {error}") from error
    try:
        yield
    finally:
        done.set()
        thread.join()
