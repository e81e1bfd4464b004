"""The promises of `child.worker.loop`, kept by a real child process over a real socket.

The child runs in a fresh interpreter rather than a fork of this one: the tests before it ran
libvips here, and a process that did and then forks can deadlock its children (which is why the
host has a fork server). The child's loop is the same either way.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest

from child.worker.loop import MAX_ERROR_CHARS
from ipc.framing import recv_message, send_message
from ipc.messages import (
    TO_PARENT,
    Accepted,
    Cancel,
    Cancelled,
    Done,
    Failed,
    Hello,
    Progress,
    Run,
    Unable,
    Warm,
)
from tests.capture_helpers import write_png
from tests.cgroups import pids_cgroup
from tests.chromium import require_chromium
from tests.hosts import ROOT

CHILD = """
import socket, sys
from child.worker.handlers import registered_handlers
from child.worker.loop import serve
serve(socket.socket(fileno=int(sys.argv[1])), registered_handlers())
"""


@dataclass
class RealChild:
    """A child process running `child.worker.loop.serve`, and the parent's end of its socket."""

    process: subprocess.Popen[bytes]
    sock: socket.socket

    def receive(self) -> Any:
        return recv_message(self.sock, TO_PARENT)

    def run(self, job_id: int, kind: str, payload: Any) -> tuple[Any, Any]:
        """Send a job; the child's acknowledgement and how the job ended (progress skipped)."""
        send_message(self.sock, Run(job_id, kind, 1, payload))
        accepted, ended = self.receive(), self.receive()
        while isinstance(ended, Progress):
            ended = self.receive()
        return accepted, ended


#: A child whose warm-up (`Warm`) is argv[2]: "slow" (a launch that beats five times, 0.2 s
#: apart), "failing" (one that raises after a beat), or "browser" (the real one).
WARMING_CHILD = """
import socket, sys, time
import structlog
from child.worker.handlers import registered_handlers, warm
from child.worker.loop import serve

structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))

def slow(build, beat):
    for _ in range(5):
        time.sleep(0.2)
        beat()

def failing(build, beat):
    beat()
    raise RuntimeError("Chromium could not start: no display")

chosen = {"slow": slow, "failing": failing, "browser": warm}[sys.argv[2]]
serve(socket.socket(fileno=int(sys.argv[1])), registered_handlers(), chosen)
"""


@contextlib.contextmanager
def started_child(tmp_path: Path, script: str, *args: str) -> Iterator[RealChild]:
    """A ready child running `script` (its socket's descriptor, then `args`, on its command
    line) with the test kinds loaded (`STORYSHELF_PLUGINS=tests.kinds`)."""
    ours, theirs = socket.socketpair()
    ours.settimeout(60)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "STORYSHELF_PLUGINS": "tests.kinds"}
    with (tmp_path / "child.stderr").open("wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-c", script, str(theirs.fileno()), *args],
            pass_fds=[theirs.fileno()], env=env, stderr=stderr,
            start_new_session=True,  # a group of its own, as a host's child has
        )  # fmt: skip
    theirs.close()
    child = RealChild(process, ours)
    try:
        assert isinstance(child.receive(), Hello)
        yield child
    finally:
        ours.close()
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)  # its browser too, in its group
        process.wait()


@pytest.fixture
def real_child(tmp_path: Path) -> Iterator[RealChild]:
    """A ready child with the test kinds loaded."""
    with started_child(tmp_path, CHILD) as child:
        yield child


def test_a_result_too_big_for_a_frame_fails_its_job_and_the_child_goes_on(
    real_child: RealChild,
) -> None:
    accepted, ended = real_child.run(1, "oversize", {"mib": 17})
    assert accepted == Accepted(1)
    assert ended == Failed(1, "result of 17.0 MiB exceeds the 16 MiB frame limit")
    assert real_child.run(2, "noop", {}) == (Accepted(2), Done(2, {}))
    assert real_child.process.poll() is None


def test_a_failure_no_retry_can_mend_is_sent_final_in_its_own_words(
    real_child: RealChild,
) -> None:
    """`PermanentFailure` travels as `Failed(final=True)` with its message alone; a `JobError`
    keeps its words and stays retryable; any other error is named with its type."""
    _, ended = real_child.run(1, "give_up", {"message": "webhook answered 404 Not Found"})
    assert ended == Failed(1, "webhook answered 404 Not Found", final=True)
    _, ended = real_child.run(2, "give_up", {"message": "try later", "retry": True})
    assert ended == Failed(2, "try later", final=False)
    _, ended = real_child.run(3, "fail", {"message": "boom"})
    assert ended == Failed(3, "RuntimeError: boom", final=False)
    assert real_child.process.poll() is None


def test_an_error_too_big_for_a_frame_is_cut_and_the_child_goes_on(real_child: RealChild) -> None:
    accepted, ended = real_child.run(1, "oversize", {"mib": 17, "in_error": True})
    assert accepted == Accepted(1)
    assert isinstance(ended, Failed) and ended.job_id == 1
    assert ended.error.startswith("RuntimeError: xxx")
    assert ended.error.endswith(
        f" ({17 * 2**20 + len('RuntimeError: ') - MAX_ERROR_CHARS} more characters)"
    )
    assert real_child.run(2, "noop", {}) == (Accepted(2), Done(2, {}))
    assert real_child.process.poll() is None


def test_a_result_msgpack_cannot_encode_fails_its_job_and_the_child_goes_on(
    real_child: RealChild,
) -> None:
    accepted, ended = real_child.run(1, "unencodable", {})
    assert accepted == Accepted(1)
    assert isinstance(ended, Failed) and ended.error.startswith("result cannot be sent: ")
    assert real_child.run(2, "noop", {}) == (Accepted(2), Done(2, {}))
    assert real_child.process.poll() is None


def test_progress_from_a_thread_that_outlives_its_job_is_not_sent(real_child: RealChild) -> None:
    """A beat after the job's end would be progress for a job the child no longer runs, which
    the parent answers by killing it."""
    send_message(real_child.sock, Run(1, "linger", 1, {"seconds": 0.5}))
    messages = [real_child.receive()]
    while not isinstance(messages[-1], Done):
        messages.append(real_child.receive())
    assert messages[0] == Accepted(1) and messages[-1] == Done(1, {})
    assert any(isinstance(message, Progress) for message in messages)
    time.sleep(0.6)  # the thread beat on for half a second after the end
    assert real_child.run(2, "noop", {}) == (Accepted(2), Done(2, {}))


def test_a_child_out_of_threads_is_unable_to_run_the_job_rather_than_failing_its_snapshot(
    real_child: RealChild, tmp_path: Path
) -> None:
    """A pids limit that refuses libvips its threads is the host's trouble: the child says it
    is `Unable` (the host gives the job back) rather than recording a good image as damaged;
    with threads back, the same job records the change."""
    root = tmp_path / "artifacts"
    base = write_png(root / "images" / "base.png", marks=((4, 4, 10, 10),))
    new = write_png(root / "images" / "new.png", marks=((8, 4, 10, 10),))
    payload = {
        "artifacts": str(root),
        "build_id": 1,
        "shard_id": 1,
        "diff_dir": "diffs/1",
        "options": {
            "metric": "oklab",
            "threshold": 0.05,
            "flat_threshold": 0.05,
            "count_aa": False,
            "budget_pixels": 0,
        },
        "snapshots": [
            {
                "name": "moved",
                "image": "images/new.png",
                "sha256": hashlib.sha256(new.read_bytes()).hexdigest(),
                "baseline": {
                    "id": 1,
                    "image": "images/base.png",
                    "sha256": hashlib.sha256(base.read_bytes()).hexdigest(),
                },
            }
        ],
    }
    with pids_cgroup("threads") as group:
        (group / "cgroup.procs").write_text(str(real_child.process.pid))
        (group / "pids.max").write_text((group / "pids.current").read_text().strip())
        accepted, ended = real_child.run(1, "capture", payload)
        assert accepted == Accepted(1)
        assert isinstance(ended, Unable), ended
        assert "out of resources" in ended.reason and "thread" in ended.reason, ended.reason
        (group / "pids.max").write_text("max")
        _, done = real_child.run(2, "capture", payload)
    assert isinstance(done, Done), done
    assert [shot["status"] for shot in done.result["snapshots"]] == ["changed"]


def test_the_engine_check_waits_for_threads_rather_than_calling_the_engine_broken() -> None:
    """A child that starts while a pids limit refuses libvips its threads says hello late, not
    "the image engine cannot load" (which makes the host refuse to run at all)."""
    code = (
        "import sys, pyvips; sys.stdin.readline()\n"
        "from child.worker.engine import check_engine\n"
        "print(check_engine())"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
    )
    try:
        with pids_cgroup("engine") as group:
            (group / "cgroup.procs").write_text(str(process.pid))
            (group / "pids.max").write_text((group / "pids.current").read_text().strip())
            assert process.stdin is not None
            process.stdin.write(b"go\n")
            process.stdin.flush()
            time.sleep(1.5)
            assert process.poll() is None, "it answered while it could not compute"
            (group / "pids.max").write_text("max")
            out, _ = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert out.decode().startswith("('libvips "), out
    assert out.decode().rstrip().endswith("None)"), out


def test_jobs_sent_ahead_wait_unaccepted_and_a_cancel_drops_one_at_once(
    real_child: RealChild,
) -> None:
    """A job sent while another runs is accepted only when it starts (its `Accepted` goes out
    with the end of the one before); a cancel of one still waiting is answered while the
    running job reports progress, and it never starts."""
    for run in (
        Run(1, "sleep", 1, {"seconds": 0.6, "step": 0.1}),
        Run(2, "noop", 1, {}),
        Run(3, "noop", 1, {}),
    ):
        send_message(real_child.sock, run)
    seen: list[Any] = [real_child.receive()]
    send_message(real_child.sock, Cancel(3))
    while not (seen and isinstance(seen[-1], Done) and seen[-1].job_id == 2):
        message = real_child.receive()
        if not isinstance(message, Progress):
            seen.append(message)
    assert [(type(m).__name__, m.job_id) for m in seen] == [
        ("Accepted", 1),
        ("Cancelled", 3),
        ("Done", 1),
        ("Accepted", 2),
        ("Done", 2),
    ]


def test_a_job_sent_while_the_child_warms_up_is_accepted_and_kept_alive_until_it_runs(
    tmp_path: Path,
) -> None:
    """A browser can take seconds to start: a job sent meanwhile is accepted at the warm-up's
    first beat and reported waiting at each one after, so the host never takes the child for
    hung; it then runs as any other."""
    with started_child(tmp_path, WARMING_CHILD, "slow") as child:
        send_message(child.sock, Warm())
        send_message(child.sock, Run(1, "noop", 1, {}))
        sent = time.monotonic()
        assert child.receive() == Accepted(1)
        assert time.monotonic() - sent < 0.9  # before the warm-up's 1 s ended
        messages = [child.receive()]
        while not isinstance(messages[-1], Done):
            messages.append(child.receive())
        assert messages[-1] == Done(1, {})
        waiting = [m for m in messages if isinstance(m, Progress)]
        assert waiting and all(m == Progress(1, {"waiting": True}) for m in waiting)
        assert child.run(2, "noop", {}) == (Accepted(2), Done(2, {}))


def test_a_job_cancelled_while_the_child_warms_up_is_answered_and_the_child_goes_on(
    tmp_path: Path,
) -> None:
    with started_child(tmp_path, WARMING_CHILD, "slow") as child:
        send_message(child.sock, Warm())
        send_message(child.sock, Run(1, "noop", 1, {}))
        assert child.receive() == Accepted(1)
        send_message(child.sock, Cancel(1))
        ended = child.receive()
        while isinstance(ended, Progress):
            ended = child.receive()
        assert ended == Cancelled(1)
        assert child.run(2, "noop", {}) == (Accepted(2), Done(2, {}))


def test_a_warm_up_that_fails_is_logged_and_the_next_job_runs(tmp_path: Path) -> None:
    """The job that needs the browser meets the same trouble and says so in its own failure:
    the warm-up's is only a log line, never the child's death."""
    with started_child(tmp_path, WARMING_CHILD, "failing") as child:
        send_message(child.sock, Warm())
        assert child.run(1, "noop", {}) == (Accepted(1), Done(1, {}))
        assert child.process.poll() is None
    said = (tmp_path / "child.stderr").read_text()
    assert "could not warm up" in said and "Chromium could not start: no display" in said


def test_warm_starts_the_childs_browser_before_any_job(tmp_path: Path) -> None:
    require_chromium()
    with started_child(tmp_path, WARMING_CHILD, "browser") as child:
        send_message(child.sock, Warm())
        deadline = time.monotonic() + 30
        while not _browsers(child.process.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _browsers(child.process.pid), "no Chromium started after Warm"
        assert child.run(1, "noop", {}) == (Accepted(1), Done(1, {}))


def _browsers(pid: int) -> list[psutil.Process]:
    """Chromium's processes under `pid`, the browser's own first."""
    try:
        family = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []
    return [p for p in family if "chrom" in p.name() and p.is_running()]
