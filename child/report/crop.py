"""The enlarged crop a changed snapshot opens with: which area, and how large.

A 1 px change in an 800x600 screenshot cannot be seen at page scale, so the report shows the
area around the pixels that counted (`SnapshotView.diff_box`) first, enlarged, for baseline,
new and diff alike. The crop is CSS only: the parent never loads libvips, and no extra image
file is written, so the page shows the full image inside a box of the crop's size, scaled and
shifted (`report.css`, `.crop-frame`). This module does the arithmetic, once, for the page and
its tests.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

Box = tuple[int, int, int, int]  # left, top, width, height, in image pixels

#: Context around the changed pixels: at least this many pixels on each side...
PADDING_PX = 16
#: ...or this share of the box's size on that axis, whichever is more, so that a large change
#: keeps some of its surroundings too.
PADDING_SHARE = 0.25
#: The most a crop is enlarged: 8 screen pixels per image pixel already shows a single pixel as
#: a clear square, and more shows too little around it.
MAX_ZOOM = 8
#: The room a crop has when the three (baseline, new, diff) sit side by side, in CSS pixels:
#: they fit across a 1280 px window.
SIDE_PX = (384, 288)
#: The room a crop has on a row of its own, for a wide strip (a line of text that moved), which
#: would be shrunk past reading side by side.
ROW_PX = (1200, 240)

#: How the three crops (baseline, new, diff) are laid out: side by side, or a row each.
Layout = Literal["side", "rows"]


@dataclass(frozen=True)
class Crop:
    """The area shown (the changed box with its context) and the scale it is shown at."""

    left: int
    top: int
    width: int
    height: int
    scale: float
    layout: Layout
    #: The changed box itself, marked inside the crop.
    box: Box

    @property
    def enlarged(self) -> bool:
        """Whether image pixels are drawn larger than screen pixels (and so kept square,
        `image-rendering: pixelated`, rather than blurred)."""
        return self.scale > 1

    @property
    def frame(self) -> tuple[float, float]:
        """The crop's size on the page, in CSS pixels."""
        return self.width * self.scale, self.height * self.scale


def crop_of(box: Box, image_size: tuple[int, int]) -> Crop:
    """The crop around `box` in an image of `image_size` (width, height): padded on each axis,
    clamped to the image, and scaled to the largest whole zoom that fits (at most `MAX_ZOOM`),
    side by side, or a row each when that shows it at least twice as large (a wide strip)."""
    left, top, width, height = box
    image_width = max(image_size[0], left + width)
    image_height = max(image_size[1], top + height)
    x0, x1 = _padded(left, width, image_width)
    y0, y1 = _padded(top, height, image_height)
    area_width, area_height = max(1, x1 - x0), max(1, y1 - y0)
    side = _fit(area_width, area_height, SIDE_PX)
    rows = _fit(area_width, area_height, ROW_PX)
    if rows >= 2 * side:
        return Crop(x0, y0, area_width, area_height, rows, "rows", box)
    return Crop(x0, y0, area_width, area_height, side, "side", box)


def _padded(start: int, length: int, limit: int) -> tuple[int, int]:
    """One axis of the box with its context, within 0 and `limit`: padded per axis, so that a
    wide strip stays a strip."""
    pad = max(PADDING_PX, round(PADDING_SHARE * length))
    return max(0, start - pad), min(limit, start + length + pad)


def _fit(width: int, height: int, room: tuple[int, int]) -> float:
    """The scale that fits `width` x `height` into `room`: a whole zoom when enlarging, so that
    every image pixel is the same size on screen; below 1:1, any scale."""
    fit = min(room[0] / width, room[1] / height)
    if fit >= 1:
        return float(min(MAX_ZOOM, math.floor(fit)))
    return round(fit, 4)
