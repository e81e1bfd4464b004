"""The JSON API: a build as `build --json` shows it, and review decisions recorded from the web.

`GET /api/builds/<id>` answers `BuildView.as_json()` plus `review_api` (`"writable"` or
`"read-only"`), which tells the served report whether to show its Accept and Reject buttons.

`POST /api/builds/<id>/review` takes `{"decision": "accept" | "reject", "snapshots": [names]
(absent: every changed and new snapshot), "by": "...", "comment": "..." (optional)}` with the
bearer token (`supervisor.serve.auth`), records the decision in one transaction
(`supervisor.review.decisions.review_build`) and answers the build's new JSON, so that the page
redraws from what was stored, not from what it asked. Every refusal (token, body, a decision the
build cannot take) writes nothing and answers one line: the token is checked before the body is
read, and the body is read whole, bounded in size and time, before the database is touched.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import anyio
import structlog
from sqlalchemy import Engine
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse

from supervisor.builds.view import load_build
from supervisor.commands.options import ID_MAX
from supervisor.db.connection import transaction
from supervisor.db.tables import Decision
from supervisor.review.decisions import (
    MAX_BY,
    MAX_COMMENT,
    NoSuchBuild,
    ReviewRefused,
    review_build,
)
from supervisor.serve.auth import CHALLENGE
from supervisor.serve.context import Problem, serving

log = structlog.get_logger(__name__)

#: What the API's `decision` says -> the decision recorded.
DECISIONS: dict[str, Decision] = {"accept": "accepted", "reject": "rejected"}
#: The fields a review's body may have.
FIELDS = frozenset(("decision", "snapshots", "by", "comment"))
#: The longest snapshot name (`supervisor.builds.uploads.MAX_NAME_CHARS`, with room).
NAME_CHARS = 1000
#: No caching of answers that change with every review.
NO_STORE = {"Cache-Control": "no-store"}


@dataclass(frozen=True)
class ReviewRequest:
    """A review's body, checked."""

    decision: Decision
    #: None: every changed and new snapshot of the build.
    names: tuple[str, ...] | None
    by: str
    comment: str | None


async def build_json(request: Request) -> JSONResponse:
    """`GET /api/builds/<id>`: the build, and whether this server takes review decisions."""
    build_id = build_id_of(request)
    settings = serving(request)
    found = await run_in_threadpool(_load, settings.engine, build_id)
    return JSONResponse(found | {"review_api": settings.token.api}, headers=NO_STORE)


async def review(request: Request) -> JSONResponse:
    """`POST /api/builds/<id>/review`: record one decision and answer the build as it now is."""
    build_id = build_id_of(request)
    settings = serving(request)
    refusal = settings.token.refusal(request.headers.get("authorization"))
    if refusal is not None:
        log.warning("review refused", build_id=build_id, status=refusal.status, reason=refusal.line)
        challenge = {"WWW-Authenticate": CHALLENGE} if refusal.status == 401 else {}
        raise Problem(refusal.status, refusal.line, challenge)
    body = await read_body(request, settings.body_bytes, settings.body_seconds)
    wanted = parse_review(body)
    found = await run_in_threadpool(_record, settings.engine, build_id, wanted)
    return JSONResponse(found | {"review_api": settings.token.api}, headers=NO_STORE)


def build_id_of(request: Request) -> int:
    """The path's build id; one past what the database stores is no build (404), not an
    overflow in the driver."""
    build_id = request.path_params["build_id"]
    assert isinstance(build_id, int)
    if not 1 <= build_id <= ID_MAX:
        raise Problem(404, f"no build with id {build_id}")
    return build_id


def _load(engine: Engine, build_id: int) -> dict[str, Any]:
    with transaction(engine) as conn:
        view = load_build(conn, build_id)
    if view is None:
        raise Problem(404, f"no build with id {build_id}")
    return view.as_json()


def _record(engine: Engine, build_id: int, wanted: ReviewRequest) -> dict[str, Any]:
    """The decision recorded and the build read back, in one transaction; a refusal raised
    inside it rolls it back whole."""
    try:
        with transaction(engine) as conn:
            outcome = review_build(
                conn, build_id, wanted.decision, wanted.names, wanted.by, wanted.comment
            )
            view = load_build(conn, build_id)
    except NoSuchBuild as error:
        raise Problem(404, str(error)) from None
    except ReviewRefused as error:
        log.info("review not recorded", build_id=build_id, reason=str(error))
        raise Problem(409, str(error)) from None
    assert view is not None, "a build just reviewed is there"
    log.info(
        "review taken from the web", build_id=build_id, decision=outcome.decision, by=wanted.by
    )
    return view.as_json()


async def read_body(request: Request, limit: int, seconds: float) -> bytes:
    """The request's body, refused past `limit` bytes (413) or `seconds` (408): a review is
    small and quick to send, and a client that says otherwise holds memory or a connection."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise Problem(413, f"the body is over {limit // 1024} KiB")
    chunks: list[bytes] = []
    size = 0
    try:
        with anyio.fail_after(seconds):
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    raise Problem(413, f"the body is over {limit // 1024} KiB")
                chunks.append(chunk)
    except TimeoutError:
        raise Problem(408, f"the body took over {seconds:g} s to arrive") from None
    return b"".join(chunks)


def parse_review(body: bytes) -> ReviewRequest:
    """`body` as a review, or `Problem` 400 saying in one line what is wrong with it."""
    try:
        data = json.loads(body, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        raise _bad('the body is not JSON: send {"decision": "accept", "by": "..."}') from None
    if not isinstance(data, dict):
        raise _bad("the body is not a JSON object")
    if unknown := sorted(set(data) - FIELDS):
        raise _bad(f"unknown fields: {', '.join(unknown)} (known: {', '.join(sorted(FIELDS))})")
    decision = data.get("decision")
    if not isinstance(decision, str) or decision not in DECISIONS:
        raise _bad('"decision" must be "accept" or "reject"')
    return ReviewRequest(
        decision=DECISIONS[decision],
        names=_names(data.get("snapshots")),
        by=_text(data.get("by"), "by", MAX_BY, required=True) or "",
        comment=_text(data.get("comment"), "comment", MAX_COMMENT, required=False),
    )


def _names(value: object) -> tuple[str, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not value:
        raise _bad('"snapshots" must be a non-empty list of names (leave it out for all)')
    names: dict[str, None] = {}
    for name in value:
        if not isinstance(name, str) or not name or len(name) > NAME_CHARS:
            raise _bad('"snapshots" must hold snapshot names (non-empty strings)')
        names[name] = None
    return tuple(names)


def _text(value: object, field: str, most: int, *, required: bool) -> str | None:
    """A person's text: trimmed, at most `most` characters, no control characters (they would
    land in logs and terminals as they are)."""
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and not value.strip()):
        raise _bad(f'"{field}" must be a non-empty string')
    text = value.strip()
    if len(text) > most:
        raise _bad(f'"{field}" is over {most} characters')
    if any((ord(c) < 32 and c not in "\n\t") or ord(c) == 127 for c in text):
        raise _bad(f'"{field}" holds control characters')
    if field == "by" and any(c in text for c in "\n\t"):
        raise _bad('"by" must be one line')
    return text or None


def _no_constant(name: str) -> float:
    """JSON has no NaN or Infinity; Python's parser takes them unless told."""
    raise ValueError(name)


def _bad(line: str) -> Problem:
    return Problem(400, line)
