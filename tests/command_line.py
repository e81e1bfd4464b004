"""The command line called in the test's own process (`tests.capture_helpers.run_cli`) with a
row's environment and working folder, its output captured, as `python -m supervisor` prints it.

For tests that call it many times over (every bad input, every refused upload): a subprocess
costs each call about a second of CPU to start Python and import the command. A traceback here
fails the test as surely as it would show on a terminal. What only a process shows (its
capabilities, signals, exit at a closed pipe, the console script) stays a subprocess.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

import pytest

from tests.capture_helpers import run_cli


def call(
    args: list[str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """`main(args)` with `env` set (and no other `STORYSHELF_*`) in `cwd`: its exit status (an
    option refused by argparse exits 2), stdout and stderr."""
    for name in os.environ:
        if name.startswith("STORYSHELF_"):
            monkeypatch.delenv(name)
    for name, value in (env or {}).items():
        monkeypatch.setenv(name, value)
    if cwd is not None:
        monkeypatch.chdir(cwd)
    capsys.readouterr()
    try:
        code = run_cli(args)
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    captured = capsys.readouterr()
    return subprocess.CompletedProcess(args, code, captured.out, captured.err)
