"""A short chaos soak in CI: hosts, fork servers, children and PostgreSQL killed at random, forks
refused, the reports folder unwritable, a host's clock shifted, a host cut off the network (as
root: each host in a network namespace of its own); invariants held.

The soak itself is `scripts/chaos` (see `scripts/chaos_soak.py`); this runs it small (8 builds of
24 snapshots in 2 shards, half a minute of faults, about a minute and a half in all) with every fault, so that
every change meets the faults the soak injects, not only the paths the other tests take one at a
time. Under CI=true the soak fails without libfaketime, as this test does without PostgreSQL.

A second run puts the artifacts in a bucket (`--store s3`, a SeaweedFS the soak starts):
three hosts that share nothing but PostgreSQL and the bucket, each with its own cache, while the
object store restarts and caches are deleted under them too. Under CI=true it fails without
`weed`, as the suite's object-store tests do.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from tests.hosts import ROOT
from tests.object_store_server import ObjectStoreNotFound, find_weed
from tests.postgres_server import PostgresNotFound, find_bindir
from tests.required import unavailable


def require_postgres() -> None:
    """Skip without PostgreSQL; fail under CI=true, as the database tests do."""
    try:
        find_bindir()
    except PostgresNotFound as error:
        unavailable("PostgreSQL", error)


def require_weed() -> None:
    """Skip without SeaweedFS's `weed`; fail under CI=true, as the object-store tests do."""
    try:
        find_weed()
    except ObjectStoreNotFound as error:
        unavailable("SeaweedFS", error)


#: How long a short soak may take before the test gives up on it: about three times as long as
#: it takes beside the suite's other tests on two CPUs (100-150 s on three workers).
SOAK_TIMEOUT_SECONDS = 420


def soak(*options: str) -> subprocess.CompletedProcess[str]:
    """Run `scripts/chaos` with `options`. The soak leads a process group of its own, which its
    hosts, the latency forwarder and its servers join: a soak past its time is ended with all of
    them, where killing the script alone left three hosts with their children and browsers
    running for minutes, slowing every test after it."""
    command = [sys.executable, str(ROOT / "scripts" / "chaos"), *options]
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    ) as process:
        try:
            stdout, stderr = process.communicate(timeout=SOAK_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            raise
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


@pytest.mark.timeout(SOAK_TIMEOUT_SECONDS + 30)
def test_short_chaos_soak_holds_every_invariant() -> None:
    require_postgres()
    result = soak(
        "--builds", "8", "--snapshots", "24", "--shards", "2", "--minutes", "0.5", "--seed", "20",
        "--lease-seconds", "10", "--stall-seconds", "6",  # a stall the lease leaves room for
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-4000:]
    assert "invariants broken" not in result.stderr


@pytest.mark.timeout(SOAK_TIMEOUT_SECONDS + 30)
def test_short_chaos_soak_on_a_bucket_holds_every_invariant() -> None:
    """Hosts that share only PostgreSQL and a bucket, the bucket restarted and a host's cache
    deleted among the other faults: 4 builds of 16 snapshots, half a minute of faults, about
    a minute and a half in all (the calm run and each round's baselines capture the Storybook fixture)."""
    require_postgres()
    require_weed()
    result = soak(
        "--store", "s3",
        "--builds", "4", "--snapshots", "16", "--shards", "2", "--minutes", "0.5", "--seed", "21",
        "--lease-seconds", "10", "--stall-seconds", "6",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-4000:]
    assert "invariants broken" not in result.stderr
    enabled = next(line for line in result.stdout.splitlines() if line.startswith("faults: "))
    assert "object store restarted" in enabled and "cache deleted" in enabled, enabled
