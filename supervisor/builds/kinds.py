"""The parent's side of each job kind, in one table: how to check, prepare and record a job.

The child's side (what runs) is `child.worker.handlers`. A kind here says:

* `accepts(data)`: is the job's data well-formed? False fails the job without retry
  ("malformed job");
* `prepare(conn, job, store)`: the payload the child gets, read from the database when the
  job starts (what was fixed when the job was queued, such as a capture's baselines, stays in
  its data); it may mark the job's shard and build as started;
* `record(conn, job, result)`: write the child's results, inside the transaction that
  also acknowledges the job under its fence, so results are recorded exactly once;
* `on_failed(conn, job, error)` / `on_cancelled(conn, job)`: the job ended
  without results; close whatever it belongs to (a capture shard, and its build if last).

`record`, `on_failed` and `on_cancelled` say what they did to the job's build
(`ReduceOutcome`): "finalized" tells the caller to write the build's report once the
transaction has committed.

The table of kinds a host runs is `supervisor.builds.registry`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection

from ipc.artifacts.store import ArtifactStore
from supervisor.builds.reduce import ReduceOutcome
from supervisor.db.queue import Job

Payload = dict[str, Any]


def _nothing_to_close(*_args: object) -> ReduceOutcome:
    """A kind that belongs to no build has nothing to close."""
    return "skipped"


@dataclass(frozen=True)
class Kind:
    name: str
    accepts: Callable[[Any], bool]
    #: None: the child gets the job's data as it is, and the claim needs no extra statement.
    prepare: Callable[[Connection, Job, ArtifactStore], Payload] | None = None
    #: None: the job has no results to write; acknowledging it is all.
    record: Callable[[Connection, Job, Any], ReduceOutcome] | None = None
    #: What the job's end did to its build.
    on_failed: Callable[[Connection, Job, str], ReduceOutcome] = _nothing_to_close
    on_cancelled: Callable[[Connection, Job], ReduceOutcome] = _nothing_to_close
    #: Its jobs are followed within seconds by browser jobs for every free child (a Storybook
    #: plan by its captures): while one runs, the idle children start their browsers
    #: (`ipc.messages.Warm`), which takes each a second or two it would spend at its first
    #: capture.
    warms_idle_children: bool = False
