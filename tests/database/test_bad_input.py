"""Bad input of every kind: one line on stderr, a non-zero exit, no traceback, nothing stored.

Each case is one row of `CASES`, run through the command line's own entry point with its own
arguments, environment and working folder, on PostgreSQL and on SQLite. A row's arguments,
environment and working folder may name the places of `Places` in braces (`{database}`,
`{empty}`, ...). After every row the migrated database still has no rows and no file appeared
anywhere under the test's folder. More bad inputs are more rows.

Most rows run in this process (`tests.command_line.call`): a subprocess per row cost the suite
a second of CPU each, on eighty rows. A row runs as `python -m supervisor` in a subprocess of
its own where the process matters (`_in_a_subprocess`): root made to meet folder permissions (a
process's capabilities), and a host that gets past its settings (its signal handlers and fork
server).
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from sqlalchemy import func, inspect, select

from supervisor.db.connection import connect
from supervisor.db.tables import metadata
from tests.capture_helpers import write_png
from tests.command_line import call
from tests.hosts import ROOT
from tests.postgres_server import free_port

#: `prctl(PR_CAPBSET_DROP, CAP_DAC_OVERRIDE)`: without it root writes into any folder.
PR_CAPBSET_DROP, CAP_DAC_OVERRIDE = 24, 1


@dataclass(frozen=True)
class Case:
    """One bad input and a fragment of the one line it must give."""

    id: str
    args: tuple[str, ...]
    says: str
    env: dict[str, str] = field(default_factory=dict)
    #: The working folder (a place name in braces, like the arguments).
    cwd: str = "{work}"
    #: The exit status it must give, when the row says (2: a bad option).
    exits: int | None = None


@dataclass(frozen=True)
class Places:
    """What a row may name: `{database}` migrated and empty, `{empty}` with no schema,
    `{unreachable}` a PostgreSQL port nobody listens on, `{readonly}` a folder nobody may write,
    `{work}` the working folder, `{images}` a folder with one good PNG, `{artifacts}`,
    `{looped}` a folder of PNGs with a link to itself among them, `{looped_storybook}` a
    Storybook build with one, `{deep_index}` and `{deep_stories}` Storybook builds whose
    `index.json` or `stories.json` nests arrays past Python's recursion limit."""

    database: str
    empty: str
    unreachable: str
    readonly: Path
    work: Path
    images: Path
    artifacts: Path
    looped: Path
    looped_storybook: Path
    deep_index: Path
    deep_stories: Path

    def fill(self, text: str) -> str:
        return text.format(**{name: str(value) for name, value in vars(self).items()})


UPLOAD = ("enqueue-build", "--project", "web", "--branch", "main", "--images", "{images}")
NO_SCHEMA = "no Storyshelf schema here: run `storyshelf migrate`"
ON = ("--database-url", "{database}", "--artifacts", "{artifacts}")
RUN = ("run", *ON, "--drain")
STORYBOOK = ("enqueue-build", "--project", "web", "--branch", "main", *ON, "--storybook")
#: Arrays nested far past Python's recursion limit (1000).
DEEP_JSON = "[" * 100_000 + "]" * 100_000

CASES = [
    # Database URLs (issue 9, item 12)
    Case("garbage url", ("status", "--database-url", "garbage"), "not a database URL"),
    Case(
        "garbage url from the environment",
        ("status",),
        "(--database-url or STORYSHELF_DATABASE_URL)",
        env={"STORYSHELF_DATABASE_URL": "::nonsense::"},
    ),
    Case(
        "unsupported dialect",
        ("status", "--database-url", "mysql://u:secret@db/storyshelf"),
        "mysql://u:***@db/storyshelf: the host runs on PostgreSQL",
    ),
    Case("unreachable server: migrate", ("migrate", "--database-url", "{unreachable}"), "database unavailable"),
    Case("unreachable server: status", ("status", "--database-url", "{unreachable}"), "database unavailable"),
    Case(
        "unreachable server: enqueue-build",
        (*UPLOAD, "--database-url", "{unreachable}", "--artifacts", "{artifacts}"),
        "database unavailable",
    ),
    Case(
        "unreachable server: run --migrate",
        ("run", "--migrate", "--drain", "--database-url", "{unreachable}"),
        "database unavailable",
    ),
    Case(
        "sqlite file in a read-only folder: migrate",
        ("migrate", "--database-url", "sqlite:///{readonly}/storyshelf.db"),
        "its folder {readonly} is not writable",
    ),
    Case(
        "sqlite file in a read-only folder: run --migrate",
        ("run", "--migrate", "--drain", "--database-url", "sqlite:///{readonly}/storyshelf.db"),
        "its folder {readonly} is not writable",
    ),
    Case(
        "sqlite folder under a read-only folder",
        ("migrate", "--database-url", "sqlite:///{readonly}/more/storyshelf.db"),
        "cannot create the folder {readonly}/more of the SQLite database",
    ),
    Case(
        "sqlite file that is not there",
        ("status", "--database-url", "sqlite:///{work}/typo.db"),
        NO_SCHEMA,
    ),
    Case(
        "default path in a read-only working folder: enqueue-build",
        UPLOAD,
        "cannot create the folder .storyshelf of the SQLite database",
        cwd="{readonly}",
    ),
    Case(
        "default path in a read-only working folder: status",
        ("status",),
        "cannot create the folder .storyshelf",
        cwd="{readonly}",
    ),
    Case(
        "default path in a read-only working folder: run",
        ("run", "--drain"),
        "cannot create the folder .storyshelf",
        cwd="{readonly}",
    ),
    # A database with no schema (item 13)
    *(
        Case(f"no schema: {args[0]}", (*args, "--database-url", "{empty}", "--artifacts", "{artifacts}"), NO_SCHEMA)
        for args in (("status",), ("build", "1"), ("cancel", "1"), ("project", "web"), UPLOAD, ("run", "--drain"))
    ),
    # Values from flags and from STORYSHELF_* alike (item 14)
    Case(
        "concurrency from the environment",
        RUN,
        "'abc' is not a whole number up to 2147483647 (--concurrency or STORYSHELF_CONCURRENCY)",
        env={"STORYSHELF_CONCURRENCY": "abc"},
    ),
    Case("lease from the environment", RUN, "STORYSHELF_LEASE_SECONDS", env={"STORYSHELF_LEASE_SECONDS": "soon"}),
    Case("poll seconds not a number", (*RUN, "--poll-seconds", "nan"), "'nan' is not a number"),
    Case("log level", ("status", *ON, "--log-level", "loud"), "'loud' is not one of debug, info, warning, error"),
    Case("log level from the environment", ("status", *ON), "STORYSHELF_LOG_LEVEL", env={"STORYSHELF_LOG_LEVEL": "loud"}),
    Case("build id too large", ("build", "99999999999999999999", *ON), "is not a whole number from 1"),
    Case("build id not a number", ("build", "seven", *ON), "'seven' is not a whole number"),
    Case("cancel id zero", ("cancel", "0", *ON), "'0' is not a whole number from 1"),
    Case("project metric", ("project", "web", *ON, "--metric", "rgb"), "'rgb' is not one of yiq, oklab"),
    Case("project threshold", ("project", "web", *ON, "--threshold", "high"), "'high' is not a number"),
    Case("project flat threshold", ("project", "web", *ON, "--flat-threshold", "none"), "'none' is not a number or off"),
    Case("project budget too large", ("project", "web", *ON, "--budget", "99999999999"), "up to 2147483647"),
    Case("unknown option", ("status", *ON, "--colour"), "unrecognized arguments: --colour"),
    Case("shards not a number", (*UPLOAD, *ON, "--shards", "two"), "argument --shards"),
    Case(
        "artifacts that are a file",
        (*UPLOAD, "--database-url", "{database}", "--artifacts", "{images}/button.png"),
        "button.png: not a folder",
    ),
    Case("artifacts in a bucket not named", (*UPLOAD, *ON, "--artifacts", "s3://"), "no bucket named (s3://bucket/prefix) (--artifacts or STORYSHELF_ARTIFACTS)"),
    Case("a cache of nothing", (*RUN, "--cache-mib", "0"), "'0' is not a whole number from 1 up to 16777216 (--cache-mib or STORYSHELF_CACHE_MIB)"),
    Case(
        "a bucket that does not answer",
        (*UPLOAD, "--database-url", "{database}", "--artifacts", "s3://shots/ci"),
        "the artifact store did not answer",
        env={"STORYSHELF_S3_ENDPOINT": "http://127.0.0.1:9", "AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "b"},
    ),
    Case("prune keep-days", ("prune", *ON, "--keep-days", "soon"), "'soon' is not a whole number from 0"),
    # Settings that cannot work (item 10)
    Case("stall leaves the lease no room", (*RUN, "--stall-seconds", "45"), "must be at most 40"),
    Case(
        "stall from the environment leaves no room",
        (*RUN, "--lease-seconds", "10"),
        "--stall-seconds 40 leaves no room",
        env={"STORYSHELF_STALL_SECONDS": "40"},
    ),
    Case("lease of 0", (*RUN, "--lease-seconds", "0"), "--lease-seconds must be more than 0"),
    Case("negative lease", (*RUN, "--lease-seconds", "-1"), "--lease-seconds must be more than 0"),
    Case("concurrency 0", (*RUN, "--concurrency", "0"), "--concurrency must be 1 or more, not 0"),
    Case("concurrency -1", (*RUN, "--concurrency", "-1"), "--concurrency must be 1 or more, not -1"),
    Case("memory limit of 0", (*RUN, "--hard-rss-mib", "0"), "--hard-rss-mib must be more than 0, not 0"),
    # Numbers that no setting can work with: each refused as it is read, exit 2
    *(
        Case(f"{flag} {value}", (*RUN, flag, value), f"{value!r} is not {expected} ({flag} or", exits=2)
        for flag, value, expected in (
            ("--lease-seconds", "1e12", "a number up to 604800"),
            ("--lease-seconds", "inf", "a number"),
            ("--stall-seconds", "1e400", "a number"),
            ("--drain-seconds", "1e12", "a number up to 604800"),
            ("--backoff-base-seconds", "1e300", "a number up to 604800"),
            ("--poll-seconds", "1e12", "a number up to 604800"),
            ("--soft-rss-mib", "1e300", "a number up to 1.67772e+07"),
            ("--hard-rss-mib", "nan", "a number"),
            ("--concurrency", "99999999999", "a whole number up to 2147483647"),
            ("--max-crashes", "1" + "0" * 30, "a whole number up to 2147483647"),
            ("--max-jobs-per-child", "1" + "0" * 400, "a whole number up to 2147483647"),
            ("--cache-mib", "1" + "0" * 30, "a whole number from 1 up to 16777216"),
        )
    ),
    Case("build timeout huge", ("build", "1", *ON, "--wait", "--timeout", "1e12"), "'1e12' is not a number up to 604800", exits=2),
    # Bytes that are not UTF-8 (Python hands them on as lone surrogates), as a branch
    Case(
        "a branch that is not UTF-8",
        ("enqueue-build", "--project", "web", "--branch", "feature-\udcff", *ON, "--images", "{images}"),
        "an argument is not UTF-8 text: 'feature-\ufffd'",
        exits=2,
    ),
    Case("project threshold huge", ("project", "web", *ON, "--threshold", "1e308"), "threshold must be between 0 and 1, not 1e+308", exits=1),
    Case("shards 0", (*UPLOAD, *ON, "--shards", "0"), "'0' is not a whole number from 1", exits=2),
    Case("shards past any id", (*UPLOAD, *ON, "--shards", "1" + "0" * 30), "is not a whole number from 1 up to", exits=2),
    # Files of the folders given that cannot be read as what they claim (item 10)
    Case("a link to itself among the images", ("enqueue-build", "--project", "web", "--branch", "main", *ON, "--images", "{looped}"), "loop.png: a link that leads back to itself", exits=1),
    Case("a link to itself in a Storybook build", (*STORYBOOK, "{looped_storybook}"), "loop.js: a link that leads back to itself", exits=1),
    Case("an index.json nested past the recursion limit", (*STORYBOOK, "{deep_index}"), "index.json: nested too deep to read", exits=1),
    Case("a stories.json nested past the recursion limit", (*STORYBOOK, "{deep_stories}"), "stories.json: nested too deep to read", exits=1),
]  # fmt: skip


@pytest.fixture
def places(database_url: str, empty_database_url: str, tmp_path: Path) -> Places:
    readonly = tmp_path / "readonly"
    readonly.mkdir()
    readonly.chmod(0o555)
    work = tmp_path / "work"
    work.mkdir()
    images = tmp_path / "images"
    write_png(images / "button.png")
    looped = tmp_path / "looped"
    write_png(looped / "button.png")
    (looped / "loop.png").symlink_to("loop.png")
    looped_storybook = storybook(tmp_path / "looped-storybook", "index.json", EMPTY_INDEX)
    (looped_storybook / "loop.js").symlink_to("loop.js")
    return Places(
        database=database_url,
        empty=empty_database_url,
        unreachable=f"postgresql+psycopg://storyshelf@127.0.0.1:{free_port()}/storyshelf",
        readonly=readonly,
        work=work,
        images=images,
        artifacts=tmp_path / "artifacts",
        looped=looped,
        looped_storybook=looped_storybook,
        deep_index=storybook(tmp_path / "deep-index", "index.json", DEEP_JSON),
        deep_stories=storybook(tmp_path / "deep-stories", "stories.json", DEEP_JSON),
    )


#: An index of a Storybook with no stories: read, and refused later than any file's problem.
EMPTY_INDEX = '{"v": 5, "entries": {}}'


def storybook(folder: Path, index_name: str, index: str) -> Path:
    """A Storybook static build of an `iframe.html` and the index `index_name` holding `index`."""
    folder.mkdir()
    (folder / "iframe.html").write_text("<!doctype html>")
    (folder / index_name).write_text(index)
    return folder


def without_override() -> None:
    """In the child, before exec: root, too, meets folder permissions."""
    if os.geteuid() == 0:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_CAPBSET_DROP, CAP_DAC_OVERRIDE, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def files_under(folder: Path) -> set[Path]:
    return {path for path in folder.rglob("*") if path.is_file()}


def rows_and_tables(url: str) -> tuple[int, list[str]]:
    """Rows in every Storyshelf table (of a migrated database), or the tables of one without."""
    engine = connect(url)
    try:
        with engine.connect() as conn:
            tables = sorted(inspect(conn).get_table_names())
            if "jobs" not in tables:
                return 0, tables
            rows = sum(
                conn.execute(select(func.count()).select_from(table)).scalar_one()
                for table in metadata.sorted_tables
            )
            return rows, tables
    finally:
        engine.dispose()


#: Rows refused while the command line and the settings are read, before a database is opened.
BEFORE_THE_DATABASE = frozenset(
    {
        "concurrency from the environment", "lease from the environment",
        "poll seconds not a number", "log level", "log level from the environment",
        "build id too large", "build id not a number", "cancel id zero", "project metric",
        "project threshold", "project flat threshold", "project budget too large",
        "unknown option", "shards not a number", "artifacts in a bucket not named",
        "a cache of nothing", "prune keep-days", "stall leaves the lease no room",
        "stall from the environment leaves no room", "lease of 0", "negative lease",
        "concurrency 0", "concurrency -1", "memory limit of 0", "build timeout huge",
        "shards 0", "shards past any id", "a branch that is not UTF-8",
        *(case.id for case in CASES if case.id.startswith("--")),
    }
)  # fmt: skip
assert {case.id for case in CASES} >= BEFORE_THE_DATABASE, "a row named that is not there"


def _databases(case: Case) -> tuple[str, ...]:
    """Both databases for a row that reaches the test's database; SQLite alone for one that
    never does (refused before it is opened, or naming a database of its own): it would run
    the same twice."""
    texts = (*case.args, *case.env.values())
    names_one = any("{database}" in text or "{empty}" in text for text in texts)
    reaches = names_one and case.id not in BEFORE_THE_DATABASE
    return ("postgresql", "sqlite") if reaches else ("sqlite",)


@pytest.mark.parametrize(
    ("case", "database_url"),
    [pytest.param(case, db, id=f"{db}-{case.id}") for case in CASES for db in _databases(case)],
    indirect=["database_url"],
)
def test_bad_input_is_one_line_and_stores_nothing(
    case: Case,
    places: Places,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    before = files_under(tmp_path)
    args = [places.fill(arg) for arg in case.args]
    env = {name: places.fill(value) for name, value in case.env.items()}
    cwd = Path(places.fill(case.cwd))
    if _in_a_subprocess(case):
        result = _subprocess(args, env, cwd)
    else:
        result = call(args, monkeypatch, capsys, env=env, cwd=cwd)
    assert result.returncode != 0, result.stdout + result.stderr
    if case.exits is not None:
        assert result.returncode == case.exits, result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert places.fill(case.says) in result.stderr
    assert result.stdout == ""
    assert files_under(tmp_path) == before
    assert rows_and_tables(places.database)[0] == 0
    assert rows_and_tables(places.empty)[1] == []


def _in_a_subprocess(case: Case) -> bool:
    """Whether the row needs a process of its own: a read-only folder (root writes into any
    unless the process drops a capability), or a host that starts once its settings are read."""
    readonly = any("{readonly}" in text for text in (*case.args, case.cwd))
    starts_a_host = case.args[0] == "run" and case.id not in BEFORE_THE_DATABASE
    return readonly or starts_a_host


def _subprocess(
    args: list[str], env: dict[str, str], cwd: Path
) -> subprocess.CompletedProcess[str]:
    """`python -m supervisor ARGS` as a user runs it, as root without its override of folder
    permissions."""
    inherited = {
        name: value for name, value in os.environ.items() if not name.startswith("STORYSHELF_")
    }
    return subprocess.run(
        [sys.executable, "-m", "supervisor", *args],
        cwd=cwd,
        env={**inherited, **env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=without_override,
    )
