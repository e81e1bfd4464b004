"""The command line as a newcomer meets it: `migrate` says what it did, the embedded default
migrates by itself, and the text log is coloured only for a terminal without `NO_COLOR`."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

from alembic import command
from sqlalchemy import Engine, text

from supervisor.db.connection import connect, parse_url
from supervisor.db.migrate import VERSION_TABLE, alembic_config, head_revision
from tests.capture_helpers import write_png
from tests.database.test_plan_kind import planned, queue_plan, record
from tests.hosts import ROOT


def cli(*args: str, cwd: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    """`python -m supervisor ARGS` with no `STORYSHELF_*` variable but `extra`."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("STORYSHELF_")}
    env.update(extra, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "supervisor", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def downgrade(url: str, revision: str) -> None:
    engine = connect(url)
    try:
        with engine.begin() as conn:
            command.downgrade(alembic_config(conn), revision)
    finally:
        engine.dispose()


def test_migrate_says_created_upgraded_or_already_current(
    empty_database_url: str, tmp_path: Path
) -> None:
    head = head_revision()
    shown = parse_url(empty_database_url).render_as_string(hide_password=True)
    first = cli("migrate", "--database-url", empty_database_url, cwd=tmp_path)
    assert first.stdout == f"schema created at revision {head} on {shown}\n", first.stderr
    again = cli("migrate", "--database-url", empty_database_url, cwd=tmp_path)
    assert again.stdout == f"schema already current ({head}) on {shown}\n", again.stderr
    downgrade(empty_database_url, "0001")
    upgraded = cli("migrate", "--database-url", empty_database_url, cwd=tmp_path)
    assert upgraded.stdout == f"schema upgraded from 0001 to {head} on {shown}\n", upgraded.stderr


def test_a_first_enqueue_build_on_the_embedded_default_just_works(tmp_path: Path) -> None:
    write_png(tmp_path / "images" / "button.png")
    upload = cli(
        "enqueue-build", "--project", "web", "--branch", "main", "--images", "images", cwd=tmp_path
    )
    assert upload.returncode == 0, upload.stderr
    assert upload.stdout == "1\n"
    assert (tmp_path / ".storyshelf" / "storyshelf.db").is_file()
    status = cli("status", cwd=tmp_path)
    assert status.returncode == 0, status.stderr
    assert "1 web/main: pending" in status.stdout


def stderr_on_a_terminal(cwd: Path, **extra: str) -> bytes:
    """What `status` on a fresh embedded default writes to a terminal (it logs the migration)."""
    ours, theirs = pty.openpty()
    env = {name: value for name, value in os.environ.items() if name not in ("NO_COLOR", "TERM")}
    env.update(extra, PYTHONPATH=str(ROOT), TERM="xterm")
    try:
        subprocess.run(
            [sys.executable, "-m", "supervisor", "status"],
            cwd=cwd,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=theirs,
            timeout=60,
            check=True,
        )
        os.close(theirs)
        written = b""
        while chunk := _read(ours):
            written += chunk
        return written
    finally:
        os.close(ours)


def _read(fd: int) -> bytes:
    try:
        return os.read(fd, 65536)
    except OSError:  # the terminal's other end is closed: everything was read
        return b""


def test_the_text_log_is_coloured_on_a_terminal(tmp_path: Path) -> None:
    written = stderr_on_a_terminal(tmp_path)
    assert b"schema migrated" in written
    assert b"\x1b[" in written


def test_no_color_keeps_the_text_log_plain_on_a_terminal(tmp_path: Path) -> None:
    written = stderr_on_a_terminal(tmp_path, NO_COLOR="1")
    assert b"schema migrated" in written
    assert b"\x1b[" not in written


def test_status_says_why_a_failed_build_failed_in_a_line_of_the_window(
    database_url: str, engine: Engine, tmp_path: Path
) -> None:
    reason = "the preview threw ReferenceError: process is not defined at the top of main.js"
    plan = queue_plan(engine, tmp_path / "artifacts")
    record(engine, plan, planned(error=reason), tmp_path / "artifacts")
    why = f"the Storybook cannot be planned: {reason}"
    shown = cli("status", "--database-url", database_url, cwd=tmp_path, COLUMNS="60")
    assert shown.returncode == 0, shown.stderr
    (line,) = [line for line in shown.stdout.splitlines() if line.startswith("    error: ")]
    assert len(line) == 60 and line.endswith("…")
    assert f"    error: {why}".startswith(line.removesuffix("…"))
    whole = cli("status", "--json", "--database-url", database_url, cwd=tmp_path, COLUMNS="60")
    (build,) = json.loads(whole.stdout)["builds"]
    assert (build["status"], build["error"]) == ("failed", why)


#: Opens the database as every command does, then says whether Alembic was imported.
OPENS = (
    "import sys; from supervisor.commands.options import open_database;"
    "open_database(sys.argv[1]).dispose(); print('alembic' in sys.modules)"
)


def test_a_command_checks_the_schemas_revision_without_importing_alembic(
    database_url: str, tmp_path: Path
) -> None:
    """Alembic is for upgrading: importing it to read the revision cost every command 75 ms."""
    result = subprocess.run(
        [sys.executable, "-c", OPENS, database_url],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert result.stdout == "False\n", result.stderr


def test_a_schema_with_two_revisions_at_once_is_one_clear_line(
    database_url: str, tmp_path: Path
) -> None:
    engine = connect(database_url)
    second = text(f"INSERT INTO {VERSION_TABLE} (version_num) VALUES ('0001')")
    try:
        with engine.begin() as conn:
            conn.execute(second)
        status = cli("status", "--database-url", database_url, cwd=tmp_path)
    finally:  # the session's PostgreSQL database is the next test's too
        with engine.begin() as conn:
            conn.execute(text(f"DELETE FROM {VERSION_TABLE} WHERE version_num = '0001'"))
        engine.dispose()
    assert status.returncode != 0
    assert status.stderr.splitlines() == [
        f"storyshelf status: the schema has 2 revisions at once: ['0001', '{head_revision()}']"
    ], status.stderr
