"""`run --metrics-address`: real hosts scraped over real HTTP while their children are killed
with real signals, their database stops and starts, and they drain."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import Engine, select

from ipc.artifacts.folder import FolderStore
from supervisor.builds.storybooks import enqueue_storybook, store_storybook
from supervisor.commands.demo import STORYBOOKS
from supervisor.db.connection import connect, transaction
from supervisor.db.migrate import upgrade
from supervisor.db.tables import builds
from tests.chromium import require_chromium
from tests.hosts import (
    FAST,
    SUPERVISION_ONLY,
    HostProcess,
    StartHost,
    ended,
    enqueue,
    hosts,
    running_child,
    wait_for,
)
from tests.postgres_server import TemporaryPostgres, own_postgres_server
from tests.processes.test_host_faults import fork_server_of

SERVED = ("--metrics-address", "127.0.0.1:0")
ROOT = Path(__file__).resolve().parents[2]
#: The demo's small Storybook: seven stories, one size each, none failing.
DEMO_STORYBOOK = STORYBOOKS / "main"


def address_of(host: HostProcess) -> str:
    """Where the host serves, as it logged it (`metrics serving`)."""
    return str(host.wait_for_event("metrics serving", 60)["address"])


def get(address: str, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://{address}{path}", timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def samples(address: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a scrape, by name and labels."""
    status, text = get(address, "/metrics")
    assert status == 200, text
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(address: str, name: str, **labels: str) -> float:
    return samples(address).get((name, tuple(sorted(labels.items()))), 0.0)


def healthz_until(address: str, wanted: str, timeout: float = 20.0) -> tuple[int, str]:
    """The first `/healthz` answer whose body starts with `wanted`."""

    def answered() -> tuple[int, str] | None:
        status, body = get(address, "/healthz")
        return (status, body) if body.startswith(wanted) else None

    return wait_for(answered, timeout, interval=0.02)


@SUPERVISION_ONLY
def test_crashes_are_counted_by_cause_and_healthz_fails_while_spawning_backs_off(
    engine: Engine, start_host: StartHost
) -> None:
    host = start_host(*FAST, "--concurrency", "1", "--max-crashes", "6", *SERVED)
    address = address_of(host)
    assert healthz_until(address, "ok") == (200, "ok\n")
    assert value(address, "storyshelf_children") == 1

    hung = enqueue(engine, "hang", max_attempts=1)
    os.kill(running_child(host, hung), signal.SIGKILL)
    assert ended(engine, hung)["status"] == "failed"
    wait_for(lambda: value(address, "storyshelf_child_crashes_total", cause="SIGKILL") == 1)

    # Four more children die without finishing a job: the fifth death in 30 s backs off.
    crashing = enqueue(engine, "crash", {"signal": "SIGSEGV"}, max_attempts=10)
    status, body = healthz_until(address, "unhealthy: backing off spawning")
    assert status == 503 and body == "unhealthy: backing off spawning after 5 children died\n"
    scraped = samples(address)
    assert scraped[("storyshelf_spawn_backoff", ())] == 1
    assert scraped[("storyshelf_child_crashes_total", (("cause", "SIGSEGV"),))] == 4
    assert (
        scraped[("storyshelf_jobs_finished_total", (("kind", "hang"), ("outcome", "failed")))] == 1
    )
    assert (
        scraped[("storyshelf_jobs_finished_total", (("kind", "crash"), ("outcome", "retried")))]
        == 4
    )

    # The back-off ends and children spawn again: healthy, whatever the crashing job does.
    assert ended(engine, crashing)["status"] == "failed"
    assert healthz_until(address, "ok") == (200, "ok\n")
    assert value(address, "storyshelf_spawn_backoff") == 0
    assert value(address, "storyshelf_child_crashes_total", cause="SIGSEGV") == 6

    # Draining: 503 while the last job finishes, then the host leaves.
    sleeping = enqueue(engine, "sleep", {"seconds": 2.0})
    running_child(host, sleeping)
    host.signal(signal.SIGTERM)
    assert healthz_until(address, "draining") == (503, "draining: SIGTERM\n")
    assert host.wait() == 0
    assert ended(engine, sleeping)["status"] == "completed"


@SUPERVISION_ONLY
def test_jobs_leases_and_claims_are_counted(engine: Engine, start_host: StartHost) -> None:
    ids = [enqueue(engine, "noop", {"n": n}) for n in range(30)]
    long = enqueue(engine, "sleep", {"seconds": 3.5, "step": 0.1})
    host = start_host(*FAST, "--lease-seconds", "4", "--stall-seconds", "2", *SERVED)
    address = address_of(host)
    for job_id in [*ids, long]:
        ended(engine, job_id)
    wait_for(
        lambda: value(address, "storyshelf_jobs_finished_total", kind="sleep", outcome="completed")
    )
    scraped = samples(address)
    completed = scraped[
        ("storyshelf_jobs_finished_total", (("kind", "noop"), ("outcome", "completed")))
    ]
    assert completed == 30
    assert scraped[("storyshelf_job_duration_seconds_count", (("kind", "noop"),))] == 30
    # The host times a job from when it learns the child began it: a job the child had
    # waiting behind the last noop starts before the host reads that noop's end.
    assert scraped[("storyshelf_job_duration_seconds_sum", (("kind", "sleep"),))] >= 3.4
    # A quarter lease is 1 s: the 3.5 s job renewed its lease as it progressed.
    assert scraped[("storyshelf_lease_renewals_total", ())] >= 2
    assert scraped[("storyshelf_leases_lost_total", ())] == 0
    assert scraped[("storyshelf_claim_batch_size_sum", ())] >= 31
    assert scraped[("storyshelf_pickup_latency_seconds_count", ())] >= 31
    assert scraped[("storyshelf_queue_jobs", (("kind", "noop"), ("status", "queued")))] == 0
    assert ("storyshelf_claimed_ahead", ()) in scraped
    assert host.stop() == 0


@pytest.fixture
def own_postgres() -> Iterator[TemporaryPostgres]:
    """A PostgreSQL server of this test's own, which it stops and starts."""
    yield from own_postgres_server()


@pytest.fixture
def start_on_own_postgres(own_postgres: TemporaryPostgres, tmp_path: Path) -> Iterator[StartHost]:
    """Starts hosts on the migrated database of `own_postgres`; kills them after."""
    engine = connect(own_postgres.url)
    upgrade(engine)
    engine.dispose()
    yield from hosts(own_postgres.url, tmp_path / "artifacts")


def test_healthz_fails_while_the_database_is_away_and_metrics_are_still_served(
    own_postgres: TemporaryPostgres, start_on_own_postgres: StartHost
) -> None:
    host = start_on_own_postgres(*FAST, "--concurrency", "1", *SERVED)
    address = address_of(host)
    queued = ("storyshelf_queue_jobs", (("kind", "noop"), ("status", "queued")))
    assert healthz_until(address, "ok") == (200, "ok\n")
    assert queued in samples(address)

    own_postgres.stop_server()
    status, body = healthz_until(address, "unhealthy: cannot reach the database")
    assert status == 503 and "database unavailable" in body, body
    started = time.monotonic()
    scraped = samples(address)
    assert time.monotonic() - started < 5, "a scrape must not wait for a database that is away"
    assert queued not in scraped
    assert scraped[("storyshelf_children", ())] == 1

    own_postgres.start_server()
    assert healthz_until(address, "ok", timeout=40) == (200, "ok\n")
    wait_for(lambda: queued in samples(address))
    assert host.stop() == 0


@SUPERVISION_ONLY
def test_stories_rendered_in_children_are_counted_by_the_host(
    engine: Engine, start_host: StartHost, tmp_path: Path
) -> None:
    """The children's render times reach the host in the capture's result, never by the host
    importing child code."""
    require_chromium()
    stored = store_storybook(FolderStore(tmp_path / "artifacts"), DEMO_STORYBOOK)
    with transaction(engine) as conn:
        build_id = enqueue_storybook(conn, project="web", branch="main", storybook=stored).build_id
    host = start_host(*FAST, "--stall-seconds", "6", *SERVED)
    address = address_of(host)

    def build_ended() -> bool:
        with engine.connect() as conn:
            row = conn.execute(select(builds.c.status).where(builds.c.id == build_id)).one()
        return row.status not in ("pending", "capturing")

    wait_for(build_ended, timeout=120)
    scraped = samples(address)
    assert scraped[("storyshelf_stories_rendered_total", ())] == 7
    assert scraped[("storyshelf_story_render_seconds_count", ())] == 7
    assert 0 < scraped[("storyshelf_story_render_seconds_sum", ())] < 7 * 15
    assert scraped[("storyshelf_stories_unsettled_total", ())] == 0
    finished = ("storyshelf_jobs_finished_total", (("kind", "plan"), ("outcome", "completed")))
    assert scraped[finished] == 1
    assert host.stop() == 0


@SUPERVISION_ONLY
def test_idle_and_slow_clients_cost_the_host_no_thread_and_healthz_answers_meanwhile(
    engine: Engine, start_host: StartHost
) -> None:
    """200 idle connections and 50 requests that never end hold no thread of the parent (a
    thread each would hold a pid each, and under a pids limit leave no room to fork a child),
    and `/healthz` answers within a second while they sit there."""
    host = start_host(*FAST, "--concurrency", "1", *SERVED)
    address = address_of(host)
    healthz_until(address, "ok")
    value(address, "storyshelf_children")  # a scrape has run: its thread has come and gone
    threads = psutil.Process(host.pid).num_threads()
    where = address.rpartition(":")
    target = (where[0], int(where[2]))
    clients = [socket.create_connection(target, timeout=5) for _ in range(250)]
    try:
        for slow in clients[200:]:
            slow.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        time.sleep(1.0)
        assert psutil.Process(host.pid).num_threads() <= threads
        started = time.monotonic()
        assert get(address, "/healthz") == (200, "ok\n")
        assert time.monotonic() - started < 1.0
        job_id = enqueue(engine, "sleep", {"seconds": 0.1})
        assert ended(engine, job_id)["status"] == "completed"
    finally:
        for client in clients:
            client.close()
    assert host.stop() == 0


@SUPERVISION_ONLY
def test_an_address_that_cannot_be_used_is_one_line_and_exit_2(database_url: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = f"127.0.0.1:{taken.getsockname()[1]}"
        for address, said in (
            ("9464", "'9464' is not HOST:PORT"),
            ("127.0.0.1:99999", "'127.0.0.1:99999' is not HOST:PORT"),
            (busy, f"{busy}: cannot listen there: Address already in use"),
        ):
            ran = subprocess.run(
                [sys.executable, "-m", "supervisor", "run", "--database-url", database_url,
                 "--metrics-address", address],
                capture_output=True, text=True, cwd=ROOT, timeout=60,
            )  # fmt: skip
            assert ran.returncode == 2, ran.stderr
            assert ran.stderr.startswith(f"storyshelf run: --metrics-address {said}")
            assert ran.stderr.count("\n") == 1, ran.stderr
            assert "Traceback" not in ran.stderr + ran.stdout


@SUPERVISION_ONLY
def test_fork_servers_restarted_beside_the_scraped_server_still_spawn_children(
    engine: Engine, start_host: StartHost
) -> None:
    """A fork server restarted while the metrics thread serves scrapes (the only time the
    parent forks with a thread running) forks working children, again and again."""
    host = start_host(*FAST, "--concurrency", "1", *SERVED)
    address = address_of(host)
    healthz_until(address, "ok")
    scraping = threading.Event()

    def scrape() -> None:
        while not scraping.is_set():
            get(address, "/metrics")
            get(address, "/healthz")

    scraper = threading.Thread(target=scrape, daemon=True)
    scraper.start()
    try:
        for round_ in range(3):
            started = len(host.events("fork server started"))
            fork_server = fork_server_of(host)
            fork_server.kill()
            fork_server.wait(10)
            for child in psutil.Process(host.pid).children():
                if child.pid != fork_server.pid and os.getsid(child.pid) == child.pid:
                    child.kill()  # a new child is needed: the new fork server must make it
            job_id = enqueue(engine, "sleep", {"seconds": 0.1, "round": round_})
            assert ended(engine, job_id)["status"] == "completed", host.log_tail()
            assert len(host.events("fork server started")) > started
    finally:
        scraping.set()
        scraper.join(15)
    assert get(address, "/healthz") == (200, "ok\n")
    assert host.stop() == 0
