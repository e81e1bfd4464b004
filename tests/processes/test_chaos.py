"""A short chaos soak in CI: hosts, fork servers, children and PostgreSQL killed at random, forks
refused, the reports folder unwritable, a host's clock shifted; invariants held.

The soak itself is `scripts/chaos` (see `scripts/chaos_soak.py`); this runs it small (8 builds of
24 snapshots in 2 shards, a minute of faults, about two minutes in all) with every fault, so that
every change meets the faults the soak injects, not only the paths the other tests take one at a
time. Under CI=true the soak fails without libfaketime, as this test does without PostgreSQL.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.hosts import ROOT
from tests.postgres_server import PostgresNotFound, find_bindir


def test_short_chaos_soak_holds_every_invariant() -> None:
    try:
        find_bindir()
    except PostgresNotFound as error:
        if os.environ.get("CI") == "true":
            pytest.fail(f"PostgreSQL is required in CI: {error}")
        pytest.skip(str(error))
    command = [
        sys.executable, str(ROOT / "scripts" / "chaos"),
        "--builds", "8", "--snapshots", "24", "--shards", "2", "--minutes", "1", "--seed", "20",
        "--lease-seconds", "10", "--stall-seconds", "6",  # a stall the lease leaves room for
    ]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=280, check=False)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-4000:]
    assert "invariants broken" not in result.stderr
