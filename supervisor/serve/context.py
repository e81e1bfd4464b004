"""What every route of the server reads (`Serving`), and how a route says no (`Problem`).

A route raises `Problem` with the status and the one line the client reads; `app` turns it
into the answer (JSON under `/api/`, plain text elsewhere), so that no route builds an error
answer of its own and none leaks a traceback.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from sqlalchemy import Engine
from starlette.requests import Request

from ipc.artifacts.store import ArtifactStore
from supervisor.serve.auth import ReviewToken

#: The most bytes a review's body may have: a decision on a few hundred names, with room.
REVIEW_BODY_BYTES = 64 * 2**10
#: How long a client may take to send a review's body once its head is in: a body of
#: `REVIEW_BODY_BYTES` takes milliseconds; a client that trickles it holds a connection.
BODY_SECONDS = 10.0


@dataclass(frozen=True)
class Serving:
    """The database, the artifact store and the review token the routes serve from."""

    engine: Engine
    store: ArtifactStore
    token: ReviewToken
    body_bytes: int = REVIEW_BODY_BYTES
    body_seconds: float = BODY_SECONDS


def serving(request: Request) -> Serving:
    """The app's `Serving` (set once when the app is made: `supervisor.serve.app`)."""
    found = request.app.state.serving
    assert isinstance(found, Serving)
    return found


@dataclass
class Problem(Exception):
    """A request the server will not or cannot answer: its status, and one line saying why."""

    status: int
    line: str
    headers: Mapping[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        return self.line
