"""The host's content cache (`child.cache.content`): verified fills, atomic renames, a bound
kept by evicting the least recently used, and all of it shared by forked processes."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import multiprocessing
import os
import random
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from child.cache.content import FILL_TRIES, ContentCache, HashMismatch
from ipc import scratch


class FakeClock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def writer(data: bytes, calls: list[Path] | None = None) -> Callable[[Path], None]:
    """A fill that writes `data` (and notes the paths it was given)."""

    def fill(path: Path) -> None:
        if calls is not None:
            calls.append(path)
        path.write_bytes(data)

    return fill


def cached_files(folder: Path) -> Iterator[Path]:
    return (path for path in folder.glob("??/*") if path.is_file())


def scratch_files(folder: Path) -> list[Path]:
    where = scratch.folder(folder)
    return list(where.iterdir()) if where.exists() else []


def test_a_miss_is_filled_once_then_read_from_disk(tmp_path: Path) -> None:
    cache = ContentCache(tmp_path, 1 << 20, clock=FakeClock())
    data = b"baseline png"
    calls: list[Path] = []
    first = cache.get(digest(data), writer(data, calls), name="baselines/a.png")
    second = cache.get(digest(data), writer(data, calls), name="baselines/a.png")
    assert first == second == tmp_path / digest(data)[:2] / digest(data)
    assert first.read_bytes() == data
    assert len(calls) == 1
    assert calls[0].parent == scratch.folder(tmp_path)
    assert scratch.owner(calls[0]) == os.getpid()
    assert scratch_files(tmp_path) == []


def test_a_fill_whose_bytes_do_not_match_the_digest_is_refused_and_leaves_nothing(
    tmp_path: Path,
) -> None:
    cache = ContentCache(tmp_path, 1 << 20)
    expected = digest(b"what was asked")
    with pytest.raises(HashMismatch) as raised:
        cache.get(expected, writer(b"something else"), name="baselines/a.png")
    assert str(raised.value) == (
        f"baselines/a.png: its content has SHA-256 {digest(b'something else')}, not {expected}"
    )
    assert list(cached_files(tmp_path)) == []
    assert scratch_files(tmp_path) == []


def test_a_fill_that_raises_propagates_and_leaves_nothing(tmp_path: Path) -> None:
    cache = ContentCache(tmp_path, 1 << 20)

    def half_then_fail(path: Path) -> None:
        path.write_bytes(b"half of it")
        raise ConnectionResetError("the store hung up")

    with pytest.raises(ConnectionResetError, match="hung up"):
        cache.get(digest(b"whole"), half_then_fail, name="a.png")
    assert list(cached_files(tmp_path)) == []
    assert scratch_files(tmp_path) == []
    # The next get fills it.
    assert cache.get(digest(b"whole"), writer(b"whole"), name="a.png").read_bytes() == b"whole"


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_fill_whose_cache_folder_is_deleted_under_it_is_filled_again(
    tmp_path: Path, when: str
) -> None:
    """An operator freeing disk deletes the cache's folder while a child fills an entry: before
    the download writes, or after (its scratch file gone before the hash or the rename)."""
    folder = tmp_path / "cache"
    cache = ContentCache(folder, 1 << 20)
    calls: list[Path] = []

    def fill(path: Path) -> None:
        calls.append(path)
        if when == "after":
            path.write_bytes(b"whole")
        if len(calls) == 1:
            shutil.rmtree(folder)
        if when == "before":
            path.write_bytes(b"whole")

    path = cache.get(digest(b"whole"), fill, name="a.png")
    assert path.read_bytes() == b"whole"
    assert len(calls) == 2
    assert scratch_files(folder) == []


def test_a_cache_folder_deleted_at_every_fill_gives_up_after_its_tries(tmp_path: Path) -> None:
    folder = tmp_path / "cache"
    cache = ContentCache(folder, 1 << 20)
    calls: list[Path] = []

    def fill(path: Path) -> None:
        calls.append(path)
        path.write_bytes(b"whole")
        shutil.rmtree(folder)

    with pytest.raises(FileNotFoundError):
        cache.get(digest(b"whole"), fill, name="a.png")
    assert len(calls) == FILL_TRIES


@pytest.mark.parametrize(
    "bad", ["", "ab", "A" * 64, "g" * 64, "a" * 63, "a" * 65, "../" + "a" * 61]
)
def test_a_name_that_is_not_a_sha256_digest_is_refused(tmp_path: Path, bad: str) -> None:
    cache = ContentCache(tmp_path, 1 << 20)
    with pytest.raises(ValueError, match="SHA-256"):
        cache.get(bad, writer(b"x"), name="x")
    source = tmp_path / "source"
    source.write_bytes(b"x")
    with pytest.raises(ValueError, match="SHA-256"):
        cache.add(bad, source)
    assert source.exists()


def test_a_bound_below_one_byte_names_the_option(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="--cache-mib"):
        ContentCache(tmp_path, 0)


def test_a_hit_marks_the_entry_used_at_most_once_a_minute(tmp_path: Path) -> None:
    clock = FakeClock(1_000.0)
    cache = ContentCache(tmp_path, 1 << 20, clock=clock)
    sha = digest(b"x")
    path = cache.get(sha, writer(b"x"), name="x")
    assert os.stat(path).st_mtime == 1_000.0
    clock.now = 1_059.0
    cache.get(sha, writer(b"x"), name="x")
    assert os.stat(path).st_mtime == 1_000.0
    clock.now = 1_061.0
    cache.get(sha, writer(b"x"), name="x")
    assert os.stat(path).st_mtime == 1_061.0


def test_eviction_keeps_the_most_recently_used_and_brings_the_total_under_the_bound(
    tmp_path: Path,
) -> None:
    clock = FakeClock(1_000.0)
    cache = ContentCache(tmp_path, 10_000, clock=clock)
    blobs = [bytes([index]) * 1_000 for index in range(11)]
    for blob in blobs[:9]:
        clock.now += 100
        cache.get(digest(blob), writer(blob), name="x")
    clock.now += 100
    cache.get(digest(blobs[0]), writer(b"not called"), name="x")  # the oldest, used again
    for blob in blobs[9:]:
        clock.now += 100
        cache.get(digest(blob), writer(blob), name="x")
        assert cache.size_bytes() <= 10_000
    left = {path.name for path in cached_files(tmp_path)}
    # The eleventh entry passed the bound: down to 9,000 bytes, the least recently used first.
    assert cache.size_bytes() == 9_000
    assert left == {digest(blob) for blob in [blobs[0], *blobs[3:]]}


def test_the_entry_just_returned_survives_eviction(tmp_path: Path) -> None:
    clock = FakeClock(1_000.0)
    cache = ContentCache(tmp_path, 3_000, clock=clock)
    for blob in (b"a" * 1_000, b"b" * 1_000):
        clock.now += 100
        cache.get(digest(blob), writer(blob), name="x")
    # Larger than the whole bound, and (its clock set back) the least recently used of all.
    big = b"c" * 4_000
    clock.now = 0.0
    path = cache.get(digest(big), writer(big), name="big")
    assert path.read_bytes() == big
    assert [p.name for p in cached_files(tmp_path)] == [digest(big)]


def test_the_scan_is_amortised_over_many_fills(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scans: list[str] = []
    real_scandir = os.scandir

    def counting_scandir(path: str) -> object:
        if os.path.dirname(path) == str(tmp_path) and os.path.basename(path) == "00":
            scans.append(path)
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", counting_scandir)
    cache = ContentCache(tmp_path, 1_000_000, clock=FakeClock())
    for index in range(50):
        blob = index.to_bytes(4, "big") * 250  # 1,000 bytes
        cache.get(digest(blob), writer(blob), name="x")
    # The first fill scans (the cache's total is not known yet); the next scan comes once this
    # process has added a tenth of the bound, 100,000 bytes: not within 50,000.
    assert len(scans) == 1


def test_add_renames_the_file_into_place(tmp_path: Path) -> None:
    cache = ContentCache(tmp_path / "cache", 1 << 20)
    source = tmp_path / "screenshot.png"
    source.write_bytes(b"rendered")
    inode = os.stat(source).st_ino
    path = cache.add(digest(b"rendered"), source)
    assert path == tmp_path / "cache" / digest(b"rendered")[:2] / digest(b"rendered")
    assert not source.exists()
    assert os.stat(path).st_ino == inode
    assert path.read_bytes() == b"rendered"
    calls: list[Path] = []
    assert cache.get(digest(b"rendered"), writer(b"rendered", calls), name="x") == path
    assert calls == []


def test_add_across_filesystems_copies_through_scratch_and_removes_the_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "screenshot.png"
    real_replace = os.replace

    def no_cross_device(src: str | Path, dst: str | Path) -> None:
        if Path(src) == source:
            raise OSError(errno.EXDEV, "Invalid cross-device link")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", no_cross_device)
    cache = ContentCache(tmp_path / "cache", 1 << 20)
    source.write_bytes(b"rendered")
    path = cache.add(digest(b"rendered"), source)
    assert path.read_bytes() == b"rendered"
    assert not source.exists()
    assert scratch_files(tmp_path / "cache") == []


def _contents() -> dict[str, bytes]:
    """Sixteen entries of 1 to 16 KiB, the same in every process."""
    blobs = [random.Random(index).randbytes(1_024 * (index + 1)) for index in range(16)]
    return {digest(blob): blob for blob in blobs}


def _busy_child(folder: Path, seed: int) -> None:
    """Read, fill and add entries of a small cache at random, checking every read."""
    cache = ContentCache(folder, 48 * 1_024)
    contents = _contents()
    shas = sorted(contents)
    chooser = random.Random(seed)

    def slow_writer(data: bytes) -> Callable[[Path], None]:
        def fill(path: Path) -> None:
            with open(path, "wb") as file:
                for start in range(0, len(data), 1_024):
                    file.write(data[start : start + 1_024])
                    file.flush()
                    os.sched_yield()

        return fill

    for step in range(300):
        if step % 10 == 0:
            # One of this process's own renders, added.
            blob = f"{seed}-{step}".encode() * 100
            source = folder / f"render-{os.getpid()}-{step}"
            source.write_bytes(blob)
            added = cache.add(digest(blob), source)
            # On a bound this small, another process may evict it at once (the race the
            # module's docstring names): then it is gone whole, never seen in part.
            with contextlib.suppress(FileNotFoundError):
                assert added.read_bytes() == blob
            continue
        if step % 37 == 0:
            with pytest.raises(HashMismatch):
                cache.get(digest(b"never cached"), slow_writer(b"corrupt"), name="corrupt")
            continue
        sha = chooser.choice(shas)
        for _ in range(100):
            path = cache.get(sha, slow_writer(contents[sha]), name=sha)
            try:
                data = path.read_bytes()
            except FileNotFoundError:
                continue  # evicted by another process before the read: get it again
            break
        else:
            raise AssertionError(f"{sha} was evicted before every read")
        assert data == contents[sha]


def test_forked_processes_filling_and_evicting_at_once_leave_only_whole_verified_files(
    tmp_path: Path,
) -> None:
    context = multiprocessing.get_context("fork")
    children = [context.Process(target=_busy_child, args=(tmp_path, seed)) for seed in range(4)]
    for child in children:
        child.start()
    for child in children:
        child.join(timeout=120)
    assert [child.exitcode for child in children] == [0, 0, 0, 0]
    files = list(cached_files(tmp_path))
    assert files
    for path in files:
        assert digest(path.read_bytes()) == path.name
        assert path.parent.name == path.name[:2]
    assert scratch_files(tmp_path) == []
    assert [p.name for p in tmp_path.iterdir() if p.is_file()] == []  # every render moved in
    # Each process may add up to a tenth of the bound, plus one entry, before it looks again.
    assert ContentCache(tmp_path, 1).size_bytes() <= 48 * 1_024 * (1 + 4 * 0.1) + 4 * 16 * 1_024
