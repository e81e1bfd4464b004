"""A Python script of a test's run in a process of its own, importing this checkout."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def start_script(source: str, *args: str, new_session: bool = False) -> subprocess.Popen[str]:
    """`python -c source args...` from the checkout's root, its stdin and stdout piped as text
    and its stderr dropped; in a session (and process group) of its own if `new_session`."""
    return subprocess.Popen(
        [sys.executable, "-c", source, *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=new_session,
    )
