"""How a handler says why its job failed, and whether trying again could help.

Any other exception a handler raises is an error the queue retries with backoff, reported as
its type and message (`RuntimeError: ...`). These say it in words for people:

* `JobError`: the job's error is the message alone; the queue retries it as usual;
* `PermanentFailure`: no retry can mend it (a webhook that answers 404, a payload no attempt
  will accept): the job fails at once, without spending its other attempts. It travels as
  `Failed(final=True)` (`ipc.messages`); the parent's `prepare` may raise it too.

Any kind may use them; failing a job for good never fails anything else by itself: the job's
kind decides, in its `on_failed`, what that failure means for its build.
"""

from __future__ import annotations


class JobError(Exception):
    """A failure the job's error states in full: its message, without the exception's type."""


class PermanentFailure(JobError):
    """A failure no retry can mend: the job fails at once, on any attempt."""
