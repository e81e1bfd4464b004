"""structlog set-up: readable in a terminal, one JSON object per line elsewhere.

Events are short phrases with the facts in fields (`job_id`, `build_id`, `kind`, `attempt`,
`child_pid`), so that logs can be searched and tests can assert them. The text form is coloured
only for a person: when stderr is a terminal and `NO_COLOR` (https://no-color.org) is unset.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Literal, get_args

import structlog

#: The levels `--log-level` takes, quietest last.
LogLevel = Literal["debug", "info", "warning", "error"]
LOG_LEVELS: tuple[LogLevel, ...] = get_args(LogLevel)


#: How the host's one-line errors name it, however it was started (the `storyshelf` command, or
#: `python -m supervisor`): "storyshelf build: no build with id 7".
PROGRAM = "storyshelf"


def complain(command: str | None, message: str) -> None:
    """A mistake of the user's, or a condition the host cannot work in, as one line on stderr
    named `PROGRAM` and the command: the only way the host says one."""
    name = f"{PROGRAM} {command}" if command else PROGRAM
    print(f"{name}: {message}", file=sys.stderr, flush=True)


def configure(level: LogLevel = "info", *, json: bool | None = None) -> None:
    """Route structlog to stderr; JSON unless stderr is a terminal (or `json` says otherwise)."""
    terminal = sys.stderr.isatty()
    as_json = not terminal if json is None else json
    colours = terminal and not os.environ.get("NO_COLOR")
    renderer: structlog.types.Processor = (
        structlog.processors.JSONRenderer()
        if as_json
        else structlog.dev.ConsoleRenderer(colors=colours)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.getLevelNamesMapping()[level.upper()]
        ),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=False,
    )
