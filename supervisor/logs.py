"""How the host speaks to its user: one-line complaints named for the program. The structlog
set-up shared with the fork server is `ipc.logs`.
"""

from __future__ import annotations

import sys

#: How the host's one-line errors name it, however it was started (the `storyshelf` command, or
#: `python -m supervisor`): "storyshelf build: no build with id 7".
PROGRAM = "storyshelf"


def complain(command: str | None, message: str) -> None:
    """A mistake of the user's, or a condition the host cannot work in, as one line on stderr
    named `PROGRAM` and the command: the only way the host says one."""
    name = f"{PROGRAM} {command}" if command else PROGRAM
    print(f"{name}: {message}", file=sys.stderr, flush=True)
