"""What the child's browser code says when the browser cannot serve: one line, never a trace."""

from __future__ import annotations


class BrowserUnavailable(RuntimeError):
    """The browser cannot be started or reached; the message is one line that says why."""


def first_line(error: BaseException | str) -> str:
    """The first line of what `error` says (Playwright's messages go on with call logs)."""
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__
