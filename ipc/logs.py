"""structlog set-up, the same in the parent and in the fork server: readable in a terminal, one
JSON object per line elsewhere.

Events are short phrases with the facts in fields (`job_id`, `build_id`, `kind`, `attempt`,
`child_pid`), so that logs can be searched and tests can assert them. The text form is coloured
only for a person: when stderr is a terminal and `NO_COLOR` (https://no-color.org) is unset.

A fork server forked ahead of the parent's start-up (`supervisor.host.ahead`) is a copy of a
process that had not configured its logs yet: the parent sends it what `configured` says.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Literal, NamedTuple, get_args

import structlog

#: The levels `--log-level` takes, quietest last.
LogLevel = Literal["debug", "info", "warning", "error"]
LOG_LEVELS: tuple[LogLevel, ...] = get_args(LogLevel)


class LogSettings(NamedTuple):
    """What `configure` was last called with."""

    level: LogLevel
    json: bool | None


_configured: LogSettings | None = None


def configure(level: LogLevel = "info", *, json: bool | None = None) -> None:
    """Route structlog to stderr; JSON unless stderr is a terminal (or `json` says otherwise)."""
    global _configured
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
    _configured = LogSettings(level, json)


def configured() -> LogSettings | None:
    """What the logs were last configured with in this process; None before `configure`."""
    return _configured
