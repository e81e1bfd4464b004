"""Paths a job names, resolved under the artifacts root and nowhere else.

Image paths arrive in job data that came from an upload; a path that leaves the artifacts
folder (`..`, an absolute path, a symbolic link that points out) would let one build read, or
have a diff written over, a file that is not its own. Each is refused with an error that names
the path, and only the snapshot that named it fails.

A shard names thousands of paths under one root, so the root's own real path is found once
(`ArtifactsRoot`) and each path is checked as a string: with `pathlib` and the root resolved
again for every path, the checks alone cost more than settling a byte-identical snapshot.
"""

from __future__ import annotations

import os
from pathlib import Path

from ipc.artifacts.keys import UnsafeKey, check_key


class ArtifactsRoot:
    """The artifacts root of one job, its links resolved once for all the paths the job names."""

    def __init__(self, root: Path) -> None:
        #: The root as the job gave it (the diff writes its temporary files under it).
        self.path = root
        self._real = os.path.realpath(root)
        self._inside = self._real.rstrip(os.sep) + os.sep

    def resolve(self, relative: str) -> Path:
        """`relative` as a real path inside the root, links followed; `UnsafeKey` if it
        leaves it."""
        target = os.path.realpath(os.path.join(self._real, check_key(relative)))
        if target != self._real and not target.startswith(self._inside):
            raise UnsafeKey(f"{relative}: links outside the artifacts folder")
        return Path(target)
