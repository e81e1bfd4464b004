"""Whether a host ever wrote results for a job whose lease it no longer held.

DESIGN section 3's fence says a host that lost a lease records nothing. A partition is where
that is tested hardest: the cut host's children finish their work, its leases run out and other
hosts claim the jobs, and when the cut heals the host tries to settle what it holds. The
soak's own tables cannot tell who wrote a row, so each round's database gets a log the
database itself keeps, from triggers the hosts never see:

* `chaos_lease_changes`: every change of a job's status, holder or attempt, with the holder
  before and after, whether the old lease had expired by the database's clock, the writing
  transaction and the writer (`application_name`: each host connects under a name of its own,
  `PGAPPNAME`);
* `chaos_result_writes`: every write of a result (a shard's snapshots, a build's capture
  attempt), with its transaction and writer.

A result written by a host is fenced when its own transaction also changed a job of the same
shard (snapshots) or build (attempts) that the host held at that moment (it settled its own
lease), took at that moment (it claimed the job), or took over because its lease had expired
(failing it on its final attempt). The database serialises changes to a job's row, so the
holder a trigger sees is the holder when the transaction committed.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, text

#: The triggers and their tables (PostgreSQL; statement triggers see a bulk insert's rows, COPY
#: included, as one table).
INSTALL = """
CREATE TABLE chaos_lease_changes (
    txid bigint NOT NULL DEFAULT txid_current(),
    at timestamptz NOT NULL DEFAULT clock_timestamp(),
    writer text NOT NULL DEFAULT current_setting('application_name'),
    job_id bigint NOT NULL, build_id bigint, shard_id bigint,
    old_status text, new_status text, old_locked_by text, new_locked_by text,
    old_expired boolean NOT NULL
);
CREATE TABLE chaos_result_writes (
    txid bigint NOT NULL DEFAULT txid_current(),
    at timestamptz NOT NULL DEFAULT clock_timestamp(),
    writer text NOT NULL DEFAULT current_setting('application_name'),
    what text NOT NULL, build_id bigint, shard_id bigint, rows integer NOT NULL
);
CREATE FUNCTION chaos_note_lease() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO chaos_lease_changes (job_id, build_id, shard_id, old_status, new_status,
                                     old_locked_by, new_locked_by, old_expired)
    VALUES (NEW.id, NEW.build_id, NEW.shard_id, OLD.status, NEW.status,
            OLD.locked_by, NEW.locked_by, coalesce(OLD.lease_expires_at <= now(), false));
    RETURN NULL;
END $$;
CREATE TRIGGER chaos_lease_changes AFTER UPDATE ON jobs FOR EACH ROW
    WHEN (OLD.status IS DISTINCT FROM NEW.status OR OLD.locked_by IS DISTINCT FROM NEW.locked_by
          OR OLD.attempt IS DISTINCT FROM NEW.attempt)
    EXECUTE FUNCTION chaos_note_lease();
CREATE FUNCTION chaos_note_snapshots() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO chaos_result_writes (what, build_id, shard_id, rows)
    SELECT 'snapshots', build_id, shard_id, count(*) FROM written GROUP BY build_id, shard_id;
    RETURN NULL;
END $$;
CREATE TRIGGER chaos_snapshot_writes AFTER INSERT ON snapshots
    REFERENCING NEW TABLE AS written FOR EACH STATEMENT EXECUTE FUNCTION chaos_note_snapshots();
CREATE FUNCTION chaos_note_attempt() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO chaos_result_writes (what, build_id, rows) VALUES ('capture attempt', NEW.build_id, 1);
    RETURN NULL;
END $$;
CREATE TRIGGER chaos_attempt_writes AFTER INSERT OR UPDATE ON capture_attempts FOR EACH ROW
    EXECUTE FUNCTION chaos_note_attempt();
"""


def install(conn: Connection) -> None:
    """Add the triggers to a round's database, before any host connects."""
    conn.execute(text(INSTALL))


@dataclass(frozen=True)
class LeaseChange:
    txid: int
    at: datetime
    writer: str
    job_id: int
    build_id: int | None
    shard_id: int | None
    old_status: str | None
    new_status: str | None
    old_locked_by: str | None
    new_locked_by: str | None
    old_expired: bool


@dataclass(frozen=True)
class ResultWrite:
    txid: int
    at: datetime
    writer: str
    what: str
    build_id: int | None
    shard_id: int | None
    rows: int


@dataclass(frozen=True)
class Ledger:
    """What the triggers logged in one round."""

    changes: list[LeaseChange]
    writes: list[ResultWrite]


def read(conn: Connection) -> Ledger:
    changes = [
        LeaseChange(**row._mapping)
        for row in conn.execute(text("SELECT * FROM chaos_lease_changes ORDER BY at"))
    ]
    writes = [
        ResultWrite(**row._mapping)
        for row in conn.execute(text("SELECT * FROM chaos_result_writes ORDER BY at"))
    ]
    return Ledger(changes, writes)


def pid_of(locked_by: str | None) -> int | None:
    """The host pid in a `locked_by` (`hostname:pid:nonce`)."""
    if locked_by is None:
        return None
    parts = locked_by.split(":")
    return int(parts[1]) if len(parts) >= 3 and parts[1].isdigit() else None


def fenced(write: ResultWrite, change: LeaseChange, pid: int) -> bool:
    """Whether `change`, in the same transaction as `write` by host `pid`, covers it."""
    same = (
        change.shard_id == write.shard_id
        if write.what == "snapshots"
        else change.build_id == write.build_id
    )
    held = pid_of(change.old_locked_by) == pid and change.old_status == "running"
    claimed = pid_of(change.new_locked_by) == pid and change.new_status == "running"
    took_over = change.old_status == "running" and change.old_expired
    return same and (held or claimed or took_over)


def unfenced_writes(ledger: Ledger, hosts: dict[str, int], soak: str) -> list[str]:
    """Every result a host (`hosts`: its connection's name -> its pid) wrote without holding,
    taking or taking over a lease on the job it belongs to; and every result written by a
    connection that is neither a host nor the soak (`soak`: its uploads, its cancels, its
    calm hosts), which would mean a writer goes unjudged."""
    by_transaction: dict[int, list[LeaseChange]] = defaultdict(list)
    for change in ledger.changes:
        by_transaction[change.txid].append(change)
    broken = []
    for write in ledger.writes:
        if write.writer == soak:
            continue
        pid = hosts.get(write.writer)
        if pid is None:
            broken.append(f"{write.rows} {write.what} row(s) written by {write.writer!r}")
            continue
        if not any(fenced(write, change, pid) for change in by_transaction[write.txid]):
            where = f"shard {write.shard_id}" if write.what == "snapshots" else "build"
            broken.append(
                f"host {pid} wrote {write.rows} {write.what} row(s) of build {write.build_id} "
                f"{where} at {write.at:%H:%M:%S.%f} holding no lease on its job"
            )
    return broken


def taken_from(ledger: Ledger, pid: int, name: str, since: datetime) -> list[LeaseChange]:
    """The leases host `pid` (connecting as `name`) held that another writer took at or after
    `since`: claimed again by another host, or ended as expired."""
    return [
        change
        for change in ledger.changes
        if change.at >= since
        and change.writer != name
        and change.old_status == "running"
        and pid_of(change.old_locked_by) == pid
    ]


def written_after_taken(ledger: Ledger, pid: int, name: str, since: datetime) -> list[str]:
    """The snapshots host `pid` (connecting as `name`) wrote for a shard whose job's lease
    another host took at or after `since` (the cut's start), after the taking and before the
    host held that job again. (A build's attempt row is shared by its shards' jobs, so only
    `unfenced_writes` can judge it.)"""
    broken = []
    for taken in taken_from(ledger, pid, name, since):
        regained = min(
            (
                change.at
                for change in ledger.changes
                if change.job_id == taken.job_id
                and change.at > taken.at
                and pid_of(change.new_locked_by) == pid
                and change.new_status == "running"
            ),
            default=None,
        )
        broken += [
            f"host {pid} wrote {write.rows} snapshot(s) of job {taken.job_id} at "
            f"{write.at:%H:%M:%S.%f}, after its lease was taken at {taken.at:%H:%M:%S.%f}"
            for write in ledger.writes
            if write.writer == name
            and write.what == "snapshots"
            and write.shard_id == taken.shard_id
            and write.at > taken.at
            and (regained is None or write.at < regained)
        ]
    return broken
