"""`supervisor.host.memory`: a child's memory is its whole tree's PSS, its descendants read at
most every few seconds (a browser's processes are costly to read), on real processes."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from supervisor.host.memory import DESCENDANTS_SECONDS, TreeMemory

MIB = 2**20
#: A grandchild that holds 64 MiB, then 192 MiB once it reads a line.
GROW = (
    "import sys; held = bytearray(64 << 20); print('ready', flush=True); sys.stdin.readline();"
    " more = bytearray(128 << 20); print('grown', flush=True); sys.stdin.readline()"
)
#: A child that starts the grandchild and passes its stdin and stdout through.
PARENT = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {GROW!r}])"


@pytest.fixture
def tree() -> Iterator[subprocess.Popen[str]]:
    child = subprocess.Popen(
        [sys.executable, "-c", PARENT], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None and child.stdout.readline() == "ready\n"
    yield child
    child.kill()
    child.wait()


def grow(child: subprocess.Popen[str]) -> None:
    assert child.stdin is not None and child.stdout is not None
    child.stdin.write("\n")
    child.stdin.flush()
    assert child.stdout.readline() == "grown\n"


def test_the_tree_counts_what_descendants_hold(tree: subprocess.Popen[str]) -> None:
    held = TreeMemory().measure([tree.pid], now=0.0)[tree.pid]
    assert 64 * MIB < held < 64 * MIB + 100 * MIB


def test_a_descendant_is_read_again_only_after_its_reading_aged(
    tree: subprocess.Popen[str],
) -> None:
    memory = TreeMemory()
    before = memory.measure([tree.pid], now=100.0)[tree.pid]
    grow(tree)
    soon = memory.measure([tree.pid], now=100.0 + DESCENDANTS_SECONDS / 2)[tree.pid]
    later = memory.measure([tree.pid], now=100.0 + DESCENDANTS_SECONDS)[tree.pid]
    assert abs(soon - before) < 16 * MIB  # the grandchild's reading stood
    assert later - before > 120 * MIB


def test_a_process_that_is_gone_holds_nothing() -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    time.sleep(0.05)
    assert TreeMemory().measure([gone.pid], now=0.0) == {gone.pid: 0}
