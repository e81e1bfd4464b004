"""How the suite is spread over parallel workers (pytest-xdist's `worksteal`).

`worksteal` first splits the collected tests into one contiguous part per worker, then an idle
worker takes the second half of the longest queue left. Each part starts with its share of the
long tests (`LONG`, dealt in turn; the two soaks to the same worker, so that they do not slow
each other down), then the rest in `FIRST` order, so that a long test never starts last and runs
on alone after the rest ended, and the quick tests at the parts' ends are what moves.
"""

from __future__ import annotations

import os

import pytest

#: Tests of half a minute or more. The first group goes to the first worker, one test after the
#: other (the soaks: side by side they slow each other down); the second is dealt in turn.
LONG = (
    ("tests/processes/test_chaos.py",),
    (
        "tests/processes/test_realworld.py",
        "tests/processes/test_storybook_hosts.py",
        "tests/processes/test_startup.py",  # the first start's compile of the diff's loops
    ),
)
#: The rest: where the slower tests are, first; unit tests, quick, last.
FIRST = (
    "tests/processes/",
    "tests/browser/",
    "tests/serve/",
    "tests/stores/",
    "tests/database/",
)


def order(items: list[pytest.Item]) -> None:
    """Put `items` in the order that `worksteal`'s first split on this run's workers (read from
    `PYTEST_XDIST_WORKER_COUNT`, as xdist sets it in each worker) gives each part its long
    tests first. Every worker must order alike: the order depends on the test ids only."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    dealt: list[list[pytest.Item]] = [[] for _ in range(workers)]
    rest: list[pytest.Item] = []
    turn = 1  # the soaks went to the first
    for item in items:
        group = _long_group(item)
        if group is None:
            rest.append(item)
        elif group == 0:
            dealt[0].append(item)  # the soaks, one after the other on one worker
        else:
            dealt[turn % workers].append(item)
            turn += 1
    rest.sort(key=_rank)
    parts = []
    remaining = len(items)
    for index in range(workers):
        size = remaining // (workers - index)  # worksteal's split
        remaining -= size
        take = max(0, size - len(dealt[index]))
        parts += dealt[index] + rest[:take]
        del rest[:take]
    items[:] = parts + rest


def _long_group(item: pytest.Item) -> int | None:
    path = item.nodeid.split("::", 1)[0]
    return next((index for index, paths in enumerate(LONG) if path in paths), None)


def _rank(item: pytest.Item) -> int:
    path = item.nodeid.split("::", 1)[0]
    return next(
        (index for index, prefix in enumerate(FIRST) if path.startswith(prefix)), len(FIRST)
    )
