"""A child reads a bucket's files through its host's cache, verified, and stores what it made.

`child.artifacts.access.CachedArtifacts` on a real bucket: a file is downloaded once and then
read from the cache, a download that is not what the job names is refused and left nowhere, and
a capture's snapshot fails alone, with one line, for an image missing from the store or not of
its digest; a store that does not answer is the job's to retry (it raises).
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from child.artifacts.access import CachedArtifacts, for_job
from child.cache.content import ContentCache, HashMismatch
from child.capture.judge import capture_one, diff_options
from ipc.artifacts.keys import image_key
from ipc.artifacts.s3 import ENDPOINT_VARIABLE, S3Store
from ipc.artifacts.store import ArtifactMissing, StoreUnavailable
from tests.capture_helpers import write_png
from tests.postgres_server import free_port

OPTIONS = diff_options(
    {"metric": "yiq", "threshold": 0.1, "flat_threshold": None, "count_aa": False,
     "budget_pixels": 0}
)  # fmt: skip


def stored_png(store: S3Store, tmp_path: Path, name: str, **marks: object) -> tuple[str, str]:
    """A PNG put in the store under its content key: (key, sha256)."""
    path = write_png(tmp_path / "drawn" / f"{name}.png", **marks)  # type: ignore[arg-type]
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    store.put_file(image_key(digest), path)
    return image_key(digest), digest


def cached(store: S3Store, tmp_path: Path, max_bytes: int = 2**30) -> CachedArtifacts:
    folder = tmp_path / "cache"
    return CachedArtifacts(store, ContentCache(folder, max_bytes), folder)


def test_a_file_is_downloaded_once_then_read_from_the_cache(
    s3_store: S3Store, tmp_path: Path
) -> None:
    key, digest = stored_png(s3_store, tmp_path, "a")
    artifacts = cached(s3_store, tmp_path)
    first = artifacts.read(key, digest)
    assert hashlib.sha256(first.read_bytes()).hexdigest() == digest
    s3_store.delete([key])  # gone from the bucket: only the cache can answer now
    assert artifacts.read(key, digest) == first


def test_a_download_that_is_not_of_its_digest_is_refused_and_kept_nowhere(
    s3_store: S3Store, tmp_path: Path
) -> None:
    key, digest = stored_png(s3_store, tmp_path, "a")
    s3_store.put_bytes(key, b"replaced behind our back")
    artifacts = cached(s3_store, tmp_path)
    with pytest.raises(HashMismatch, match=f"{key}: its content has SHA-256"):
        artifacts.read(key, digest)
    assert not any(path.is_file() for path in (tmp_path / "cache").rglob("*"))


def test_what_a_child_keeps_is_stored_and_cached(s3_store: S3Store, tmp_path: Path) -> None:
    artifacts = cached(s3_store, tmp_path)
    written = artifacts.new_scratch(".png")
    written.write_bytes(b"capture")
    digest = hashlib.sha256(b"capture").hexdigest()
    artifacts.keep(image_key(digest), written, digest)
    assert not written.exists()
    assert s3_store.read_bytes(image_key(digest)) == b"capture"
    s3_store.delete([image_key(digest)])
    assert artifacts.read(image_key(digest), digest).read_bytes() == b"capture"


def shot(key: str, digest: str, baseline: tuple[str, str] | None = None) -> dict[str, object]:
    return {
        "name": "button",
        "image": key,
        "sha256": digest,
        "baseline": None
        if baseline is None
        else {"id": 1, "image": baseline[0], "sha256": baseline[1]},
    }


def test_a_changed_snapshot_on_a_bucket_gets_its_diff_stored(
    s3_store: S3Store, tmp_path: Path
) -> None:
    base = stored_png(s3_store, tmp_path, "base", marks=((4, 4, 10, 10),))
    new = stored_png(s3_store, tmp_path, "new", marks=((6, 4, 10, 10),))
    result = capture_one(for_job(s3_store.location), "diffs/1", shot(*new, base), OPTIONS)
    assert result["status"] == "changed" and result["diff_pixels"] > 0
    assert s3_store.exists(result["diff_path"])


def test_an_image_missing_from_the_bucket_fails_only_its_snapshot(
    s3_store: S3Store, tmp_path: Path
) -> None:
    key, digest = image_key("ab" * 32), "ab" * 32
    result = capture_one(for_job(s3_store.location), "diffs/1", shot(key, digest), OPTIONS)
    assert result["status"] == "failed"
    assert result["error"] == f"{key}: not in the artifact store"


def test_a_damaged_image_on_a_bucket_fails_its_snapshot_naming_its_key(
    s3_store: S3Store, tmp_path: Path
) -> None:
    """The child decodes the cache's copy; the error names the file as stored, not that copy."""
    damaged = write_png(tmp_path / "drawn" / "a.png").read_bytes()[:-40]
    digest = hashlib.sha256(damaged).hexdigest()
    s3_store.put_bytes(image_key(digest), damaged)
    artifacts = cached(s3_store, tmp_path)
    result = capture_one(artifacts, "diffs/1", shot(image_key(digest), digest), OPTIONS)
    assert result["status"] == "failed"
    assert result["error"].startswith(f"{s3_store.location}/{image_key(digest)}: "), result["error"]
    assert str(tmp_path / "cache") not in result["error"]


def test_an_image_not_of_its_digest_fails_only_its_snapshot(
    s3_store: S3Store, tmp_path: Path
) -> None:
    key, digest = stored_png(s3_store, tmp_path, "a")
    s3_store.put_bytes(key, b"tampered")
    result = capture_one(for_job(s3_store.location), "diffs/1", shot(key, digest), OPTIONS)
    assert result["status"] == "failed"
    assert result["error"].startswith(f"{key}: its content has SHA-256 ")


class ClearedAfterEachRead(CachedArtifacts):
    """A host's cache whose folder an operator deletes right after each of the job's first
    `clears` reads returned: the file is gone before the job opens it."""

    def __init__(self, store: S3Store, folder: Path, clears: int) -> None:
        super().__init__(store, ContentCache(folder, 2**30), folder)
        self.clears = clears

    def read(self, key: str, sha256: str) -> Path:
        path = super().read(key, sha256)
        if self.clears:
            self.clears -= 1
            shutil.rmtree(self._folder)
        return path


@pytest.mark.parametrize("clears", [1, 2])
def test_a_cache_deleted_under_a_snapshot_is_read_again(
    s3_store: S3Store, tmp_path: Path, clears: int
) -> None:
    """Once when the new image vanished before it was decoded, twice when the baseline did too
    (each read again, and the diff stored from a cache folder made anew)."""
    base = stored_png(s3_store, tmp_path, "base", marks=((4, 4, 10, 10),))
    new = stored_png(s3_store, tmp_path, "new", marks=((6, 4, 10, 10),))
    artifacts = ClearedAfterEachRead(s3_store, tmp_path / "cache", clears)
    result = capture_one(artifacts, "diffs/1", shot(*new, base), OPTIONS)
    assert result["status"] == "changed", result["error"]
    assert s3_store.exists(result["diff_path"])
    assert artifacts.clears == 0


def test_a_bucket_that_does_not_answer_raises_for_the_job_to_be_retried(
    s3_store: S3Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key, digest = stored_png(s3_store, tmp_path, "a")
    monkeypatch.setenv(ENDPOINT_VARIABLE, f"http://127.0.0.1:{free_port()}")
    artifacts = cached(S3Store(s3_store.bucket, s3_store.prefix), tmp_path)
    with pytest.raises(StoreUnavailable):
        capture_one(artifacts, "diffs/1", shot(key, digest), OPTIONS)


def test_a_missing_key_is_artifact_missing_through_the_cache(
    s3_store: S3Store, tmp_path: Path
) -> None:
    with pytest.raises(ArtifactMissing):
        cached(s3_store, tmp_path).read(image_key("cd" * 32), "cd" * 32)
