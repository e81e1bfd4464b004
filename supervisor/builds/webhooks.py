"""A project's webhooks: the URLs told when each of its builds ends (`supervisor.builds.notify`).

They live in the database beside the project's diff settings, so every host announces a build
the same way, and `project P --webhook URL` changes them in one place. A URL is kept once per
project; adding it again changes its secret only when a new one is given, so re-running a CI
setup script never drops signing by accident. A secret is never shown back: `project P` says
only whether one is set, and the password of a URL's user part is masked wherever a URL is
shown or logged (`masked_url`); it is sent as HTTP Basic authentication, never in a URL.

Where a webhook may point is judged by `ipc.webhook_target`: a URL whose host is a link-local or
cloud-metadata address is refused outright (`check_url`), and one whose host is a loopback or
private address only when the project allows it (`check_targets`). A URL with a name is judged
when it is delivered, on the addresses the name resolves to then (`child.notify.post`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

import structlog
from sqlalchemy import Connection, delete, select, update

from ipc.webhook_target import literal_address, reach, refusal
from supervisor.builds.projects import ProjectError
from supervisor.db.connection import upsert
from supervisor.db.tables import webhooks

log = structlog.get_logger(__name__)

#: The longest URL kept: longer ones are mistakes, and some receivers refuse them anyway.
MAX_URL_CHARS = 2048
#: What a secret looks like wherever the webhooks are shown.
MASK = "****"


class BadWebhookUrl(ValueError):
    """A URL no webhook can be POSTed to (the message says why)."""


class RefusedTarget(ProjectError):
    """A webhook's host is an address the project may not reach (the message says which)."""


def check_url(url: str) -> str:
    """`url` if a build's end can be POSTed there: http or https, with a host that is not a
    link-local or cloud-metadata address, and nothing a request line cannot carry; else
    `BadWebhookUrl`."""
    if len(url) > MAX_URL_CHARS:
        raise BadWebhookUrl(f"it is longer than {MAX_URL_CHARS} characters")
    if any(char.isspace() or ord(char) < 32 or ord(char) == 127 for char in url):
        raise BadWebhookUrl("it holds a space or a control character")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise BadWebhookUrl("it must start with http:// or https://")
    if not parts.hostname:
        raise BadWebhookUrl("it has no host")
    try:
        parts.port  # noqa: B018 - parsing it is the check
    except ValueError:
        raise BadWebhookUrl("its port is not a number from 0 to 65535") from None
    address = literal_address(parts.hostname)
    if address is not None and reach(address)[0] == "never":
        raise BadWebhookUrl(f"its host {parts.hostname} is {refusal(address, allow_private=True)}")
    return url


def check_targets(urls: Sequence[str], allow_private: bool) -> None:
    """`RefusedTarget` for the first of `urls` whose host is an address the project may not
    reach (a loopback or private one, unless `allow_private`)."""
    for url in urls:
        host = urlsplit(url).hostname or ""
        address = literal_address(host)
        why = None if address is None else refusal(address, allow_private)
        if why is not None:
            raise RefusedTarget(f"webhook {masked_url(url)}: {host} is {why}")


@dataclass(frozen=True)
class Webhook:
    """One of a project's webhooks, as the database has it."""

    id: int
    project_id: int
    url: str
    secret: str | None
    created_at: datetime

    def shown(self) -> dict[str, Any]:
        """What `project P --json` shows: the secret masked, a password in the URL too."""
        return {
            "id": self.id,
            "url": masked_url(self.url),
            "secret": MASK if self.secret else None,
            "created_at": self.created_at.isoformat(),
        }


def masked_url(url: str) -> str:
    """`url` with the password of its user part, if any, masked. Read as `urlsplit` reads a
    URL (the authority ends at the first `/`, `?` or `#`; the user part at its last `@`; the
    password starts at the user part's first `:`), but never raising: a URL refused for being
    malformed is shown masked too."""
    scheme, sep, rest = url.partition("://")
    ends = [index for index in (rest.find(char) for char in "/?#") if index >= 0]
    end = min(ends, default=len(rest))
    userinfo, at, host = rest[:end].rpartition("@")
    if not sep or not at or ":" not in userinfo:
        return url
    return f"{scheme}://{userinfo.partition(':')[0]}:{MASK}@{host}{rest[end:]}"


@dataclass(frozen=True)
class WebhookChange:
    """What a `project` command asked of the webhooks, done in this order: all removed
    (`clear`), these removed (`remove`), these added or given the new `secret` (`add`)."""

    add: Sequence[str] = ()
    secret: str | None = None
    remove: Sequence[str] = ()
    clear: bool = False


def change_webhooks(conn: Connection, project_id: int, change: WebhookChange) -> list[Webhook]:
    """Apply `change` to the project's webhooks; `ProjectError` for a URL to remove that the
    project does not have (nothing is changed then: the caller's transaction rolls back)."""
    if change.secret is not None and not change.add:
        raise ProjectError("--webhook-secret signs the webhooks given with --webhook: name one")
    if change.secret is not None and not change.secret:
        raise ProjectError("a webhook secret must not be empty")
    if change.clear:
        gone = conn.execute(delete(webhooks).where(webhooks.c.project_id == project_id)).rowcount
        log.info("webhooks removed", project_id=project_id, count=gone)
    for url in change.remove:
        _remove(conn, project_id, url)
    for url in change.add:
        _add(conn, project_id, check_url(url), change.secret)
    return project_webhooks(conn, project_id)


def _remove(conn: Connection, project_id: int, url: str) -> None:
    gone = conn.execute(
        delete(webhooks).where(webhooks.c.project_id == project_id, webhooks.c.url == url)
    ).rowcount
    if not gone:
        raise ProjectError(f"the project has no webhook {masked_url(url)}")
    log.info("webhook removed", project_id=project_id, url=masked_url(url))


def _add(conn: Connection, project_id: int, url: str, secret: str | None) -> None:
    """Add `url`, or give it `secret` if the project has it already (a secret it had stays
    when none is given). The insert skips a URL that exists, so two commands adding it at
    once both succeed."""
    added = conn.execute(
        upsert(conn, webhooks)
        .values(project_id=project_id, url=url, secret=secret)
        .on_conflict_do_nothing()
    ).rowcount
    mine = (webhooks.c.project_id == project_id) & (webhooks.c.url == url)
    if added:
        log.info("webhook added", project_id=project_id, url=masked_url(url), signed=bool(secret))
    elif secret is not None:
        conn.execute(update(webhooks).where(mine).values(secret=secret))
        log.info("webhook secret changed", project_id=project_id, url=masked_url(url))


def project_webhooks(conn: Connection, project_id: int) -> list[Webhook]:
    """The project's webhooks, oldest first."""
    rows = conn.execute(
        select(webhooks).where(webhooks.c.project_id == project_id).order_by(webhooks.c.id)
    )
    return [Webhook(**row._mapping) for row in rows]


def load_webhook(conn: Connection, webhook_id: int) -> Webhook | None:
    """Webhook `webhook_id`; None when it was removed."""
    row = conn.execute(select(webhooks).where(webhooks.c.id == webhook_id)).one_or_none()
    return None if row is None else Webhook(**row._mapping)
