"""Job kinds for the supervisor's tests, loaded into hosts with `STORYSHELF_PLUGINS=tests.kinds`.

Each does one thing a real handler can do to its child: work with progress, fail, crash on a
real signal, hang in native-like silence, eat memory, break the wire protocol, return more
than a frame holds, or leave a thread beating after it returned.
"""

from __future__ import annotations

import ctypes
import os
import signal
import stat
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import structlog

from child.worker.handler import Handler, Progress
from ipc import scratch
from ipc.failures import JobError, PermanentFailure
from supervisor.builds.kinds import Kind, Payload
from supervisor.builds.reduce import ReduceOutcome
from supervisor.db.queue import Job


def _with_attempt(_conn: object, job: Job, _store: object) -> Payload:
    return {**job.data, "attempt": job.attempt}


def _accepts(data: Any) -> bool:
    return isinstance(data, dict) and data.get("valid", True) is True


#: A payload of this many bytes cannot be framed (the limit is 16 MiB).
HUGE_PAYLOAD_BYTES = 17 * 2**20


def _huge_payload(_conn: object, job: Job, _store: object) -> Payload:
    return {**job.data, "padding": "x" * HUGE_PAYLOAD_BYTES}


def _close_badly(_conn: object, job: Job, error: str) -> ReduceOutcome:
    """A kind's bookkeeping that raises, as a bug in it would."""
    raise RuntimeError(f"bookkeeping of job {job.id} broke")


def parent_kinds() -> dict[str, Kind]:
    names = (
        "sleep", "fail", "crash", "hang", "eat", "garble", "spawn", "half_write", "oversize",
        "environment",
    )  # fmt: skip
    kinds = {name: Kind(name, accepts=_accepts, prepare=_with_attempt) for name in names}  # type: ignore[arg-type]
    kinds["give_up"] = Kind("give_up", accepts=_accepts)
    kinds["huge"] = Kind("huge", accepts=_accepts, prepare=_huge_payload)  # type: ignore[arg-type]
    kinds["fail_badly"] = Kind(
        "fail_badly",
        accepts=_accepts,
        prepare=_with_attempt,  # type: ignore[arg-type]
        on_failed=_close_badly,  # type: ignore[arg-type]
    )
    return kinds


def _sleep(payload: dict[str, Any], progress: Progress) -> dict[str, Any]:
    """Work for `seconds`, reporting progress every `step` seconds."""
    deadline = time.monotonic() + float(payload.get("seconds", 0.1))
    while time.monotonic() < deadline:
        time.sleep(min(float(payload.get("step", 0.05)), max(0.0, deadline - time.monotonic())))
        progress({"left": deadline - time.monotonic()})
    return {"slept": payload.get("seconds", 0.1), "pid": os.getpid()}


def _fail(payload: dict[str, Any], progress: Progress) -> None:
    raise RuntimeError(payload.get("message", "handler failed"))


def _give_up(payload: dict[str, Any], progress: Progress) -> None:
    """Fail in words for people: for good (`PermanentFailure`), or, with `retry`, to be retried."""
    failure = JobError if payload.get("retry") else PermanentFailure
    raise failure(payload.get("message", "no retry can mend this"))


def _crash(payload: dict[str, Any], progress: Progress) -> dict[str, Any]:
    """Die on a real signal while `attempt` <= `crash_attempts` (default: always); with `quiet`,
    at once, its `Accepted` the last thing it sent."""
    if not payload.get("quiet"):
        progress({"about_to": "crash"})
    if payload["attempt"] <= payload.get("crash_attempts", 1_000):
        sig = signal.Signals[payload.get("signal", "SIGSEGV")]
        if sig == signal.SIGSEGV:
            ctypes.string_at(0)  # a real segmentation fault, as native code would have
        os.kill(os.getpid(), sig)
        time.sleep(5)
    return {"survived": payload["attempt"]}


def _hang(payload: dict[str, Any], progress: Progress) -> None:
    progress({"about_to": "hang"})
    time.sleep(3600)


def _spawn(payload: dict[str, Any], progress: Progress) -> None:
    """Start a process of its own, then hang (or, with `crash_noting_to`, note its pid in that
    folder and die of a segmentation fault): the child's end must take that process too."""
    started = subprocess.Popen(["sleep", "300"])
    if "crash_noting_to" in payload:
        Path(payload["crash_noting_to"], str(started.pid)).touch()
        ctypes.string_at(0)
    progress({"about_to": "hang"})
    time.sleep(3600)


def _eat(payload: dict[str, Any], progress: Progress) -> dict[str, Any]:
    """Hold `mib` of touched memory for `seconds`, reporting progress."""
    block = bytearray(int(payload["mib"]) * 2**20)
    for index in range(0, len(block), 4096):
        block[index] = 1
    deadline = time.monotonic() + float(payload.get("seconds", 1.0))
    while time.monotonic() < deadline:
        time.sleep(0.05)
        progress({"held": len(block)})
    return {"held": len(block)}


def _garble(payload: dict[str, Any], progress: Progress) -> None:
    """Write bytes that are no frame to the parent, as a corrupted child might."""
    for fd in range(3, 64):
        try:
            if stat.S_ISSOCK(os.fstat(fd).st_mode):
                os.write(fd, bytes.fromhex(payload.get("hex", "00000003c1c1c1")))
                break
        except OSError:
            continue
    time.sleep(10)


def _half_write(payload: dict[str, Any], progress: Progress) -> None:
    """Write half a file to scratch, as the diff does before its rename, then hang there; the
    scratch path goes to `<artifacts>/half-written-<pid>` so the test knows what to look for."""
    artifacts = Path(payload["artifacts"])
    unfinished = scratch.new_file(artifacts, ".png")
    unfinished.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 4096)
    (artifacts / f"half-written-{os.getpid()}").write_text(str(unfinished))
    progress({"about_to": "hang"})
    time.sleep(3600)


def _oversize(payload: dict[str, Any], progress: Progress) -> dict[str, Any]:
    """Return `mib` MiB of text, or fail with an error that long when `in_error` is set."""
    text = "x" * int(float(payload["mib"]) * 2**20)
    if payload.get("in_error"):
        raise RuntimeError(text)
    return {"text": text}


def _unencodable(payload: dict[str, Any], progress: Progress) -> dict[str, Any]:
    """Return what msgpack cannot encode, as a handler with a bug might."""
    return {"when": time, "big": 2**70}


def _linger(payload: dict[str, Any], progress: Progress) -> dict[str, Any]:
    """Return while a thread of the job still beats for it, as the site's server does when it
    is still reading a file from a slow store after the job's last story."""

    def beat() -> None:
        until = time.monotonic() + float(payload["seconds"])
        while time.monotonic() < until:
            progress({"waiting": True})
            time.sleep(0.005)

    threading.Thread(target=beat, daemon=True).start()
    time.sleep(0.05)  # beats before the end, then after it
    return {}


def _environment(payload: dict[str, Any], progress: Progress) -> dict[str, Any]:
    """Say, in the child's log, what one variable of its environment holds."""
    name = str(payload["name"])
    structlog.get_logger().info("environment read", name=name, value=os.environ.get(name))
    return {}


def child_handlers() -> dict[str, Handler]:
    return {
        "environment": _environment,
        "sleep": _sleep,
        "fail": _fail,
        "fail_badly": _fail,
        "give_up": _give_up,
        "huge": _sleep,
        "crash": _crash,
        "hang": _hang,
        "eat": _eat,
        "garble": _garble,
        "spawn": _spawn,
        "half_write": _half_write,
        "oversize": _oversize,
        "unencodable": _unencodable,
        "linger": _linger,
    }
