"""Paths a job names, resolved under the artifacts root and nowhere else.

Image paths arrive in job data that came from an upload; a path that leaves the artifacts
folder (`..`, an absolute path, a symbolic link that points out) would let one build read, or
have a diff written over, a file that is not its own. Each is refused with an error that names
the path, and only the snapshot that named it fails.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath, PureWindowsPath


class UnsafePath(ValueError):
    """A job path that would leave the artifacts root (the message says how)."""


def resolve_under(root: Path, relative: str) -> Path:
    """`relative` as a real path inside `root`, links followed; `UnsafePath` if it leaves it."""
    if not relative:
        raise UnsafePath("empty path")
    if PurePosixPath(relative).is_absolute() or PureWindowsPath(relative).is_absolute():
        raise UnsafePath(f"{relative}: absolute paths are refused")
    if ".." in PurePosixPath(relative.replace("\\", "/")).parts:
        raise UnsafePath(f"{relative}: '..' is refused")
    real_root = root.resolve()
    target = (real_root / relative).resolve()
    if not target.is_relative_to(real_root):
        raise UnsafePath(f"{relative}: links outside the artifacts folder")
    return target
