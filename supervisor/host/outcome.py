"""How a job's run on this host ended: a closed set, one member per way a settlement ends.

The settler returns one for every job (`supervisor.host.settle`) and the metrics count jobs by
it (`supervisor.metrics.registry`), which must know every member before the first job ends; so
it lives below both.
"""

from __future__ import annotations

from typing import Literal

JobOutcome = Literal[
    "completed",  # the child's results were recorded and the job acknowledged
    "retried",  # it failed or crashed its child; queued again with backoff
    "failed",  # it failed for good (final attempt, a failure no retry mends, crashed too often)
    "cancelled",  # a cancel was asked and the job stopped
    "lost",  # the lease was no longer ours: nothing recorded, the new owner settles it
    "dropped",  # malformed data: failed without running
    "unhandled",  # no handler for its kind: failed without running
    "released",  # given back without spending an attempt (drain, or the child died before starting)
]
