"""Who may record review decisions: whoever holds the token `serve` was started with.

The review API writes (a decision moves a branch's baselines and opens a CI gate), while the
rest of the server only reads, so one shared secret guards it: `STORYSHELF_REVIEW_TOKEN` in
`serve`'s environment, sent as `Authorization: Bearer <token>`. A server started without one is
read-only, and says so, rather than open to anyone. A bearer header is never sent by a browser
on its own (unlike a cookie), so a page of another site cannot make a visitor's browser review.
The comparison takes the same time whatever the guess (`hmac.compare_digest`).
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

#: The variable `serve` reads its token from.
TOKEN_VARIABLE = "STORYSHELF_REVIEW_TOKEN"
#: What a 401 asks for (RFC 6750, section 3).
CHALLENGE = 'Bearer realm="storyshelf review"'

#: Whether the review API takes decisions here, as `GET /api/builds/<id>` tells the page.
ReviewApi = Literal["writable", "read-only"]


@dataclass(frozen=True)
class Refusal:
    """Why a request may not review: its HTTP status and the line it answers."""

    status: Literal[401, 403]
    line: str


#: The refusals, one per reason.
READ_ONLY = Refusal(
    403,
    f"this server is read-only: it was started without {TOKEN_VARIABLE};"
    " review with `storyshelf review`",
)
NO_TOKEN = Refusal(401, "an Authorization: Bearer <token> header is required to review")
WRONG_TOKEN = Refusal(403, "the review token is not this server's")


@dataclass(frozen=True)
class ReviewToken:
    """The server's token; None: read-only."""

    secret: str | None

    @property
    def api(self) -> ReviewApi:
        return "read-only" if self.secret is None else "writable"

    def refusal(self, authorization: str | None) -> Refusal | None:
        """Why a request with this `Authorization` header may not review; None when it may."""
        if self.secret is None:
            return READ_ONLY
        scheme, _, given = (authorization or "").strip().partition(" ")
        if scheme.lower() != "bearer" or not given.strip():
            return NO_TOKEN
        # The header arrives decoded as Latin-1 (ASGI): its bytes again, against the secret's.
        offered = given.strip().encode("latin-1", "replace")
        if not hmac.compare_digest(offered, self.secret.encode()):
            return WRONG_TOKEN
        return None


def token_from(environment: Mapping[str, str]) -> ReviewToken:
    """The token in `environment` (an empty variable is unset: read-only)."""
    secret = environment.get(TOKEN_VARIABLE) or None
    return ReviewToken(secret)
