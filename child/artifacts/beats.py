"""Beats for the job while the child waits on the artifact store.

A request to a bucket that does not answer waits out its timeouts and boto3's own retries
(`ipc.artifacts.s3`: tens of seconds at worst) on the thread that runs the job, which then
reports no progress; the host would kill the child as hung and count a crash against the job,
where a store that is down is a transient fault of the host's surroundings (a retry of the job,
never a crash). So each store call runs under `beating`: a thread of its own reports progress
every `BEAT_SECONDS` until the call returns, for at most `LONGEST_CALL_SECONDS`, past which a
call that still blocks is the stall watchdog's to end, as any hang is.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from child.worker.resources import OutOfResources
from ipc.artifacts.s3 import LONGEST_REQUEST_SECONDS

#: Between two beats while a store call blocks (a host's shortest stall is seconds).
BEAT_SECONDS = 1.0
#: The longest a store call is beaten for: what its timeouts and retries allow, and a margin.
LONGEST_CALL_SECONDS = LONGEST_REQUEST_SECONDS + 10.0

Beat = Callable[[], object]


@contextmanager
def beating(beat: Beat, clock: Callable[[], float] = time.monotonic) -> Iterator[None]:
    """Call `beat` every `BEAT_SECONDS` from a thread of its own while the block runs."""
    done = threading.Event()
    give_up_at = clock() + LONGEST_CALL_SECONDS

    def keep_beating() -> None:
        while not done.wait(BEAT_SECONDS) and clock() < give_up_at:
            beat()

    thread = threading.Thread(target=keep_beating, name="store-beat", daemon=True)
    try:
        thread.start()
    except RuntimeError as error:  # no thread to be had: the host's trouble, not the job's
        raise OutOfResources(f"out of resources: {error}") from error
    try:
        yield
    finally:
        done.set()
        thread.join()
