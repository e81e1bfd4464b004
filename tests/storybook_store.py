"""Store a Storybook build under an artifacts folder, as the parent does, for the browser tests.

The layout is `ipc.storybook`'s: every file at `storybooks/<sha256>/<file name>`, and the
manifest at `storybooks/<sha256 of the manifest>/manifest.json`. A minimal stand-in for the
parent's own storing, kept to what the tests need.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from ipc.storybook import StorybookRef, file_key, manifest_document, manifest_key


def store_storybook(artifacts: Path, folder: Path) -> StorybookRef:
    """Store every file of `folder` and its manifest; the reference a job carries."""
    files = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        data = path.read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        relative = path.relative_to(folder).as_posix()
        target = artifacts / file_key(relative, digest)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        files[relative] = digest
    manifest = json.dumps(manifest_document(files), sort_keys=True, separators=(",", ":")).encode()
    digest = hashlib.sha256(manifest).hexdigest()
    target = artifacts / manifest_key(digest)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(manifest)
    return {"manifest": manifest_key(digest), "sha256": digest}
