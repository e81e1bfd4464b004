"""Every artifact store keeps the same promises: a folder, and a real S3-compatible bucket.

Each test runs on both (`store` fixture); what only a bucket can do wrong (not answer, refuse
credentials, lack the bucket) is tested on a real server too, never a mock.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from ipc.artifacts.keys import UnsafeKey
from ipc.artifacts.s3 import ENDPOINT_VARIABLE, S3Store
from ipc.artifacts.store import ArtifactMissing, ArtifactStore, StoreRefused, StoreUnavailable
from supervisor.builds.files import REFRESH_AFTER_SECONDS, store_missing
from tests.postgres_server import free_port


def test_a_stored_file_reads_back_whole(store: ArtifactStore, tmp_path: Path) -> None:
    source = tmp_path / "source.png"
    source.write_bytes(b"\x89PNG" + bytes(range(256)) * 100)
    store.put_file("images/ab/one.png", source)
    store.put_bytes("reports/build-1.html", b"<html>")
    assert store.exists("images/ab/one.png") and store.exists("reports/build-1.html")
    assert store.read_bytes("images/ab/one.png") == source.read_bytes()
    target = tmp_path / "copy.png"
    store.download("images/ab/one.png", target)
    assert target.read_bytes() == source.read_bytes()
    store.put_bytes("reports/build-1.html", b"<html>again")
    assert store.read_bytes("reports/build-1.html") == b"<html>again"


def test_written_gives_when_each_stored_key_of_many_was_written(
    store: ArtifactStore, tmp_path: Path
) -> None:
    files = []
    for number in range(40):
        path = tmp_path / f"{number}.png"
        path.write_bytes(f"image {number}".encode())
        files.append((f"images/{number:02d}/{number}.png", path))
    before = time.time() - 60
    store.put_files(files[:30])
    asked = [key for key, _path in files]
    written = store.written(asked)
    assert set(written) == set(asked[:30])
    assert all(before < at < time.time() + 60 for at in written.values())
    assert store.read_bytes(files[7][0]) == b"image 7"


def test_refresh_marks_keys_written_now_and_names_those_gone(store: ArtifactStore) -> None:
    store.put_bytes("images/aa/1.png", b"1")
    first = store.written(["images/aa/1.png"])["images/aa/1.png"]
    time.sleep(1.1)  # a bucket's times are whole seconds
    assert store.refresh(["images/aa/1.png", "images/bb/gone.png"]) == {"images/bb/gone.png"}
    assert store.written(["images/aa/1.png"])["images/aa/1.png"] > first
    assert store.read_bytes("images/aa/1.png") == b"1"


def test_an_upload_sends_only_what_is_missing_and_refreshes_what_it_reuses_from_long_ago(
    store: ArtifactStore, tmp_path: Path
) -> None:
    (tmp_path / "a.png").write_bytes(b"a")
    (tmp_path / "b.png").write_bytes(b"b")
    files = {"images/aa/a.png": tmp_path / "a.png", "images/bb/b.png": tmp_path / "b.png"}
    assert store_missing(store, files) == 2
    first = store.written(files)
    time.sleep(1.1)
    assert store_missing(store, files) == 0
    assert store.written(files) == first  # reused, written just now: left as it is
    hours_later = time.time() + REFRESH_AFTER_SECONDS + 60
    assert store_missing(store, files, clock=lambda: hours_later) == 0
    assert all(at > first[key] for key, at in store.written(files).items())


def test_a_writer_stores_only_a_block_that_ended_well(store: ArtifactStore) -> None:
    with store.writer("reports/build-2.html") as out:
        out.write(b"<html>")
        assert not store.exists("reports/build-2.html"), "visible before it was whole"
    assert store.read_bytes("reports/build-2.html") == b"<html>"
    with pytest.raises(RuntimeError), store.writer("reports/build-3.html") as out:
        out.write(b"<ht")
        raise RuntimeError("rendering broke")
    assert not store.exists("reports/build-3.html")


def test_copies_within_the_store_are_whole_and_name_the_sources_not_stored(
    store: ArtifactStore,
) -> None:
    store.put_bytes("images/ab/one.png", b"\x89PNG one")
    store.put_bytes("diffs/1/d.png", b"\x89PNG diff")
    missing = store.copy_files(
        [
            ("images/ab/one.png", "reports/web/1/images/ab/one.png"),
            ("diffs/1/d.png", "reports/web/1/diffs/1/d.png"),
            ("images/cd/gone.png", "reports/web/1/images/cd/gone.png"),
        ]
    )
    assert missing == {"images/cd/gone.png"}
    assert store.read_bytes("reports/web/1/images/ab/one.png") == b"\x89PNG one"
    assert store.read_bytes("reports/web/1/diffs/1/d.png") == b"\x89PNG diff"
    assert not store.exists("reports/web/1/images/cd/gone.png")
    # A copy is a file of its own: the source may go (prune) and the report keeps its picture.
    store.delete(["images/ab/one.png"])
    assert store.read_bytes("reports/web/1/images/ab/one.png") == b"\x89PNG one"
    assert store.copy_files([]) == set()


def test_a_bucket_serves_pages_and_images_as_what_they_are(s3_store: S3Store) -> None:
    """A report in a bucket opens in a browser: each object has its content type."""
    s3_store.put_bytes("reports/web/1/index.html", b"<html>")
    s3_store.put_bytes("images/ab/one.png", b"\x89PNG")
    s3_store.put_bytes("reports/web/latest/main.html", b"<html>")
    s3_store.copy_files([("images/ab/one.png", "reports/web/1/images/ab/one.png")])
    client = s3_store._client()
    kinds = {
        key: client.head_object(Bucket=s3_store.bucket, Key=s3_store._key(key))["ContentType"]
        for key in (
            "reports/web/1/index.html",
            "reports/web/latest/main.html",
            "reports/web/1/images/ab/one.png",
        )
    }
    assert kinds == {
        "reports/web/1/index.html": "text/html",
        "reports/web/latest/main.html": "text/html",
        "reports/web/1/images/ab/one.png": "image/png",
    }


def test_listing_gives_every_key_under_a_prefix_with_size_and_time(store: ArtifactStore) -> None:
    before = time.time() - 60
    store.put_bytes("images/aa/1.png", b"1")
    store.put_bytes("images/bb/2.png", b"22")
    store.put_bytes("diffs/1/3.png", b"333")
    listed = {item.key: item for item in store.listing("images/")}
    assert set(listed) == {"images/aa/1.png", "images/bb/2.png"}
    assert listed["images/bb/2.png"].size == 2
    assert all(before < item.modified < time.time() + 60 for item in listed.values())


def test_delete_removes_keys_and_passes_over_those_gone(store: ArtifactStore) -> None:
    store.put_bytes("diffs/1/a.png", b"a")
    store.put_bytes("diffs/1/b.png", b"b")
    store.delete(["diffs/1/a.png", "diffs/1/never.png"])
    assert set(store.written(["diffs/1/a.png", "diffs/1/b.png"])) == {"diffs/1/b.png"}


def test_a_key_not_stored_is_missing(store: ArtifactStore, tmp_path: Path) -> None:
    assert not store.exists("images/00/none.png")
    with pytest.raises((ArtifactMissing, FileNotFoundError)):
        store.read_bytes("images/00/none.png")
    with pytest.raises((ArtifactMissing, FileNotFoundError)):
        store.download("images/00/none.png", tmp_path / "none.png")


@pytest.mark.parametrize(
    ("key", "reason"),
    [("", "empty path"), ("/etc/passwd", "absolute"), ("images/../../x.png", "'..'")],
)
def test_keys_that_leave_the_root_are_refused(store: ArtifactStore, key: str, reason: str) -> None:
    with pytest.raises(UnsafeKey, match=reason):
        store.put_bytes(key, b"x")
    with pytest.raises(UnsafeKey, match=reason):
        store.exists(key)


def test_check_passes_on_a_usable_store(store: ArtifactStore) -> None:
    store.check()


def test_a_store_that_does_not_answer_is_unavailable(
    monkeypatch: pytest.MonkeyPatch, s3_environment: None
) -> None:
    monkeypatch.setenv(ENDPOINT_VARIABLE, f"http://127.0.0.1:{free_port()}")
    store = S3Store("anything")
    with pytest.raises(StoreUnavailable, match="did not answer"):
        store.exists("images/00/a.png")
    with pytest.raises(StoreUnavailable):
        store.check()


def test_credentials_the_store_does_not_take_are_refused(
    monkeypatch: pytest.MonkeyPatch, s3_store: S3Store
) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    store = S3Store(s3_store.bucket, s3_store.prefix)
    with pytest.raises(StoreRefused, match="refused"):
        store.put_bytes("images/00/a.png", b"a")


def test_a_bucket_that_does_not_exist_is_refused(s3_store: S3Store) -> None:
    with pytest.raises(StoreRefused):
        S3Store("no-such-bucket-here").check()
