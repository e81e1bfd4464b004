"""The child's side of a `notify` job: POST the request the parent made to the webhook.

The request comes whole (`ipc.notify.NotifyPayload`): body bytes, headers, signature included,
and a timeout. What the webhook's answer means for the job:

* 2xx: delivered; the result says the status;
* 5xx, 408, 429, a timeout, a refused or dropped connection: the receiver may take it later,
  so the handler raises and the queue retries it with its backoff (`JobError`);
* any other status (4xx, and 3xx: redirects are not followed, since a POST redirected is
  either dropped or sent where nobody configured it): no retry will change the answer, so the
  job fails at once (`PermanentFailure`) with the status and the first line of the body.
"""

from __future__ import annotations

import http.client
import time
import urllib.error
import urllib.request
from http import HTTPStatus
from typing import Any

from child.worker.beats import beating
from child.worker.handlers import Progress
from ipc.failures import JobError, PermanentFailure
from ipc.notify import NotifyResult

#: Statuses outside 5xx that say "not now" rather than "never".
RETRYABLE_STATUSES = frozenset({HTTPStatus.REQUEST_TIMEOUT, HTTPStatus.TOO_MANY_REQUESTS})
#: The most of an answer's body read to quote its first line in the job's error.
BODY_READ_BYTES = 4096
#: The most characters of that line kept.
QUOTED_CHARS = 200
#: A POST in flight reports progress (`child.worker.beats`), so that a webhook slow to answer
#: (up to its timeout) is never taken for a hung child, whatever `--stall-seconds` is; for this
#: much longer than its timeouts allow.
BEAT_MARGIN_SECONDS = 5.0


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A 3xx is the webhook's answer, not somewhere to go."""

    def redirect_request(self, *_args: Any, **_kwargs: Any) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirects)


def run(payload: dict[str, Any], progress: Progress) -> NotifyResult:
    """POST `payload`'s body to its URL; the status, or an error that says whether to retry."""
    timeout = float(payload["timeout_seconds"])
    request = urllib.request.Request(
        payload["url"], data=payload["body"], headers=payload["headers"], method="POST"
    )
    progress({"posting": len(payload["body"])})
    started = time.monotonic()
    try:
        with (
            beating(
                lambda: progress({"waiting_seconds": round(time.monotonic() - started, 1)}),
                # The timeout bounds connecting, and then each wait for the answer's bytes.
                2 * timeout + BEAT_MARGIN_SECONDS,
            ),
            _OPENER.open(request, timeout=timeout) as response,
        ):
            response.read(BODY_READ_BYTES)
            status, reason = int(response.status), str(response.reason or "")
    except urllib.error.HTTPError as error:
        raise _refused(error) from None
    except TimeoutError:
        raise JobError(f"the webhook did not answer within {timeout:g} s") from None
    except urllib.error.URLError as error:
        if isinstance(error.reason, TimeoutError):
            raise JobError(f"the webhook did not answer within {timeout:g} s") from None
        raise JobError(f"cannot reach the webhook: {error.reason}") from None
    except (OSError, http.client.HTTPException) as error:
        raise JobError(f"the webhook's connection failed: {error!r}") from None
    seconds = round(time.monotonic() - started, 3)
    progress({"status": status})
    return {"status": status, "reason": reason or _phrase(status), "seconds": seconds}


def _refused(error: urllib.error.HTTPError) -> JobError:
    """The webhook answered, but not with a 2xx: `webhook answered 404 Not Found: <line>`."""
    status = int(error.code)
    said = f"webhook answered {status} {error.reason or _phrase(status)}"
    line = _first_line(error)
    if line:
        said += f": {line}"
    if status >= 500 or status in RETRYABLE_STATUSES:
        return JobError(said)
    return PermanentFailure(said)


def _first_line(error: urllib.error.HTTPError) -> str:
    """The first line of the answer's body, cut to `QUOTED_CHARS`; "" when it has none."""
    try:
        head = error.read(BODY_READ_BYTES)
    except (OSError, http.client.HTTPException):
        return ""
    line = head.decode("utf-8", errors="replace").strip().split("\n", 1)[0].strip()
    return line if len(line) <= QUOTED_CHARS else f"{line[:QUOTED_CHARS]}..."


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""
