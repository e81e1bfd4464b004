"""child.diff.compare: counts equal pixelmatch's, the defaults agree with every label, bad images
fail cleanly, the diff PNG is right.

Two fixture folders: ``fixtures/diff`` (screenshot-like pairs drawn by libvips, sizes and PNG
encodings) and ``fixtures/screens`` (real Chromium screenshots, each pair labelled ``changed`` or
``unchanged`` in ``labels.json``). Each ``expected.json`` holds, for each pair ``NAME.a.png`` /
``NAME.b.png``, the counts of pixelmatch 7.1.0 (``yiq``) and 8.0.0 (``oklab``) at 0.1 and 0.05,
with and without ``includeAA``, computed by ``scripts/make_diff_fixtures.mjs``; node is not
needed here.
"""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path
from typing import Any

import pytest
import pyvips

from child.diff import compare as diff
from child.diff.compare import DiffOptions, ImageError, Metric, compare, probe
from child.storybook.capture import snapshot_options

FIXTURES = Path(__file__).parents[1] / "fixtures" / "diff"
SCREENS = FIXTURES.parent / "screens"
EXPECTED: dict[str, dict[str, int]] = json.loads((FIXTURES / "expected.json").read_text())
LABELS: dict[str, dict[str, str]] = json.loads((SCREENS / "labels.json").read_text())
# Reference runs only: the finer pass is ours, so it is off when matching pixelmatch.
TABLE = [
    (folder, name, run, count)
    for folder in (FIXTURES, SCREENS)
    for name, runs in json.loads((folder / "expected.json").read_text()).items()
    for run, count in runs.items()
]


def pair(name: str, folder: Path = FIXTURES) -> tuple[Path, Path]:
    return folder / f"{name}.a.png", folder / f"{name}.b.png"


def reference_options(run: str) -> DiffOptions:
    """``"oklab 0.05 aa"`` -> pixelmatch's metric, threshold and includeAA, the finer pass off."""
    name, threshold, *aa = run.split()
    metric: Metric = "yiq" if name == "yiq" else "oklab"
    return DiffOptions(
        metric=metric, threshold=float(threshold), count_aa=bool(aa), flat_threshold=None
    )


@pytest.mark.parametrize(
    ("folder", "name", "run", "expected"),
    TABLE,
    ids=[f"{f.name}-{n}-{r}" for f, n, r, _ in TABLE],
)
def test_counts_equal_pixelmatch(folder: Path, name: str, run: str, expected: int) -> None:
    result = compare(*pair(name, folder), None, reference_options(run))
    assert result.diff_pixels == expected
    assert result.metric == run.split()[0]
    assert result.status == ("changed" if expected else "unchanged")


@pytest.mark.parametrize("name", sorted(LABELS))
def test_the_defaults_agree_with_the_label(name: str) -> None:
    result = compare(*pair(name, SCREENS), None)
    assert result.status == LABELS[name]["label"], LABELS[name]["why"]


def test_defaults_catch_a_one_step_colour_token_change() -> None:
    missed_by_yiq = compare(*pair("colour-token"), None, reference_options("yiq 0.1"))
    assert missed_by_yiq.diff_pixels == 0
    result = compare(*pair("colour-token"), None)
    assert result.status == "changed"
    assert result.diff_pixels > 1000  # the button's face, not a few edge pixels


def test_defaults_ignore_antialiasing_noise() -> None:
    assert EXPECTED["antialiasing"]["oklab 0.05 aa"] > 0  # the pair really differs
    result = compare(*pair("antialiasing"), None)
    assert (result.status, result.diff_pixels) == ("unchanged", 0)


def test_the_finer_pass_forgives_a_sub_pixel_shift_pixelmatch_counts() -> None:
    avatar = pair("shape-subpixel-avatar", SCREENS)
    assert compare(*avatar, None, reference_options("oklab 0.1")).diff_pixels > 0
    assert compare(*avatar, None).diff_pixels == 0
    # Counting anti-aliasing counts shifted edges too.
    assert compare(*avatar, None, DiffOptions(count_aa=True)).diff_pixels > 0


def test_the_finer_pass_catches_a_gradient_made_lighter() -> None:
    avatar = pair("opacity-opaque-avatar", SCREENS)
    assert compare(*avatar, None, reference_options("oklab 0.1")).diff_pixels == 0
    assert compare(*avatar, None).diff_pixels > 1000  # the whole face, not its rim


def test_the_box_holds_every_counted_pixel() -> None:
    result = compare(*pair("element-added"), None, reference_options("oklab 0.1"))
    assert result.box is not None
    left, top, width, height = result.box
    assert 0 <= left < left + width <= 200 and 0 <= top < top + height <= 120
    outside = compare(*pair("different-size"), None)
    assert outside.box == (0, 120, 200, 16)  # the rows only one image has
    assert compare(*pair("same-pixels"), None).box is None


def test_same_bytes_are_unchanged_without_decoding(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: Any) -> None:
        raise AssertionError("decoded")

    monkeypatch.setattr(diff, "_decode", refuse)
    a, _ = pair("text-1px")
    result = compare(a, a, None)
    assert (result.status, result.diff_pixels, result.width, result.height) == (
        "unchanged",
        0,
        200,
        120,
    )


def test_same_pixels_in_different_bytes_are_unchanged() -> None:
    a, b = pair("same-pixels")
    assert a.read_bytes() != b.read_bytes()
    assert compare(a, b, None).status == "unchanged"


def test_sixteen_bit_grey_and_palette_decode_like_eight_bit_rgb() -> None:
    rgb = FIXTURES / "text-1px.a.png"
    for name in ("sixteen-bit.a.png", "palette.a.png", "interlaced.a.png"):
        assert compare(rgb, FIXTURES / name, None).diff_pixels == 0, name
    assert pyvips.Image.new_from_file(str(FIXTURES / "sixteen-bit.a.png")).format == "ushort"
    assert pyvips.Image.new_from_file(str(FIXTURES / "grey.a.png")).bands == 1
    assert pyvips.Image.new_from_file(str(FIXTURES / "grey.b.png")).bands == 2


def test_different_sizes_count_the_area_outside_the_overlap() -> None:
    result = compare(*pair("different-size"), None)
    assert (result.status, result.diff_pixels, result.height) == ("changed", 200 * 16, 136)
    assert result.diff_ratio == pytest.approx(200 * 16 / (200 * 136))


def test_budget_keeps_small_changes_unchanged() -> None:
    count = compare(*pair("text-1px"), None).diff_pixels
    assert compare(*pair("text-1px"), None, DiffOptions(budget_pixels=count)).status == "unchanged"
    assert compare(*pair("text-1px"), None, DiffOptions(budget_ratio=0.5)).status == "unchanged"
    assert (
        compare(*pair("text-1px"), None, DiffOptions(budget_pixels=count - 1)).status == "changed"
    )


def test_diff_png_is_written_for_changed_only(tmp_path: Path) -> None:
    out = tmp_path / "card.png"
    result = compare(*pair("different-size"), out)
    assert result.diff_written
    image = pyvips.Image.new_from_file(str(out), fail_on="error")
    assert (image.width, image.height, image.bands) == (200, 136, 3)
    assert image.crop(0, 120, 200, 16).extract_band(0).min() == 255  # outside: red
    assert image.crop(0, 120, 200, 16).extract_band(1).max() == 0

    same = tmp_path / "same.png"
    assert not compare(*pair("same-pixels"), same).diff_written
    assert not same.exists()


def test_diff_png_marks_changed_pixels_red_over_faded_grey(tmp_path: Path) -> None:
    out = tmp_path / "diff.png"
    result = compare(*pair("element-added"), out, reference_options("oklab 0.1"))
    image = pyvips.Image.new_from_file(str(out))
    red = (image.extract_band(0) == 255) & (image.extract_band(1) == 0)
    assert round(red.avg() / 255 * 200 * 120) == result.diff_pixels
    assert image.extract_band(1).min() == 0 and image.extract_band(1).max() == 255
    assert image.crop(0, 0, 8, 8).extract_band(1).min() == 255  # white page fades to white


def png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def huge_png(width: int, height: int) -> bytes:
    """A valid-looking PNG whose IHDR claims width x height, with almost no pixel data."""
    header = struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + png_chunk(b"IHDR", header)
        + png_chunk(b"IDAT", zlib.compress(b"\x00" * 64))
        + png_chunk(b"IEND", b"")
    )


def test_oversized_image_is_refused_from_its_header(tmp_path: Path) -> None:
    huge = tmp_path / "huge.png"
    huge.write_bytes(huge_png(100_000, 100_000))
    with pytest.raises(ImageError, match=r"huge\.png: 100000x100000 .* above the limit"):
        compare(FIXTURES / "text-1px.a.png", huge, None)
    with pytest.raises(ImageError, match="above the limit"):
        probe(huge, 50_000_000)
    assert probe(FIXTURES / "text-1px.a.png", 200 * 120) == (200, 120)


def bad_images(folder: Path) -> dict[str, Path]:
    good = (FIXTURES / "text-1px.a.png").read_bytes()
    corrupt = bytearray(good)
    corrupt[200:260] = bytes(60)
    files = {
        "truncated": good[: len(good) // 2],
        "corrupt": bytes(corrupt),
        "not-an-image": b"<html>404 Not Found</html>\n",
        "empty": b"",
    }
    paths = {}
    for name, data in files.items():
        paths[name] = folder / f"{name}.png"
        paths[name].write_bytes(data)
    return paths


@pytest.mark.parametrize("kind", ["truncated", "corrupt", "not-an-image", "empty"])
@pytest.mark.parametrize("side", ["baseline", "new"])
def test_bad_image_raises_image_error_naming_the_file(tmp_path: Path, kind: str, side: str) -> None:
    bad = bad_images(tmp_path)[kind]
    good = FIXTURES / "text-1px.a.png"
    files = (bad, good) if side == "baseline" else (good, bad)
    with pytest.raises(ImageError) as caught:
        compare(*files, tmp_path / "diff.png")
    message = str(caught.value)
    assert message.startswith(str(bad)) and "\n" not in message
    assert not (tmp_path / "diff.png").exists()


def test_a_missing_file_raises_file_not_found_naming_it(tmp_path: Path) -> None:
    """Not an `ImageError`: a file read through a cache may be read again (`capture_one`)."""
    with pytest.raises(FileNotFoundError, match=r"missing\.png"):
        compare(FIXTURES / "text-1px.a.png", tmp_path / "missing.png", None)


def test_a_diff_whose_folder_is_gone_raises_file_not_found(tmp_path: Path) -> None:
    """Its scratch folder deleted under the child (a cleared cache): read and written again."""
    with pytest.raises(FileNotFoundError, match="gone"):
        compare(
            FIXTURES / "text-1px.a.png", FIXTURES / "text-1px.b.png", tmp_path / "gone" / "d.png"
        )


def test_a_story_s_own_threshold_keeps_the_project_s_finer_pass_and_budget() -> None:
    project = DiffOptions(flat_threshold=0.02, budget_pixels=7)
    story = snapshot_options({"threshold": 0.3, "count_aa": True}, project)
    assert (story.threshold, story.count_aa) == (0.3, True)
    assert (story.flat_threshold, story.budget_pixels, story.metric) == (0.02, 7, "oklab")
    assert snapshot_options({"threshold": None, "count_aa": None}, project) == project


def test_the_budget_applies_to_what_the_finer_pass_counts() -> None:
    token = pair("colour-token-button", SCREENS)
    count = compare(*token, None).diff_pixels
    assert count > 0 and compare(*token, None, reference_options("oklab 0.1")).diff_pixels == 0
    assert compare(*token, None, DiffOptions(budget_pixels=count)).status == "unchanged"
    assert compare(*token, None, DiffOptions(budget_pixels=count - 1)).status == "changed"


def _drawn(path: Path, boxes: list[tuple[int, int, int, int, list[int]]]) -> Path:
    """A white 120 x 80 PNG with the given boxes filled: (left, top, width, height, rgb)."""
    image = pyvips.Image.black(120, 80, bands=3) + 255
    for left, top, width, height, rgb in boxes:
        image = image.draw_rect(rgb, left, top, width, height, fill=True)
    image.cast("uchar").copy(interpretation="srgb").pngsave(str(path))
    return path


def test_pixels_inside_ignore_regions_are_not_compared(tmp_path: Path) -> None:
    """A live clock (10..30 x 10..30) differs on every render; a real change (80..90 x 50..60)
    does not hide behind it."""
    base = _drawn(tmp_path / "a.png", [(10, 10, 20, 20, [0, 0, 0])])
    clock_moved = _drawn(tmp_path / "b.png", [(12, 10, 20, 20, [200, 0, 0])])
    both = _drawn(
        tmp_path / "c.png", [(12, 10, 20, 20, [200, 0, 0]), (80, 50, 10, 10, [0, 0, 255])]
    )
    clock = (10, 10, 22, 20)
    assert compare(base, clock_moved, None).status == "changed"
    assert compare(base, clock_moved, None, ignore=[clock]).status == "unchanged"
    diff_png = tmp_path / "diff.png"
    result = compare(base, both, diff_png, ignore=[clock])
    assert (result.status, result.diff_pixels, result.box) == ("changed", 100, (80, 50, 10, 10))
    marked = pyvips.Image.new_from_file(str(diff_png))
    tinted, plain = marked(15, 15), marked(60, 70)
    assert tinted[2] > tinted[0] + 40, "an ignore region is tinted blue in the diff"
    assert plain[0] == plain[2], "the rest is the faded grey baseline"


def test_ignore_regions_past_the_image_are_cut_to_it(tmp_path: Path) -> None:
    base = _drawn(tmp_path / "a.png", [(100, 60, 20, 20, [0, 0, 0])])
    moved = _drawn(tmp_path / "b.png", [(101, 60, 19, 20, [0, 0, 0])])
    assert compare(base, moved, None, ignore=[(90, 50, 500, 500)]).status == "unchanged"
