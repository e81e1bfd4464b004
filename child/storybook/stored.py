"""A stored Storybook build as a child reads it: its manifest, checked, and its files.

The job names the manifest and its SHA-256 (`ipc.storybook.StorybookRef`). The child reads the
manifest, refuses it when its bytes do not have that digest (a damaged or replaced file) or when
it is of another format version, and from then on knows every path of the build and where its
file is stored (`ipc.storybook.file_key`). Nothing outside the manifest belongs to the build.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from child.capture.paths import UnsafePath, resolve_under
from ipc.storybook import MANIFEST_VERSION, StorybookRef, file_key

SHA256 = re.compile(r"[0-9a-f]{64}")


class StorybookProblem(ValueError):
    """The stored build cannot be used as it is (the message, one line, says why)."""


@dataclass(frozen=True)
class StoredBuild:
    """A build's files: each path of the build (posix, no leading slash) and its digest."""

    artifacts: Path
    files: Mapping[str, str]

    def path_of(self, relative: str) -> Path | None:
        """Where the build's file `relative` is stored; None when it is not in the build."""
        digest = self.files.get(relative)
        if digest is None:
            return None
        return self.artifacts / file_key(relative, digest)

    def read(self, relative: str) -> bytes | None:
        """The bytes of the build's file `relative`; None when it is not in the build."""
        path = self.path_of(relative)
        if path is None:
            return None
        try:
            return path.read_bytes()
        except FileNotFoundError:
            raise StorybookProblem(
                f"{relative} of the build is missing from the artifacts"
            ) from None


def load(artifacts: Path, ref: StorybookRef) -> StoredBuild:
    """The build whose manifest `ref` names, checked against its digest and format version."""
    try:
        path = resolve_under(artifacts, ref["manifest"])
        data = path.read_bytes()
    except UnsafePath as error:
        raise StorybookProblem(f"Storybook manifest {error}") from None
    except FileNotFoundError:
        raise StorybookProblem(f"Storybook manifest {ref['manifest']} is not stored") from None
    digest = hashlib.sha256(data).hexdigest()
    if digest != ref["sha256"]:
        raise StorybookProblem(
            f"Storybook manifest {ref['manifest']} has SHA-256 {digest}, not {ref['sha256']}"
        )
    try:
        document = json.loads(data)
    except ValueError as error:
        raise StorybookProblem(
            f"Storybook manifest {ref['manifest']} is not JSON: {error}"
        ) from None
    return StoredBuild(artifacts.resolve(), _files(document, ref["manifest"]))


def _files(document: Any, name: str) -> dict[str, str]:
    if not isinstance(document, dict):
        raise StorybookProblem(f"Storybook manifest {name} is not an object")
    version = document.get("version")
    if version != MANIFEST_VERSION:
        raise StorybookProblem(
            f"Storybook manifest {name} is of version {version!r}; "
            f"this host reads version {MANIFEST_VERSION}"
        )
    files = document.get("files")
    if not isinstance(files, dict):
        raise StorybookProblem(f"Storybook manifest {name} lists no files")
    for relative, digest in files.items():
        if not (isinstance(digest, str) and SHA256.fullmatch(digest)):
            raise StorybookProblem(f"Storybook manifest {name}: {relative!r} has no SHA-256")
        if not relative or relative.startswith("/") or ".." in relative.split("/"):
            raise StorybookProblem(f"Storybook manifest {name}: {relative!r} is not a build path")
    return dict(files)
