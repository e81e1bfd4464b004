"""A report published while its bucket stops answering: the child beats for the job meanwhile.

A host kills a child that reports no progress for `--stall-seconds` and counts a crash against
its job; a bucket that is away for a few seconds is the host's surroundings, not a hang. The
bucket here is a SeaweedFS of the test's own, frozen with SIGSTOP while the child's side of a
`publish` job (`child.report.publish.run`, as a child runs it) copies the pictures.
"""

from __future__ import annotations

import itertools
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from child.report import publish
from ipc.artifacts.s3 import S3Store
from supervisor.builds.ended import queue_publish
from supervisor.db.connection import transaction
from tests.capture_helpers import claim, prepare, run_build, screens
from tests.object_store_server import TemporaryObjectStore, own_server

FROZEN_SECONDS = 4.0
#: The longest silence the test allows: one beat late, well inside any stall time.
LONGEST_GAP_SECONDS = 2.5


@pytest.fixture
def frozen_store() -> Iterator[TemporaryObjectStore]:
    """An object store of the test's own, for it to freeze."""
    yield from own_server()


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_a_publish_waiting_on_a_frozen_bucket_beats_and_finishes_once_it_answers(
    engine: Engine,
    frozen_store: TemporaryObjectStore,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in frozen_store.environment().items():
        monkeypatch.setenv(name, value)
    store = S3Store(frozen_store.new_bucket("frozen"))
    stories = {f"story{index:02}": ((index % 40, 2, 6, 6),) for index in range(40)}
    queued = run_build(engine, store, screens(tmp_path / "shots", **stories))
    for item in list(store.listing("reports/")):
        store.delete([item.key])  # published once: publish again, from nothing
    with transaction(engine) as conn:
        queue_publish(conn, queued.build_id)
    (job,) = claim(engine)
    payload = prepare(engine, job, store)

    beats: list[float] = []
    result: dict[str, Any] = {}
    worker = threading.Thread(
        target=lambda: result.update(
            publish.run(payload, lambda _detail: beats.append(time.monotonic()))
        )
    )
    assert frozen_store.process is not None
    frozen_store.process.send_signal(signal.SIGSTOP)
    frozen_at = time.monotonic()
    try:
        worker.start()
        time.sleep(FROZEN_SECONDS)
    finally:
        frozen_store.process.send_signal(signal.SIGCONT)
    worker.join(timeout=120)

    assert not worker.is_alive()
    assert result["copied"] == 40 and result["missing"] == []
    assert store.exists(result["index"])
    moments = [frozen_at, *beats]
    silent = max(later - earlier for earlier, later in itertools.pairwise(moments))
    assert silent < LONGEST_GAP_SECONDS, (
        f"no progress for {silent:.1f} s while the bucket was frozen"
    )
    assert sum(moment < frozen_at + FROZEN_SECONDS for moment in beats) >= 3
