"""The chaos soak's partitions (`scripts/partitions`): the fence read from the triggers' log,
and a machine that cannot give hosts namespaces refused in one line.

The partitions themselves run in the short soaks (`tests/processes/test_chaos.py`).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from scripts import chaos_soak
from scripts.partitions import namespaces
from scripts.partitions.fencing import LeaseChange, Ledger, ResultWrite, unfenced_writes
from scripts.partitions.fencing import written_after_taken as after_taken

CUT = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
HOST_A, HOST_B = "vm:101:aaaa", "vm:202:bbbb"
NAMES = {"host-a": 101, "host-b": 202}


def change(txid: int, seconds: float, writer: str, old: str | None, new: str | None, *,
           old_status: str = "running", new_status: str = "running",
           expired: bool = False) -> LeaseChange:  # fmt: skip
    return LeaseChange(
        txid, CUT + timedelta(seconds=seconds), writer, 7, 3, 5,
        old_status, new_status, old, new, expired,
    )  # fmt: skip


def snapshots(txid: int, seconds: float, writer: str) -> ResultWrite:
    return ResultWrite(txid, CUT + timedelta(seconds=seconds), writer, "snapshots", 3, 5, 4)


def test_results_written_while_settling_the_writers_own_lease_are_fenced() -> None:
    ledger = Ledger(
        [
            change(1, 0, "host-a", None, HOST_A, old_status="queued"),
            change(2, 5, "host-a", HOST_A, None, new_status="completed"),
        ],
        [snapshots(2, 5, "host-a")],
    )
    assert unfenced_writes(ledger, NAMES, chaos_soak.SOAK_NAME) == []
    assert after_taken(ledger, 101, "host-a", CUT) == []


def test_a_cut_host_writing_after_another_host_took_its_lease_is_caught() -> None:
    """Host A is cut, its lease expires and host B claims the job; A then writes the shard's
    snapshots in a transaction that changed no job of that shard (a fence that did not hold)."""
    ledger = Ledger(
        [
            change(1, 0, "host-a", None, HOST_A, old_status="queued"),
            change(2, 20, "host-b", HOST_A, HOST_B, expired=True),
            change(4, 40, "host-b", HOST_B, None, new_status="completed"),
        ],
        [snapshots(3, 30, "host-a"), snapshots(4, 40, "host-b")],
    )
    assert len(unfenced_writes(ledger, NAMES, chaos_soak.SOAK_NAME)) == 1
    assert len(after_taken(ledger, 101, "host-a", CUT)) == 1


def test_an_expired_lease_taken_over_by_the_writer_is_fenced() -> None:
    """Host B fails a job whose lease ran out on its final attempt, in one transaction."""
    ledger = Ledger(
        [change(9, 60, "host-b", HOST_A, None, new_status="failed", expired=True)],
        [ResultWrite(9, CUT + timedelta(seconds=60), "host-b", "capture attempt", 3, None, 1)],
    )
    assert unfenced_writes(ledger, NAMES, chaos_soak.SOAK_NAME) == []


def test_the_soaks_own_writes_are_not_judged_and_a_stranger_s_are() -> None:
    ledger = Ledger([], [snapshots(1, 0, chaos_soak.SOAK_NAME), snapshots(2, 0, "psql")])
    assert unfenced_writes(ledger, NAMES, chaos_soak.SOAK_NAME) == [
        "4 snapshots row(s) written by 'psql'"
    ]


def test_namespaces_need_root() -> None:
    assert namespaces.unavailable(1000) == "network namespaces need root (CAP_NET_ADMIN)"


def test_a_soak_that_cannot_partition_says_so_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(chaos_soak.os, "geteuid", lambda: 1000)
    assert chaos_soak.main(["--minutes", "0.1"]) == chaos_soak.NO_NAMESPACES
    errors = capsys.readouterr().err.strip().splitlines()
    assert errors == [
        "scripts/chaos: network namespaces need root (CAP_NET_ADMIN); the hosts' partitions "
        "need it (--no-partitions runs the soak without them)"
    ]
