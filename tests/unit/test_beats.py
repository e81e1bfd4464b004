"""A child waiting on a server beats for its job, and stops when the wait is over."""

from __future__ import annotations

import itertools
import threading
import time

import pytest

from child.worker import beats
from child.worker.beats import beating


def test_a_blocked_call_is_beaten_for_every_second(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(beats, "BEAT_SECONDS", 0.02)
    count = itertools.count()
    with beating(lambda: next(count), 60):
        time.sleep(0.15)
    after = next(count)
    assert after >= 4
    time.sleep(0.1)
    assert next(count) == after + 1, "beats went on after the call returned"
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
