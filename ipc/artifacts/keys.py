"""The keys of the artifact store: fixed prefixes, content-addressed where the content allows.

Every host and child names a file the same way whatever the store, so a key written by one host
is read by another on a different machine: `images/ab/<sha256>.png` for uploaded and captured
screenshots, `storybooks/<sha256>/<name>` for a Storybook's files (`ipc.storybook`),
`diffs/<build>/...` and `reports/...`. Keys come from job data, which came from an upload or
from another host: one that is empty, absolute or climbs with `..` is refused by every store,
so a bucket behaves like the folder (where such a key would leave the root).
"""

from __future__ import annotations

import hashlib
import ntpath
import re

IMAGES_PREFIX = "images"
DIFFS_PREFIX = "diffs"
REPORTS_PREFIX = "reports"

SHA256 = re.compile(r"[0-9a-f]{64}")


class UnsafeKey(ValueError):
    """A key that would leave the artifacts root (the message says how)."""


def image_key(sha256: str) -> str:
    """Where a screenshot of digest `sha256` is stored: once, whatever the builds that hold it."""
    return f"{IMAGES_PREFIX}/{sha256[:2]}/{sha256}.png"


def diff_key(build_id: int, name: str) -> str:
    """Where the diff of snapshot `name` of build `build_id` is stored: named by the name's
    digest, since a name may hold characters no file system or URL takes as they are."""
    return f"{DIFFS_PREFIX}/{build_id}/{hashlib.sha256(name.encode()).hexdigest()}.png"


def check_key(key: str) -> str:
    """`key` itself when it stays inside the artifacts root; `UnsafeKey` saying why not."""
    if not key:
        raise UnsafeKey("empty path")
    if key.startswith("/") or ntpath.isabs(key):
        raise UnsafeKey(f"{key}: absolute paths are refused")
    if ".." in key.replace("\\", "/").split("/"):
        raise UnsafeKey(f"{key}: '..' is refused")
    return key
