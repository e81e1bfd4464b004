"""The child's side of a `notify` job: POST the request the parent made to the webhook.

The request comes whole (`ipc.notify.NotifyPayload`): body bytes, headers, signature and
credentials included, and a timeout. First the webhook's host is resolved and every address it
resolves to is judged (`ipc.webhook_target`): one the project may not reach (link-local, cloud
metadata; loopback and private networks without `--webhook-allow-private`) fails the job at once,
in one line, since no retry changes where a name points for long enough to matter. Then the POST
connects to those judged addresses and no other (a name that answers differently a moment later
reaches nothing unchecked), over TLS checked against the URL's host for https. What the
webhook's answer means for the job:

* 2xx: delivered; the result says the status;
* 5xx, 408, 429, a timeout, a refused or dropped connection, a name that does not resolve:
  the receiver may take it later, so the handler raises and the queue retries it with its
  backoff (`JobError`);
* any other status (4xx, and 3xx: redirects are not followed, since a POST redirected is
  either dropped or sent where nobody configured it): no retry will change the answer, so the
  job fails at once (`PermanentFailure`) with the status and the first line of the body.
"""

from __future__ import annotations

import http.client
import ipaddress
import socket
import ssl
import time
from collections.abc import Sequence
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any
from urllib.parse import urlsplit

from child.worker.beats import beating
from child.worker.handler import Progress
from ipc.failures import JobError, PermanentFailure
from ipc.notify import NotifyResult
from ipc.webhook_target import literal_address, refusal

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

#: One address a name resolved to, as `socket.getaddrinfo` gives it: family and socket address.
Resolved = tuple[socket.AddressFamily, tuple[Any, ...]]


@dataclass(frozen=True)
class Target:
    """Where the POST goes: the URL's parts, and the judged addresses of its host."""

    https: bool
    host: str
    port: int
    path: str
    addresses: Sequence[Resolved]


def run(payload: dict[str, Any], progress: Progress) -> NotifyResult:
    """POST `payload`'s body to its URL; the status, or an error that says whether to retry."""
    timeout = float(payload["timeout_seconds"])
    progress({"posting": len(payload["body"])})
    started = time.monotonic()
    with beating(
        lambda: progress({"waiting_seconds": round(time.monotonic() - started, 1)}),
        # The timeout bounds connecting, and then each wait for the answer's bytes.
        2 * timeout + BEAT_MARGIN_SECONDS,
    ):
        target = resolve(payload["url"], bool(payload["allow_private"]))
        status, reason = deliver(target, payload["body"], payload["headers"], timeout)
    seconds = round(time.monotonic() - started, 3)
    progress({"status": status})
    return {"status": status, "reason": reason or _phrase(status), "seconds": seconds}


def resolve(url: str, allow_private: bool) -> Target:
    """`url`'s host resolved, every address judged; `PermanentFailure` naming the first address
    the project may not reach, `JobError` when the name does not resolve (now)."""
    parts = urlsplit(url)
    https = parts.scheme == "https"
    host = parts.hostname or ""
    port = parts.port or (443 if https else 80)
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as error:
        raise JobError(f"cannot resolve the webhook's host {host}: {error}") from None
    addresses: list[Resolved] = []
    for family, _type, _proto, _name, sockaddr in found:
        address = ipaddress.ip_address(sockaddr[0])
        why = refusal(address, allow_private)
        if why is not None:
            said = "is" if literal_address(host) is not None else f"resolves to {address}, which is"
            raise PermanentFailure(f"webhook refused: {host} {said} {why}")
        if (family, sockaddr) not in addresses:
            addresses.append((family, sockaddr))
    path = parts.path or "/"
    return Target(https, host, port, f"{path}?{parts.query}" if parts.query else path, addresses)


def deliver(
    target: Target, body: bytes, headers: dict[str, str], timeout: float
) -> tuple[int, str]:
    """The webhook's status and reason for a 2xx; the job's error otherwise."""
    connection = (
        _JudgedHTTPS(target, timeout, ssl.create_default_context())
        if target.https
        else _JudgedHTTP(target, timeout)
    )
    try:
        try:
            connection.request("POST", target.path, body=body, headers=headers)
        except TimeoutError:
            raise JobError(f"the webhook did not answer within {timeout:g} s") from None
        except OSError as error:
            raise JobError(f"cannot reach the webhook: {error}") from None
        try:
            response = connection.getresponse()
            head = response.read(BODY_READ_BYTES)
        except TimeoutError:
            raise JobError(f"the webhook did not answer within {timeout:g} s") from None
        except (OSError, http.client.HTTPException) as error:
            raise JobError(f"the webhook's connection failed: {error!r}") from None
    finally:
        connection.close()
    status, reason = int(response.status), str(response.reason or "")
    if not 200 <= status < 300:
        raise _refused(status, reason, head)
    return status, reason


def _connect(target: Target, timeout: float) -> socket.socket:
    """A connection to the first of the judged addresses that accepts one: never to the name
    resolved again (`socket.create_connection` would ask DNS anew)."""
    failure: OSError | None = None
    for family, sockaddr in target.addresses:
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.settimeout(timeout)
            sock.connect(sockaddr)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError as error:
            sock.close()
            failure = error
            continue
        return sock
    raise failure if failure is not None else OSError(f"{target.host} resolved to no address")


class _JudgedHTTP(http.client.HTTPConnection):
    """http.client, connecting to the target's judged addresses (the Host header and the
    request stay the URL's)."""

    def __init__(self, target: Target, timeout: float) -> None:
        super().__init__(target.host, target.port, timeout=timeout)
        self.target = target
        self.seconds = timeout

    def connect(self) -> None:
        self.sock = _connect(self.target, self.seconds)


class _JudgedHTTPS(http.client.HTTPSConnection):
    """The same over TLS, whose certificate is checked against the URL's host."""

    def __init__(self, target: Target, timeout: float, tls: ssl.SSLContext) -> None:
        super().__init__(target.host, target.port, timeout=timeout, context=tls)
        self.target = target
        self.seconds = timeout
        self.tls = tls

    def connect(self) -> None:
        sock = _connect(self.target, self.seconds)
        self.sock = self.tls.wrap_socket(sock, server_hostname=self.target.host)


def _refused(status: int, reason: str, head: bytes) -> JobError:
    """The webhook answered, but not with a 2xx: `webhook answered 404 Not Found: <line>`."""
    said = f"webhook answered {status} {reason or _phrase(status)}"
    line = _first_line(head)
    if line:
        said += f": {line}"
    if status >= 500 or status in RETRYABLE_STATUSES:
        return JobError(said)
    return PermanentFailure(said)


def _first_line(head: bytes) -> str:
    """The first line of the answer's body, cut to `QUOTED_CHARS`; "" when it has none."""
    line = head.decode("utf-8", errors="replace").strip().split("\n", 1)[0].strip()
    return line if len(line) <= QUOTED_CHARS else f"{line[:QUOTED_CHARS]}..."


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""
