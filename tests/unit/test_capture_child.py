"""The promises of `child.capture.shard` and `child.capture.paths`, run in-process on real PNGs."""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from child.capture import shard as capture
from child.capture.header import png_size
from child.capture.paths import ArtifactsRoot
from child.diff.compare import ImageError
from ipc.artifacts.keys import UnsafeKey
from supervisor.commands.demo_images import _chunk
from tests.capture_helpers import write_png

OPTIONS = {
    "metric": "oklab",
    "threshold": 0.05,
    "flat_threshold": 0.05,
    "count_aa": False,
    "budget_pixels": 0,
}
BUTTON = ((8, 8, 20, 10),)
MOVED_BUTTON = ((12, 8, 20, 10),)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def shot(root: Path, name: str, image: Path | str, baseline: Path | str | None = None) -> Any:
    relative = str(image.relative_to(root)) if isinstance(image, Path) else image
    real = image if isinstance(image, Path) else root / image
    entry: dict[str, Any] = {
        "name": name,
        "image": relative,
        "sha256": sha256(real) if real.is_file() else "0" * 64,
        "baseline": None,
    }
    if baseline is not None:
        base_relative = str(baseline.relative_to(root)) if isinstance(baseline, Path) else baseline
        base_real = baseline if isinstance(baseline, Path) else root / baseline
        digest = sha256(base_real) if base_real.is_file() else "f" * 64
        entry["baseline"] = {"id": 7, "image": base_relative, "sha256": digest}
    return entry


def run(
    root: Path, shots: list[Any], clock: Callable[[], float] | None = None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The shard's results and its progress reports; by default a second passes per look at
    the clock, so that every snapshot is reported."""
    progress: list[dict[str, Any]] = []
    payload = {
        "artifacts": str(root),
        "build_id": 3,
        "shard_id": 5,
        "diff_dir": "diffs/3",
        "options": OPTIONS,
        "snapshots": shots,
    }
    result = capture.run(payload, progress.append, clock or itertools.count().__next__)
    return result["snapshots"], progress


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "artifacts"
    folder.mkdir()
    return folder


def test_without_baseline_a_snapshot_is_new_with_its_size(root: Path) -> None:
    image = write_png(root / "images/a.png", size=(40, 30), marks=BUTTON)
    (result,), _ = run(root, [shot(root, "button", image)])
    assert result == {
        "name": "button",
        "status": "new",
        "width": 40,
        "height": 30,
        "diff_pixels": None,
        "diff_ratio": None,
        "diff_path": None,
        "diff_box": None,
        "metric": "oklab",
        "threshold": 0.05,
        "flat_threshold": 0.05,
        "count_aa": False,
        "error": None,
        "baseline_id": None,
    }


def test_same_sha256_as_baseline_is_unchanged_without_decoding_the_baseline(root: Path) -> None:
    image = write_png(root / "images/a.png", marks=BUTTON)
    # The baseline file is garbage: were it decoded, the snapshot would fail.
    (root / "images/old.png").write_bytes(b"not a png")
    entry = shot(root, "button", image, "images/old.png")
    entry["baseline"]["sha256"] = entry["sha256"]
    (result,), _ = run(root, [entry])
    assert (result["status"], result["diff_pixels"], result["diff_path"]) == ("unchanged", 0, None)
    assert (result["baseline_id"], result["metric"], result["width"]) == (7, "oklab", 48)


def test_changed_snapshot_writes_its_diff_under_the_build_diff_folder(root: Path) -> None:
    baseline = write_png(root / "images/base.png", marks=BUTTON)
    image = write_png(root / "images/new.png", marks=MOVED_BUTTON)
    (result,), _ = run(root, [shot(root, "card/list", image, baseline)])
    expected = f"diffs/3/{hashlib.sha256(b'card/list').hexdigest()}.png"
    assert (result["status"], result["diff_path"], result["baseline_id"]) == (
        "changed",
        expected,
        7,
    )
    assert result["diff_pixels"] > 0
    assert 0 < result["diff_ratio"] < 1
    assert (root / expected).read_bytes().startswith(b"\x89PNG")
    # Stored with the settings it was compared with, and the box of what counted.
    settings = {key: result[key] for key in ("metric", "threshold", "flat_threshold", "count_aa")}
    assert settings == {
        "metric": "oklab",
        "threshold": 0.05,
        "flat_threshold": 0.05,
        "count_aa": False,
    }
    left, top, width, height = result["diff_box"]
    assert min(left, top) >= 0 and 0 < width <= 48 and height > 0


def test_same_pixels_in_other_bytes_is_unchanged_and_writes_no_diff(root: Path) -> None:
    baseline = write_png(root / "images/base.png", marks=BUTTON)
    image = root / "images/new.png"
    # The same pixels with a text chunk added: other bytes, so both are decoded and compared.
    data = baseline.read_bytes()
    image.write_bytes(data[:-12] + _chunk(b"tEXt", b"Comment\x00re-encoded") + data[-12:])
    (result,), _ = run(root, [shot(root, "button", image, baseline)])
    assert (result["status"], result["diff_pixels"], result["diff_path"]) == ("unchanged", 0, None)
    assert not (root / "diffs/3").exists() or not any((root / "diffs/3").iterdir())


def test_progress_is_reported_after_each_snapshot_that_ends_a_slow_stretch(root: Path) -> None:
    shots = [
        shot(root, f"s{n}", write_png(root / f"images/{n}.png", marks=BUTTON)) for n in range(3)
    ]
    results, progress = run(root, shots)
    assert [r["name"] for r in results] == ["s0", "s1", "s2"]
    assert progress == [{"done": n, "total": 3} for n in (1, 2, 3)]


def test_snapshots_settled_in_quick_succession_share_one_progress_report(root: Path) -> None:
    image = write_png(root / "images/a.png", marks=BUTTON)
    shots = [shot(root, f"s{n}", image, image) for n in range(7)]
    # A third of the report interval passes per snapshot: every third is reported.
    ticks = itertools.count(step=capture.PROGRESS_SECONDS / 3 + 1e-9)
    results, progress = run(root, shots, clock=ticks.__next__)
    assert [r["status"] for r in results] == ["unchanged"] * 7
    assert progress == [{"done": n, "total": 7} for n in (3, 6)]
    _, none = run(root, shots, clock=lambda: 0.0)
    assert none == []


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("../outside.png", "'..' is refused"),
        ("images/../../outside.png", "'..' is refused"),
        ("/etc/passwd", "absolute paths are refused"),
        ("link-out.png", "links outside the artifacts folder"),
    ],
)
def test_paths_leaving_the_artifacts_root_fail_only_their_snapshot(
    root: Path, path: str, reason: str
) -> None:
    outside = write_png(root.parent / "outside.png", marks=BUTTON)
    (root / "link-out.png").symlink_to(outside)
    good = write_png(root / "images/good.png", marks=BUTTON)
    bad = {"name": "bad", "image": path, "sha256": "a" * 64, "baseline": None}
    results, _ = run(root, [bad, shot(root, "good", good)])
    assert results[0]["status"] == "failed"
    assert reason in results[0]["error"]
    assert results[1]["status"] == "new"


def test_a_baseline_path_leaving_the_root_fails_that_snapshot(root: Path) -> None:
    image = write_png(root / "images/new.png", marks=BUTTON)
    entry = shot(root, "button", image)
    entry["baseline"] = {"id": 1, "image": "../../etc/passwd", "sha256": "b" * 64}
    (result,), _ = run(root, [entry])
    assert result["status"] == "failed"
    assert "'..' is refused" in result["error"]


def test_a_link_inside_the_root_is_followed(root: Path) -> None:
    image = write_png(root / "images/a.png", marks=BUTTON)
    (root / "alias.png").symlink_to(image)
    entry = {"name": "alias", "image": "alias.png", "sha256": "a" * 64, "baseline": None}
    (result,), _ = run(root, [entry])
    assert result["status"] == "new"


def damaged_files(good: bytes) -> dict[str, bytes]:
    return {
        "empty": b"",
        "truncated": good[: len(good) // 2],
        "corrupt": good[:40] + bytes(255 - b for b in good[40:]),
        "not-an-image": b"<html>this is not a PNG</html>",
    }


@pytest.mark.parametrize("damage", ["empty", "truncated", "corrupt", "not-an-image"])
@pytest.mark.parametrize("with_baseline", [False, True], ids=["new", "compared"])
def test_damaged_images_fail_only_their_own_snapshot(
    root: Path, damage: str, with_baseline: bool
) -> None:
    baseline = write_png(root / "images/base.png", marks=BUTTON)
    good = write_png(root / "images/good.png", marks=MOVED_BUTTON)
    broken = root / "images/broken.png"
    broken.write_bytes(damaged_files(good.read_bytes())[damage])
    results, progress = run(
        root,
        [
            shot(root, "broken", broken, baseline if with_baseline else None),
            shot(root, "good", good, baseline),
        ],
    )
    assert results[0]["status"] == "failed"
    assert results[0]["error"]
    assert "\n" not in results[0]["error"]
    assert results[1]["status"] == "changed"
    assert len(progress) == 2


def test_a_missing_image_fails_its_snapshot(root: Path) -> None:
    entry = {"name": "gone", "image": "images/gone.png", "sha256": "c" * 64, "baseline": None}
    (result,), _ = run(root, [entry])
    assert result["status"] == "failed"
    assert result["error"]


def test_a_key_resolves_to_the_real_path_inside_the_root(root: Path) -> None:
    image = write_png(root / "images/a.png")
    assert ArtifactsRoot(root).resolve("images/a.png") == image.resolve()
    with pytest.raises(UnsafeKey, match="empty path"):
        ArtifactsRoot(root).resolve("")


def test_an_unchanged_snapshot_takes_its_size_from_its_png_header(root: Path) -> None:
    image = write_png(root / "images/a.png", size=(40, 30), marks=BUTTON)
    assert png_size(image, max_pixels=10**9) == (40, 30)
    entry = shot(root, "button", image, image)
    (result,), _ = run(root, [entry])
    assert (result["status"], result["width"], result["height"]) == ("unchanged", 40, 30)


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"", "shorter than its header"),
        (b"<html>not a PNG, but long enough to hold a header</html>", "no PNG header"),
    ],
    ids=["empty", "not-a-png"],
)
def test_an_unchanged_snapshot_whose_file_is_no_png_fails(
    root: Path, content: bytes, reason: str
) -> None:
    """Its bytes are its baseline's, so this means the stored file was damaged since."""
    image = root / "images/a.png"
    image.parent.mkdir(parents=True)
    image.write_bytes(content)
    entry = shot(root, "button", image, image)
    (result,), _ = run(root, [entry])
    assert result["status"] == "failed"
    assert reason in result["error"]


def test_an_unchanged_snapshot_above_the_pixel_limit_fails(root: Path) -> None:
    image = write_png(root / "images/a.png", size=(40, 30))
    with pytest.raises(ImageError, match="40x30 is 1200 pixels, above the limit of 1000"):
        png_size(image, max_pixels=1000)


def test_an_unchanged_snapshot_whose_file_is_gone_fails_alone(root: Path) -> None:
    image = write_png(root / "images/a.png", marks=BUTTON)
    kept = write_png(root / "images/b.png", marks=MOVED_BUTTON)
    gone, there = shot(root, "gone", image, image), shot(root, "there", kept, kept)
    image.unlink()
    results, progress = run(root, [gone, there])
    assert [r["status"] for r in results] == ["failed", "unchanged"]
    assert "No such file" in results[0]["error"]
    assert len(progress) == 2


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("\\\\server\\share\\x.png", "absolute paths are refused"),
        ("C:\\x.png", "absolute paths are refused"),
        ("images\\..\\..\\outside.png", "'..' is refused"),
    ],
)
def test_windows_paths_leaving_the_root_are_refused(root: Path, path: str, reason: str) -> None:
    with pytest.raises(UnsafeKey, match=reason):
        ArtifactsRoot(root).resolve(path)


def test_a_root_that_is_a_link_resolves_paths_inside_its_target(root: Path) -> None:
    image = write_png(root / "images/a.png")
    alias = root.parent / "alias"
    alias.symlink_to(root)
    assert ArtifactsRoot(alias).resolve("images/a.png") == image.resolve()
    assert ArtifactsRoot(alias).resolve(".") == root.resolve()
    (root / "up").symlink_to(root.parent)
    assert ArtifactsRoot(alias).resolve("up/alias/images/a.png") == image.resolve()
    with pytest.raises(UnsafeKey, match="links outside"):
        ArtifactsRoot(alias).resolve("up/outside.png")
