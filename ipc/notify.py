"""What a `notify` job sends and returns: a build's end, POSTed to one of its project's webhooks.

The parent makes the request whole (`supervisor.builds.notify`): the JSON body, as the exact
bytes to send, and its headers, the signature among them, so that what is signed is what
is sent, and the child (`child.notify.post`) only POSTs it: it never reads the database and
never sees a secret. The receiver's side of the contract:

* `Content-Type: application/json`, the body UTF-8 JSON (`event`, `delivery`, `build`,
  `changed` and `failed` names, at most `LISTED_NAMES` of each, with their totals);
* `User-Agent: storyshelf/<version>`, `X-Storyshelf-Event`: the event (`EVENTS`), as the body's
  `event` says: `build.ended`, or `build.reviewed` (the body then also has the build's `review`
  state and the `decisions` taken, at most `LISTED_NAMES`, with their total);
* `X-Storyshelf-Delivery`: one id per notification, the same on each retry of it, so a
  receiver that gets it twice (its answer lost) can tell;
* `X-Storyshelf-Signature: sha256=<hex>` when the webhook has a secret: HMAC-SHA256 of the
  body's bytes, keyed with the secret (as GitHub's `X-Hub-Signature-256`);
* `Authorization: Basic ...` when the URL has a user part (`https://user:pass@host/...`): the
  user and password, percent-decoded, as HTTP Basic authentication (RFC 7617). The URL the
  child gets has no user part (`without_credentials`), so the password is in no URL that an
  error, a log line or a job's record could quote.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from importlib import metadata
from typing import Any, Literal, TypedDict, get_args
from urllib.parse import SplitResult, unquote, urlsplit

#: The events a webhook is told of: a build ended (its report published, or given up on), and
#: a person reviewed some of its snapshots.
Event = Literal["build.ended", "build.reviewed"]
EVENTS: tuple[Event, ...] = get_args(Event)
#: The most names of changed (and of failed) snapshots a body lists; the totals say the rest.
LISTED_NAMES = 100

EVENT_HEADER = "X-Storyshelf-Event"
DELIVERY_HEADER = "X-Storyshelf-Delivery"
SIGNATURE_HEADER = "X-Storyshelf-Signature"
SIGNATURE_PREFIX = "sha256="


def _version() -> str:
    try:
        return metadata.version("storyshelf-capture")
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return "0+unknown"


USER_AGENT = f"storyshelf/{_version()}"


def body_bytes(summary: dict[str, Any]) -> bytes:
    """`summary` as the bytes a webhook gets: compact UTF-8 JSON, non-ASCII names kept."""
    return json.dumps(summary, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def signature(secret: str, body: bytes) -> str:
    """`sha256=<hex>`: HMAC-SHA256 of `body` keyed with `secret` (UTF-8)."""
    digest = hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()
    return f"{SIGNATURE_PREFIX}{digest}"


def request_headers(body: bytes, delivery: str, secret: str | None, event: Event) -> dict[str, str]:
    """The headers of a notification of `event` whose body is `body`; signed when `secret` is set."""
    headers = {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        EVENT_HEADER: event,
        DELIVERY_HEADER: delivery,
    }
    if secret:
        headers[SIGNATURE_HEADER] = signature(secret, body)
    return headers


def without_credentials(url: str) -> tuple[str, str | None]:
    """`url` without its user part, and the `Authorization` header that carries that part
    instead (None when the URL has none): `Basic` and base64 of `user:password`, each
    percent-decoded, in UTF-8."""
    parts = urlsplit(url)
    userinfo, at, host = parts.netloc.rpartition("@")
    if not at:
        return url, None
    user, _, password = userinfo.partition(":")
    pair = f"{unquote(user)}:{unquote(password)}".encode()
    bare = SplitResult(parts.scheme, host, parts.path, parts.query, parts.fragment).geturl()
    return bare, f"Basic {base64.b64encode(pair).decode('ascii')}"


class NotifyPayload(TypedDict):
    """What the parent sends a `notify` job's child: the request, whole."""

    #: Without a user part: credentials travel in `headers` (`without_credentials`).
    url: str
    body: bytes
    headers: dict[str, str]
    #: How long the webhook may take to accept the connection and to answer.
    timeout_seconds: float
    #: Whether the project lets its webhooks reach loopback and private addresses
    #: (`ipc.webhook_target`); link-local and cloud metadata are refused whatever it says.
    allow_private: bool


class NotifyResult(TypedDict):
    """What the child answers when the webhook took it (a 2xx)."""

    status: int
    reason: str
    seconds: float


NOTIFY_RESULT_FIELDS = frozenset(NotifyResult.__annotations__)
