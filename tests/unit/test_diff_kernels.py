"""child.diff.kernels: the compiled loops agree with the array operations they replace.

The counts are checked against pixelmatch in test_diff.py; here, the parts whose answer does not
show in a count: the distinct colours and each pixel's row among them, and the diff image's
grey over opaque and semi-transparent baselines.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import pyvips

from child.diff import kernels
from child.diff.compare import DIFF_FADE, DiffOptions, compare

FIXTURES = Path(__file__).parents[1] / "fixtures" / "diff"


@pytest.mark.parametrize(
    ("words", "colours"),
    [(0, 1), (1, 1), (5_000, 2), (100_000, 300), (300_000, 5_000), (50_000, 40_000)],
)
def test_distinct_colours_and_rows_equal_numpy_unique(words: int, colours: int) -> None:
    """Runs of one colour, few colours, and more than the hash table first holds."""
    rng = np.random.default_rng(words + colours)
    palette = rng.integers(0, 2**32, colours, dtype=np.uint64).astype(np.uint32)
    picks = np.repeat(rng.integers(0, colours, words), rng.integers(1, 4, words))[:words]
    pixels = palette[picks]
    distinct, rows = kernels.distinct(pixels)
    expected = np.unique(pixels)
    assert np.array_equal(distinct, expected)
    assert np.array_equal(rows, np.searchsorted(expected, pixels))


@pytest.mark.parametrize("name", ["element-added", "alpha"])
def test_diff_image_grey_is_the_baseline_s_faded_luma(tmp_path: Path, name: str) -> None:
    """pixelmatch ``drawGrayPixel``: ``255 + (luma - 255) * alpha / 255 * 0.1``, truncated, on
    every pixel not counted; element-added is opaque (the tables), alpha is not (libvips)."""
    out = tmp_path / "diff.png"
    baseline = FIXTURES / f"{name}.a.png"
    assert compare(baseline, FIXTURES / f"{name}.b.png", out, DiffOptions()).diff_written
    image = np.frombuffer(pyvips.Image.new_from_file(str(out)).write_to_memory(), np.uint8)
    source = pyvips.Image.new_from_file(str(baseline))
    rgba = np.frombuffer(source.write_to_memory(), np.uint8).reshape(-1, source.bands)
    alpha = rgba[:, 3] if source.bands == 4 else np.full(rgba.shape[0], 255)
    luma = (
        rgba[:, 0] * kernels.LUMA[0] + rgba[:, 1] * kernels.LUMA[1] + rgba[:, 2] * kernels.LUMA[2]
    )
    grey = ((luma - 255) * alpha * (DIFF_FADE / 255) + 255).astype(np.uint8)
    red, green, blue = image.reshape(-1, 3).T
    kept = ~((red == 255) & (green == 0) & (blue == 0))
    assert kept.sum() > image.size // 6  # most of the page is not counted
    assert np.array_equal(green[kept], grey[kept]) and np.array_equal(red[kept], grey[kept])
