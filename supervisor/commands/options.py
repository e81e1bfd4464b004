"""Every option's type, checked once, for the command line and the `STORYSHELF_*` environment alike.

A container is configured without arguments: `--database-url` also reads
`STORYSHELF_DATABASE_URL`, `--artifacts` `STORYSHELF_ARTIFACTS`, and so on (`option`). A value
from the environment is a string default, which argparse converts with the option's own `type`
when the flag is not given, so both sources meet the same converter and a bad value of either
is the same one line, naming the flag and the variable. What a value means together with others
(a stall that the lease leaves no room for) is the settings' to judge
(`HostSettings.problems`); here, each value on its own.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable
from typing import Any, Literal, NoReturn, TypeVar

import structlog
from sqlalchemy import Engine

from ipc.artifacts.location import BadLocation, open_store
from ipc.artifacts.store import ArtifactStore
from ipc.logs import LOG_LEVELS
from supervisor.db.connection import UnsupportedDatabase, connect, parse_url, sqlite_file
from supervisor.db.migrate import NoSchema, require_schema
from supervisor.host.settings import DEFAULT_ARTIFACTS, EMBEDDED_DATABASE_URL
from supervisor.logs import complain

log = structlog.get_logger(__name__)

T = TypeVar("T")

#: The largest row id the databases store (a signed 64-bit integer, BIGINT and SQLite INTEGER).
ID_MAX = 2**63 - 1
#: The largest value of an INTEGER column on PostgreSQL, and the bound of every count a
#: setting names: past it a count is a typo, and Python's ints, unbounded, would reach a float
#: or the database only to overflow there.
INT32_MAX = 2**31 - 1
#: The longest duration a setting names: a week. The host adds durations to the database's
#: clock (a date past year 9999 overflows) and waits on timers that count milliseconds in a C
#: int (24.8 days); no lease, stall, drain, backoff, poll or wait needs more.
MAX_SECONDS = 7 * 24 * 3600
#: The largest memory size a setting names, in MiB: 16 TiB, more than a machine has.
MAX_MIB = 2**24


class CommandParser(argparse.ArgumentParser):
    """argparse, with a mistake said in one line on stderr (not usage plus message) and exit 2,
    named as every error line of the host is (`supervisor.logs.complain`)."""

    def __init__(self, *args: Any, command: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.command = command

    def error(self, message: str) -> NoReturn:
        complain(self.command, message)
        sys.exit(2)


def whole(low: int | None = None, high: int | None = None) -> Callable[[str], int]:
    """A converter of whole numbers from `low` to `high` (either open when None)."""
    bounds = ([f"from {low}"] if low is not None else []) + (
        [f"up to {high}"] if high is not None else []
    )
    expected = " ".join(["a whole number", *bounds])

    def convert(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            pass
        else:
            if (low is None or value >= low) and (high is None or value <= high):
                return value
        raise argparse.ArgumentTypeError(f"{text!r} is not {expected}")

    return convert


def number(text: str) -> float:
    """A finite number: `nan` and `inf` are floats to Python but no setting means them."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number")
    return value


def number_in(low: float | None = None, high: float | None = None) -> Callable[[str], float]:
    """A converter of finite numbers from `low` to `high` (either open when None)."""
    bounds = ([f"from {low:g}"] if low is not None else []) + (
        [f"up to {high:g}"] if high is not None else []
    )
    expected = " ".join(["a number", *bounds])

    def convert(text: str) -> float:
        value = number(text)
        if (low is None or value >= low) and (high is None or value <= high):
            return value
        raise argparse.ArgumentTypeError(f"{text!r} is not {expected}")

    return convert


#: A duration in seconds (whether it may be 0 is the settings' to judge, with its meaning).
seconds = number_in(high=MAX_SECONDS)
#: A memory size in MiB.
mebibytes = number_in(high=MAX_MIB)


def number_or_off(text: str) -> float | Literal["off"]:
    """A finite number, or `off` for a setting that can be turned off."""
    if text == "off":
        return "off"
    try:
        return number(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number or off") from None


def choice(values: tuple[T, ...]) -> Callable[[str], T]:
    """A converter for a closed set; argparse's own `choices` is not applied to defaults, so the
    environment's values would pass unchecked."""

    def convert(text: str) -> T:
        for value in values:
            if text == value:
                return value
        raise argparse.ArgumentTypeError(
            f"{text!r} is not one of {', '.join(str(value) for value in values)}"
        )

    return convert


def database_url(text: str) -> str:
    """A SQLAlchemy URL of a database the host runs on (kept as given: commands pass it on)."""
    try:
        parse_url(text)
    except UnsupportedDatabase as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text


def option(
    parser: argparse.ArgumentParser,
    flag: str,
    convert: Callable[[str], object],
    default: object,
    help_text: str,
) -> None:
    """`flag` on `parser`, falling back to `STORYSHELF_<FLAG>` (an empty variable is unset)."""
    variable = "STORYSHELF_" + flag.removeprefix("--").upper().replace("-", "_")

    def from_either(text: str) -> object:
        try:
            return convert(text)
        except argparse.ArgumentTypeError as error:
            raise argparse.ArgumentTypeError(f"{error} ({flag} or {variable})") from None

    parser.add_argument(
        flag,
        type=from_either,
        default=os.environ.get(variable) or default,
        help=f"{help_text} ({variable})",
    )


def add_common(parser: argparse.ArgumentParser, *, log_level: str = "info") -> None:
    """The options every command takes: where the database and the artifacts are, the log level."""
    option(
        parser,
        "--database-url",
        database_url,
        EMBEDDED_DATABASE_URL,
        "SQLAlchemy URL, e.g. postgresql+psycopg://host/db (default: a SQLite file under "
        "./.storyshelf/, migrated by itself)",
    )
    option(
        parser,
        "--artifacts",
        artifact_store,
        str(DEFAULT_ARTIFACTS),
        "where images, diffs and reports are stored: a folder (default ./.storyshelf/artifacts) "
        "or s3://bucket/prefix (AWS variables; STORYSHELF_S3_ENDPOINT for a self-hosted store)",
    )
    option(parser, "--log-level", choice(LOG_LEVELS), log_level, f"one of {', '.join(LOG_LEVELS)}")


def artifact_store(text: str) -> ArtifactStore:
    """The store `--artifacts` names (`ipc.artifacts.location`)."""
    try:
        return open_store(text)
    except BadLocation as error:
        raise argparse.ArgumentTypeError(str(error).removeprefix(f"--artifacts {text}: ")) from None


def open_database(url: str, *, migrate: bool = False) -> Engine:
    """An engine on `url` with the Storyshelf schema in place, for a command to use.

    The embedded default is this host's own file, so it is migrated by itself (as any database
    is with `migrate`): a newcomer's first command just works. Any other database without the
    schema is `NoSchema`, said before the command stores anything (a SQLite file that is not
    there is not created to say so).
    """
    migrate = migrate or url == EMBEDDED_DATABASE_URL
    file = sqlite_file(url)
    if not migrate and file is not None and not file.exists():
        raise NoSchema()
    engine = connect(url)
    try:
        migration = require_schema(engine, migrate=migrate)
    except BaseException:
        engine.dispose()
        raise
    if migration is not None:
        log.info("schema migrated", change=migration.describe())
    return engine
