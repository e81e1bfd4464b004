"""Compare a baseline screenshot with a new one and count the pixels that changed.

The counts equal pixelmatch's for the same options, so teams keep the thresholds they tuned
there: ``yiq`` is pixelmatch 7.1's metric (also odiff's and reg-cli's), ``oklab`` is pixelmatch
8.0's HyAB distance in OKLab. The work is layered, cheapest answer first, as in pixelmatch's
``index.js``:

1. same bytes: ``unchanged``, nothing decoded;
2. a header-only size check refuses images above ``max_pixels`` before any pixel is allocated;
3. both images are decoded once to 8-bit RGBA the way pngjs does (16-bit rounded, grey and
   palette expanded, opaque alpha added), so pixelmatch sees the same bytes;
4. exact pixel gate: which pixels differ at all, and their bounding box;
5. inside that box only, the colour metric, vectorised as libvips band arithmetic;
6. on the pixels that fail it only, pixelmatch's anti-aliasing detector (Vysniauskas 2009),
   after a vectorised pre-pass that settles every pixel with 3+ identical neighbours.

Images of different sizes are ``changed``: the overlap is compared and the rest of the union
box ``max(w) x max(h)`` counts as differing.

Defaults: ``metric="oklab"``, ``threshold=0.05``. A one-step colour-token change such as
Tailwind's ``#2563eb`` -> ``#1d4ed8`` is a HyAB distance of 0.072 and a YIQ threshold
equivalent of 0.068, so pixelmatch's 0.1 misses it in both metrics; 0.05 in OKLab catches it
while staying above the distance of sub-pixel rendering jitter, and the anti-aliasing detector
(on by default, as in pixelmatch) drops edge pixels that only moved their ramp.

libvips operations run only inside functions: the fork server imports this module but must
never start a libvips operation in the parent.
"""

from __future__ import annotations

import math
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pyvips

Metric = Literal["yiq", "oklab"]

# 35215 is the maximum possible value of the YIQ difference (pixelmatch 7, index.js).
YIQ_MAX_DELTA = 35215
# Opacity of the baseline under the red pixels of the diff PNG (pixelmatch's `alpha` option).
DIFF_FADE = 0.1
# Rec.601 luma weights that pixelmatch uses for brightness (Kotsarenko and Ramos 2009).
LUMA = (0.29889531, 0.58662247, 0.11448223)
# Fastest zlib level: a diff PNG is for eyes, written once, and level 1 is several times
# faster than the default 6 for a few percent more bytes.
PNG_COMPRESSION = 1


@dataclass(frozen=True)
class DiffOptions:
    """How two screenshots are compared; the defaults are explained in the module docstring."""

    metric: Metric = "oklab"
    threshold: float = 0.05
    count_aa: bool = False  # pixelmatch's includeAA: count anti-aliased pixels as differing
    budget_pixels: int = 0  # "changed" needs diff_pixels above this ...
    budget_ratio: float = 0.0  # ... and above this share of the union box
    max_pixels: int = 50_000_000  # per image, refused from the header before decoding


@dataclass(frozen=True)
class DiffResult:
    """The verdict on one snapshot, stored with the metric that produced it."""

    status: Literal["unchanged", "changed"]
    diff_pixels: int
    diff_ratio: float  # diff_pixels / (max(w) * max(h))
    width: int  # of the new image
    height: int
    metric: str
    diff_written: bool


class ImageError(Exception):
    """A clear, one-line message naming the file and what is wrong."""


@dataclass(frozen=True)
class _Box:
    """A rectangle in overlap coordinates, right and bottom edges excluded."""

    left: int
    top: int
    width: int
    height: int


def compare(
    baseline: Path, new: Path, diff_path: Path | None, options: DiffOptions = DiffOptions()
) -> DiffResult:
    """Count the pixels of ``new`` that differ from ``baseline``; write a diff PNG if changed."""
    if _same_bytes(baseline, new):
        width, height = probe(new, options.max_pixels)
        return DiffResult("unchanged", 0, 0.0, width, height, options.metric, False)

    base = _decode(baseline, options.max_pixels)
    fresh = _decode(new, options.max_pixels)
    union = max(base.width, fresh.width) * max(base.height, fresh.height)
    overlap = _Box(0, 0, min(base.width, fresh.width), min(base.height, fresh.height))
    a = base.crop(0, 0, overlap.width, overlap.height)
    b = fresh.crop(0, 0, overlap.width, overlap.height)
    outside = union - overlap.width * overlap.height

    box = None if outside == 0 and _same_pixels(a, b) else _changed_box(a, b)
    counted = None if box is None else _counted_mask(a, b, box, overlap, options)
    diff_pixels = outside + (0 if counted is None else _count(counted))

    changed = diff_pixels > options.budget_pixels and diff_pixels > options.budget_ratio * union
    written = changed and diff_path is not None
    if diff_path is not None and written:
        _write_diff(diff_path, base, fresh, counted, box, overlap)
    return DiffResult(
        "changed" if changed else "unchanged",
        diff_pixels,
        diff_pixels / union,
        fresh.width,
        fresh.height,
        options.metric,
        written,
    )


def probe(path: Path, max_pixels: int) -> tuple[int, int]:
    """Read width and height from the header only; refuse images above ``max_pixels``.

    ``new_from_file`` is lazy: it parses the header and allocates nothing for pixels, so a PNG
    whose IHDR claims 100000x100000 is refused in microseconds.
    """
    image = _open(path)
    return _check_size(path, image.width, image.height, max_pixels)


def _same_bytes(baseline: Path, new: Path) -> bool:
    """Byte-identical files need no decoding (cheapest answer first, as in pixelmatch)."""
    try:
        if baseline.stat().st_size != new.stat().st_size:
            return False
        return baseline.read_bytes() == new.read_bytes()
    except OSError as error:
        raise ImageError(f"{error.filename}: cannot read file ({error.strerror})") from error


def _open(path: Path) -> pyvips.Image:
    """Open lazily with ``fail_on="error"`` so that a damaged file raises instead of decoding
    as grey garbage; every libvips or OS failure becomes an ImageError naming the file."""
    try:
        return pyvips.Image.new_from_file(os.fspath(path), fail_on="error")
    except pyvips.Error as error:
        raise ImageError(f"{path}: not a readable image ({_first_line(error)})") from error


def _check_size(path: Path, width: int, height: int, max_pixels: int) -> tuple[int, int]:
    if width * height > max_pixels:
        raise ImageError(
            f"{path}: {width}x{height} is {width * height} pixels, above the limit of {max_pixels}"
        )
    return width, height


def _first_line(error: pyvips.Error) -> str:
    detail = (error.detail or error.message or "").strip().splitlines()
    return detail[-1].strip() if detail else "unknown libvips error"


def _decode(path: Path, max_pixels: int) -> pyvips.Image:
    """Decode to 8-bit RGBA in memory, once, as pngjs hands pixels to pixelmatch.

    pngjs rounds 16-bit samples (``floor(v * 255 / 65535 + 0.5)``), repeats grey into R, G
    and B, expands palettes and adds an opaque alpha; libvips does the palette part when
    loading, the rest is done here. Every later step reads this one memory copy.
    """
    image = _open(path)
    _check_size(path, image.width, image.height, max_pixels)
    try:
        if image.format != "uchar":
            image = image.linear(255 / 65535, 0.5).cast("uchar")
        if image.bands < 3:
            grey = image.extract_band(0)
            alpha = image.extract_band(1) if image.bands == 2 else None
            image = grey.bandjoin([grey, grey] + ([alpha] if alpha is not None else []))
        if image.bands == 3:
            image = image.bandjoin_const([255])
        return image.copy(interpretation="srgb").copy_memory()
    except pyvips.Error as error:
        raise ImageError(f"{path}: cannot decode image ({_first_line(error)})") from error


def _same_pixels(a: pyvips.Image, b: pyvips.Image) -> bool:
    """pixelmatch's identical-buffer fast path: one memcmp over the decoded pixels."""
    return bool(a.write_to_memory() == b.write_to_memory())


def _changed_box(a: pyvips.Image, b: pyvips.Image) -> _Box | None:
    """Exact pixel gate: the bounding box of pixels whose RGBA differ at all, or None.

    One pass: per-column and per-row sums of the inequality mask give both the answer and
    the box, so the colour metric below never looks at an unchanged row or column.
    """
    columns, rows = (a != b).bandor().project()
    xs = [x for x, total in enumerate(columns.tolist()[0]) if total]
    ys = [y for y, row in enumerate(rows.tolist()) if row[0]]
    if not xs:
        return None
    return _Box(xs[0], ys[0], xs[-1] + 1 - xs[0], ys[-1] + 1 - ys[0])


def _counted_mask(
    a: pyvips.Image, b: pyvips.Image, box: _Box, overlap: _Box, options: DiffOptions
) -> pyvips.Image:
    """255 where a pixel of ``box`` counts as differing: fails the colour test and, unless
    ``count_aa``, is not anti-aliasing in either image (pixelmatch's main loop)."""
    a_box = a.crop(box.left, box.top, box.width, box.height)
    b_box = b.crop(box.left, box.top, box.width, box.height)
    if options.metric == "yiq":
        fails = _yiq_fails(a_box, b_box, box, overlap.width, options.threshold)
    else:
        fails = _oklab_fails(a_box, b_box, box, overlap.width, options.threshold)
    if options.count_aa:
        return fails
    return _drop_antialiased(a, b, fails, box, overlap, options.metric)


def _count(mask: pyvips.Image) -> int:
    return round(mask.avg() * mask.width * mask.height / 255)


# --- colour metrics, vectorised over the box -----------------------------------------------


def _blended(
    image: pyvips.Image, background: pyvips.Image | None
) -> tuple[pyvips.Image, pyvips.Image]:
    """RGB as doubles composited over ``background`` (pixelmatch blends semi-transparent
    pixels before measuring); returns (rgb, alpha). Opaque boxes skip the blend."""
    rgb = image.extract_band(0, n=3).cast("double")
    alpha = image.extract_band(3).cast("double")
    if background is None:
        return rgb, alpha
    return (rgb * alpha + background * (255 - alpha)) / 255, alpha


def _is_opaque(a_box: pyvips.Image, b_box: pyvips.Image) -> bool:
    return bool(a_box.extract_band(3).min() == 255 and b_box.extract_band(3).min() == 255)


def _pixel_index(box: _Box, width: int) -> pyvips.Image:
    """Index ``y * width + x`` of each box pixel in the overlap, as pixelmatch numbers them."""
    xy = pyvips.Image.xyz(box.width, box.height).cast("double")
    return (xy.extract_band(1) + box.top) * width + (xy.extract_band(0) + box.left)


def _yiq_fails(
    a_box: pyvips.Image, b_box: pyvips.Image, box: _Box, width: int, threshold: float
) -> pyvips.Image:
    """pixelmatch 7 ``colorDelta``: squared YIQ distance (Kotsarenko and Ramos 2009) above
    ``35215 * threshold**2``. Semi-transparent pixels blend over its fixed pattern:
    R 48, G and B 48 or 207 from ``floor(4i / phi) % 2`` and ``floor(4i / phi**2) % 2``."""
    background = None
    if not _is_opaque(a_box, b_box):
        k = _pixel_index(box, width) * 4
        green = 48 + 159 * ((k / 1.618033988749895).floor() % 2)
        blue = 48 + 159 * ((k / 2.618033988749895).floor() % 2)
        background = green.new_from_image(48).bandjoin([green, blue])
    rgb1, _ = _blended(a_box, background)
    rgb2, _ = _blended(b_box, background)
    d = rgb1 - rgb2
    y = d.recomb([list(LUMA)])
    i = d.recomb([[0.59597799, -0.27417610, -0.32180189]])
    q = d.recomb([[0.21147017, -0.52261711, 0.31114694]])
    delta = 0.5053 * y * y + 0.299 * i * i + 0.1957 * q * q
    return delta > YIQ_MAX_DELTA * threshold * threshold


def _srgb_to_linear(value: float) -> float:
    c = value / 255
    return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4


def _linear(rgb: pyvips.Image) -> pyvips.Image:
    """sRGB -> linear as pixelmatch 8's ``linLUT``: a 256-entry table, linearly interpolated
    for the fractional values that blending produces."""
    table = [_srgb_to_linear(v) for v in range(256)]
    steps = [table[v + 1] - table[v] for v in range(255)] + [0.0]
    index = rgb.floor()
    lookup = index.cast("uchar")
    base = lookup.maplut(pyvips.Image.new_from_list([table]))
    slope = lookup.maplut(pyvips.Image.new_from_list([steps]))
    return base + slope * (rgb - index)


# OKLab (Ottosson 2020): linear sRGB -> LMS, and cube-rooted LMS -> a, b.
OKLAB_LMS = [
    [0.4122214708, 0.5363325363, 0.0514459929],
    [0.2119034982, 0.6806995451, 0.1073969566],
    [0.0883024619, 0.2817188376, 0.6299787005],
]
OKLAB_AB = [
    [1.9779984951, -2.4285922050, 0.4505937099],
    [0.0259040371, 0.7827717662, -0.8086757660],
]
OKLAB_L = [[0.2104542553, 0.7936177850, -0.0040720468]]
# Ottosson's toe for OKLab lightness, Lr, which keeps near-black differences from dominating.
TOE_K1, TOE_K2 = 0.206, 0.03
TOE_K3 = (1 + TOE_K1) / (1 + TOE_K2)


def _oklab(rgb: pyvips.Image) -> tuple[pyvips.Image, pyvips.Image]:
    """Cube-rooted LMS and toe-corrected lightness Lr of an RGB double image."""
    lms = _linear(rgb).recomb(OKLAB_LMS) ** (1 / 3)
    lightness = lms.recomb(OKLAB_L)
    x = TOE_K3 * lightness - TOE_K1
    toe = 0.5 * (x + (x * x + 4 * TOE_K2 * TOE_K3 * lightness) ** 0.5)
    return lms, toe


def _checkerboard(box: _Box, width: int) -> pyvips.Image:
    """pixelmatch 8's background for semi-transparent pixels: the top 3 bits of the 32-bit
    Fibonacci hash ``imul(i, 0x9e3779b1)`` pick 48 or 207 per channel. The product is split
    in 16-bit halves so every step is exact in doubles."""
    i = _pixel_index(box, width)
    product = ((i * 40503) % 65536) * 65536 + i * 31153  # 0x9e3779b1 = 40503 * 2**16 + 31153
    word = product - (product / 2**32).floor() * 2**32  # libvips' % takes int constants only
    top = (word / 2**29).floor()  # the top 3 of 32 bits
    red = (top / 4).floor()
    green = (top / 2).floor() % 2
    blue = top % 2
    return (48 + 159 * red).bandjoin([48 + 159 * green, 48 + 159 * blue])


def _oklab_fails(
    a_box: pyvips.Image, b_box: pyvips.Image, box: _Box, width: int, threshold: float
) -> pyvips.Image:
    """pixelmatch 8 ``colorDelta``: HyAB distance ``|dLr| + sqrt(da**2 + db**2)`` (Abasi et
    al. 2019) in OKLab above ``threshold`` (1 is black against white)."""
    background = None if _is_opaque(a_box, b_box) else _checkerboard(box, width)
    lms1, toe1 = _oklab(_blended(a_box, background)[0])
    lms2, toe2 = _oklab(_blended(b_box, background)[0])
    chroma = (lms1 - lms2).recomb(OKLAB_AB)
    ab2 = chroma.extract_band(0) ** 2 + chroma.extract_band(1) ** 2
    rest = threshold - (toe1 - toe2).abs()
    return (rest < 0) | (ab2 > rest * rest)


# --- anti-aliasing, on the pixels that fail the colour test only ---------------------------


def _drop_antialiased(
    a: pyvips.Image,
    b: pyvips.Image,
    fails: pyvips.Image,
    box: _Box,
    overlap: _Box,
    metric: Metric,
) -> pyvips.Image:
    """Keep the failing pixels that are not anti-aliasing in either image.

    A pixel with 3+ identical neighbours in both images cannot be anti-aliased (pixelmatch's
    ``antialiased`` returns early on 3 equal siblings), so libvips settles those over the
    whole box at once; the rest go through the exact per-pixel detector below, reading a
    memory copy of the box grown by the detector's reach of 2 pixels.
    """
    region = _Box(
        max(box.left - 2, 0),
        max(box.top - 2, 0),
        min(box.left + box.width + 2, overlap.width) - max(box.left - 2, 0),
        min(box.top + box.height + 2, overlap.height) - max(box.top - 2, 0),
    )
    around = _Around(
        region,
        overlap,
        a.crop(region.left, region.top, region.width, region.height).write_to_memory(),
        b.crop(region.left, region.top, region.width, region.height).write_to_memory(),
        metric,
    )
    settled = _many_siblings(around.pixels_a, box, around) & _many_siblings(
        around.pixels_b, box, around
    )
    counted = bytearray((fails & settled).write_to_memory())
    doubtful = (fails & (settled == 0)).write_to_memory()
    for match in re.finditer(rb"[^\x00]", doubtful):
        x = box.left + match.start() % box.width
        y = box.top + match.start() // box.width
        if not (around.antialiased(around.pixels_a, x, y) or around.antialiased(around.pixels_b, x, y)):
            counted[match.start()] = 255
    return pyvips.Image.new_from_memory(counted, box.width, box.height, 1, "uchar")


def _many_siblings(pixels: bytes, box: _Box, around: _Around) -> pyvips.Image:
    """255 where a box pixel has 3+ neighbours of identical RGBA (pixelmatch's
    ``hasManySiblings``), as 32-bit words compared 8 times over the box. Pixels on the image
    border stay 0 and are left to the exact detector, which counts the border itself."""
    region, overlap = around.region, around.overlap
    words = pyvips.Image.new_from_memory(pixels, region.width, region.height, 1, "uint")
    left, top = max(box.left, 1), max(box.top, 1)
    width = min(box.left + box.width, overlap.width - 1) - left
    height = min(box.top + box.height, overlap.height - 1) - top
    if width <= 0 or height <= 0:
        return pyvips.Image.black(box.width, box.height)
    x, y = left - region.left, top - region.top
    centre = words.crop(x, y, width, height)
    equal = [
        centre == words.crop(x + dx, y + dy, width, height)
        for dx in (-1, 0, 1)
        for dy in (-1, 0, 1)
        if dx or dy
    ]
    many = pyvips.Image.sum(equal) > 2 * 255
    return many.embed(left - box.left, top - box.top, box.width, box.height)


class _Around:
    """RGBA bytes of both images around the box, with pixelmatch's anti-aliasing detector
    ("Anti-aliased Pixel and Intensity Slope Detector", V. Vysniauskas, 2009)."""

    def __init__(
        self, region: _Box, overlap: _Box, pixels_a: bytes, pixels_b: bytes, metric: Metric
    ) -> None:
        self.region = region
        self.overlap = overlap
        self.pixels_a = pixels_a
        self.pixels_b = pixels_b
        self.words_a = memoryview(pixels_a).cast("I")
        self.words_b = memoryview(pixels_b).cast("I")
        self.brightness = _brightness_yiq if metric == "yiq" else _brightness_oklab

    def antialiased(self, pixels: bytes, x1: int, y1: int) -> bool:
        """pixelmatch ``antialiased``: the pixel sits on an intensity ramp between a darkest
        and a brightest neighbour, one of which has 3+ equal siblings in both images."""
        region, overlap = self.region, self.overlap
        x0, y0 = max(x1 - 1, 0), max(y1 - 1, 0)
        x2, y2 = min(x1 + 1, overlap.width - 1), min(y1 + 1, overlap.height - 1)
        centre = ((y1 - region.top) * region.width + x1 - region.left) * 4
        index = (y1 * overlap.width + x1) * 4  # pixelmatch's byte offset, for its backgrounds
        zeroes = 1 if x1 in (x0, x2) or y1 in (y0, y2) else 0
        low = high = 0.0
        low_at = high_at = (0, 0)
        for x in range(x0, x2 + 1):  # columns outside, as pixelmatch, so ties resolve alike
            for y in range(y0, y2 + 1):
                if x == x1 and y == y1:
                    continue
                other = ((y - region.top) * region.width + x - region.left) * 4
                delta = self.brightness(pixels, centre, other, index)
                if delta == 0:
                    zeroes += 1
                    if zeroes > 2:  # 3+ equal siblings: definitely not anti-aliasing
                        return False
                elif delta < low:
                    low, low_at = delta, (x, y)
                elif delta > high:
                    high, high_at = delta, (x, y)
        if low == 0 or high == 0:  # not between a darker and a brighter neighbour
            return False
        return (self.has_many_siblings(self.words_a, *low_at) and self.has_many_siblings(self.words_b, *low_at)) or (
            self.has_many_siblings(self.words_a, *high_at)
            and self.has_many_siblings(self.words_b, *high_at)
        )

    def has_many_siblings(self, words: memoryview, x1: int, y1: int) -> bool:
        """pixelmatch ``hasManySiblings``: 3+ neighbours of identical RGBA; the image border
        counts as one."""
        region, overlap = self.region, self.overlap
        x0, y0 = max(x1 - 1, 0), max(y1 - 1, 0)
        x2, y2 = min(x1 + 1, overlap.width - 1), min(y1 + 1, overlap.height - 1)
        value = words[(y1 - region.top) * region.width + x1 - region.left]
        zeroes = 1 if x1 in (x0, x2) or y1 in (y0, y2) else 0
        for y in range(y0, y2 + 1):
            row = (y - region.top) * region.width - region.left
            for x in range(x0, x2 + 1):
                if (x != x1 or y != y1) and words[row + x] == value:
                    zeroes += 1
                    if zeroes > 2:
                        return True
        return False


def _brightness_yiq(pixels: bytes, centre: int, other: int, index: int) -> float:
    """pixelmatch 7 ``colorDelta(..., yOnly)``: luma difference, semi-transparent pixels
    blended over its pattern at the centre pixel's offset ``index``."""
    r1, g1, b1, a1 = pixels[centre : centre + 4]
    r2, g2, b2, a2 = pixels[other : other + 4]
    dr: float = r1 - r2
    dg: float = g1 - g2
    db: float = b1 - b2
    da = a1 - a2
    if not dr and not dg and not db and not da:
        return 0
    if a1 < 255 or a2 < 255:
        rb = 48 + 159 * (index % 2)
        gb = 48 + 159 * (math.floor(index / 1.618033988749895) % 2)
        bb = 48 + 159 * (math.floor(index / 2.618033988749895) % 2)
        dr = (r1 * a1 - r2 * a2 - rb * da) / 255
        dg = (g1 * a1 - g2 * a2 - gb * da) / 255
        db = (b1 * a1 - b2 * a2 - bb * da) / 255
    return dr * LUMA[0] + dg * LUMA[1] + db * LUMA[2]


def _brightness_oklab(pixels: bytes, centre: int, other: int, index: int) -> float:
    """pixelmatch 8 ``brightnessDelta``: luma difference over white; when luma cancels out
    but alpha differs, half the alpha difference gives the ramp direction."""
    r1, g1, b1, a1 = pixels[centre : centre + 4]
    r2, g2, b2, a2 = pixels[other : other + 4]
    dr: float = r1 - r2
    dg: float = g1 - g2
    db: float = b1 - b2
    da = a1 - a2
    if not dr and not dg and not db and not da:
        return 0
    if a1 < 255 or a2 < 255:
        dr = (r1 * a1 - r2 * a2 - 255 * da) / 255
        dg = (g1 * a1 - g2 * a2 - 255 * da) / 255
        db = (b1 * a1 - b2 * a2 - 255 * da) / 255
        d = dr * LUMA[0] + dg * LUMA[1] + db * LUMA[2]
        return da / 2 if d == 0 and da else d
    return dr * LUMA[0] + dg * LUMA[1] + db * LUMA[2]


# --- the diff PNG ------------------------------------------------------------------------


def _write_diff(
    path: Path,
    base: pyvips.Image,
    fresh: pyvips.Image,
    counted: pyvips.Image | None,
    box: _Box | None,
    overlap: _Box,
) -> None:
    """pixelmatch's output: differing pixels red over the baseline in grey, faded to 10% over
    white (``drawGrayPixel``); the area outside the overlap is all red. Written to a temporary
    file and renamed, so a reader never sees half a PNG."""
    width, height = max(base.width, fresh.width), max(base.height, fresh.height)
    rgb = base.extract_band(0, n=3).cast("double")
    luma = rgb.recomb([list(LUMA)])
    grey = ((luma - 255) * base.extract_band(3) * (DIFF_FADE / 255) + 255).cast("uchar")
    grey = grey.embed(0, 0, width, height, extend="white")
    red = pyvips.Image.black(overlap.width, overlap.height)
    if counted is not None and box is not None:
        red = counted.embed(box.left, box.top, overlap.width, overlap.height)
    red = red.embed(0, 0, width, height, extend="white")
    image = (red > 0).ifthenelse([255, 0, 0], grey.bandjoin([grey, grey]))
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".png", dir=path.parent)
    os.close(handle)
    try:
        image.copy(interpretation="srgb").pngsave(temporary, compression=PNG_COMPRESSION)
        os.replace(temporary, path)
    except (pyvips.Error, OSError) as error:
        Path(temporary).unlink(missing_ok=True)
        raise ImageError(f"{path}: cannot write the diff PNG ({error})") from error
