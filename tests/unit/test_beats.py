"""A child waiting on a server beats for its job, and stops when the wait is over."""

from __future__ import annotations

import itertools
import threading
import time

import pytest

from child.worker import beats
from child.worker.beats import beating


def test_a_blocked_call_is_beaten_for_every_second(monkeypatch: pytest.MonkeyPatch) -> None:
    """Beat after beat while the call blocks (waited for, not counted in a fixed sleep: a busy
    machine starves the beating thread now and then), and none once it returned."""
    monkeypatch.setattr(beats, "BEAT_SECONDS", 0.02)
    beaten: list[float] = []
    with beating(lambda: beaten.append(time.monotonic()), 60):
        deadline = time.monotonic() + 10
        while len(beaten) < 4 and time.monotonic() < deadline:
            time.sleep(0.01)
    after = len(beaten)
    assert after >= 4
    time.sleep(0.1)
    assert len(beaten) == after, "beats went on after the call returned"
    assert not any(thread.name == "beat" for thread in threading.enumerate())


def test_a_call_blocked_past_any_timeout_is_no_longer_beaten(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Past what the call's timeouts allow it is hung: the stall watchdog's to end."""
    monkeypatch.setattr(beats, "BEAT_SECONDS", 0.02)
    count = itertools.count()
    with beating(lambda: next(count), 0.05):
        time.sleep(0.2)
    assert next(count) <= 3
