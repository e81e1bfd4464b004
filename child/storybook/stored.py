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
from typing import Any, BinaryIO

from child.artifacts.access import JobArtifacts
from child.cache.content import HashMismatch
from ipc.artifacts.keys import UnsafeKey
from ipc.artifacts.store import ArtifactMissing
from ipc.storybook import MANIFEST_VERSION, StorybookRef, file_key

SHA256 = re.compile(r"[0-9a-f]{64}")


class StorybookProblem(ValueError):
    """The stored build cannot be used as it is (the message, one line, says why)."""


@dataclass(frozen=True)
class StoredBuild:
    """A build's files: each path of the build (posix, no leading slash) and its digest."""

    artifacts: JobArtifacts
    files: Mapping[str, str]

    def path_of(self, relative: str) -> Path | None:
        """A local file holding the build's file `relative`; None when it is not in the build.

        Raises `StorybookProblem` when the build lists it but the store has it not, or not
        with its digest; `StoreUnavailable` when the store does not answer."""
        digest = self.files.get(relative)
        if digest is None:
            return None
        try:
            return self.artifacts.read(file_key(relative, digest), digest)
        except (FileNotFoundError, ArtifactMissing, HashMismatch):
            raise StorybookProblem(
                f"{relative} of the build is missing from the artifacts"
            ) from None

    def open(self, relative: str) -> BinaryIO:
        """The build's file `relative`, open to read; `StorybookProblem` when it is not in the
        build or not stored.

        A file read through the host's cache can vanish before it is opened (the cache's
        folder deleted under the job): it is read once more before it counts as missing."""
        try:
            return self._stored(relative).open("rb")
        except FileNotFoundError:
            pass
        try:
            return self._stored(relative).open("rb")
        except FileNotFoundError:
            raise StorybookProblem(
                f"{relative} of the build is missing from the artifacts"
            ) from None

    def _stored(self, relative: str) -> Path:
        path = self.path_of(relative)
        if path is None:
            raise StorybookProblem(f"{relative} is not in the build")
        return path

    def read(self, relative: str) -> bytes | None:
        """The bytes of the build's file `relative`; None when it is not in the build."""
        if relative not in self.files:
            return None
        with self.open(relative) as file:
            return file.read()


def load(artifacts: JobArtifacts, ref: StorybookRef) -> StoredBuild:
    """The build whose manifest `ref` names, checked against its digest and format version."""
    try:
        data = artifacts.read(ref["manifest"], ref["sha256"]).read_bytes()
    except UnsafeKey as error:
        raise StorybookProblem(f"Storybook manifest {error}") from None
    except (FileNotFoundError, ArtifactMissing):
        raise StorybookProblem(f"Storybook manifest {ref['manifest']} is not stored") from None
    except HashMismatch as error:
        raise StorybookProblem(f"Storybook manifest {error}") from None
    digest = hashlib.sha256(data).hexdigest()
    if digest != ref["sha256"]:
        raise StorybookProblem(
            f"Storybook manifest {ref['manifest']} has SHA-256 {digest}, not {ref['sha256']}"
        )
    try:
        document = json.loads(data)
    except RecursionError:  # nested past Python's recursion limit: not a manifest of ours
        raise StorybookProblem(
            f"Storybook manifest {ref['manifest']} is nested too deep to be a manifest"
        ) from None
    except ValueError as error:
        raise StorybookProblem(
            f"Storybook manifest {ref['manifest']} is not JSON: {error}"
        ) from None
    return StoredBuild(artifacts, _files(document, ref["manifest"]))


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
