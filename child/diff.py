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
6. pixelmatch's anti-aliasing detector (Vysniauskas 2009), also vectorised over the box, and
   applied to the pixels that fail the colour test;
7. optionally (on by default) a finer ``flat_threshold`` where both images are flat.

Images of different sizes are ``changed``: the overlap is compared and the rest of the union
box ``max(w) x max(h)`` counts as differing.

Defaults: ``metric="oklab"``, ``threshold=0.1`` (pixelmatch 8's), ``flat_threshold=0.05``.
A one-step colour-token change such as Tailwind's ``#2563eb`` -> ``#1d4ed8`` is a HyAB
distance of 0.072 and a YIQ threshold equivalent of 0.068, so pixelmatch's 0.1 misses it in
both metrics. Lowering the threshold everywhere does not work: re-rasterised text edges (a
different text gamma) then leave dozens of counted pixels at any threshold below 0.072,
because the detector cannot recognise every edge pixel. So the finer threshold applies only
to pixels with 3+ identical neighbours in both images, which pixelmatch's own detector rules
out as anti-aliasing: a recoloured button face is caught, edge noise is not. With
``flat_threshold=None`` the counts are pixelmatch's exactly.

libvips operations run only inside functions: the fork server imports this module but must
never start a libvips operation in the parent.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pyvips

Metric = Literal["yiq", "oklab"]
# A colour test over a box: threshold -> 255 where a pixel's colour distance exceeds it.
ColourTest = Callable[[float], pyvips.Image]

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
    threshold: float = 0.1
    flat_threshold: float | None = 0.05  # finer threshold where both images are flat; None: off
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
    """255 where a pixel of ``box`` counts as differing: it fails the colour test and, unless
    ``count_aa``, is not anti-aliasing in either image (pixelmatch's main loop); or it fails
    ``flat_threshold`` where both images are flat (3+ identical neighbours), which pixelmatch's
    detector itself rules out as anti-aliasing."""
    a_box = a.crop(box.left, box.top, box.width, box.height)
    b_box = b.crop(box.left, box.top, box.width, box.height)
    test = _yiq_test if options.metric == "yiq" else _oklab_test
    fails = test(a_box, b_box, box, overlap.width)
    counted = fails(options.threshold)
    if options.count_aa and options.flat_threshold is None:
        return counted
    around = _Around(a, b, box, overlap, options.metric)
    flat = around.flat()
    if not options.count_aa:
        counted = around.drop_antialiased(counted)
    if options.flat_threshold is not None:
        counted = counted | (fails(options.flat_threshold) & flat)
    return counted.copy_memory()  # read twice, to count and to draw: computed once


def _count(mask: pyvips.Image) -> int:
    """Pixels set in a 0/255 mask, from its mean: one pass, no copy."""
    area = int(mask.width) * int(mask.height)
    return round(float(mask.avg()) * area / 255)


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


def _yiq_test(a_box: pyvips.Image, b_box: pyvips.Image, box: _Box, width: int) -> ColourTest:
    """pixelmatch 7 ``colorDelta``: squared YIQ distance (Kotsarenko and Ramos 2009) above
    ``35215 * threshold**2``; semi-transparent pixels blend over its fixed pattern."""
    background = None if _is_opaque(a_box, b_box) else _yiq_background(box, width)
    rgb1, _ = _blended(a_box, background)
    rgb2, _ = _blended(b_box, background)
    d = rgb1 - rgb2
    y = d.recomb([list(LUMA)])
    i = d.recomb([[0.59597799, -0.27417610, -0.32180189]])
    q = d.recomb([[0.21147017, -0.52261711, 0.31114694]])
    delta = (0.5053 * y * y + 0.299 * i * i + 0.1957 * q * q).copy_memory()
    return lambda threshold: delta > YIQ_MAX_DELTA * threshold * threshold


def _yiq_background(box: _Box, width: int) -> pyvips.Image:
    """pixelmatch 7's pattern at byte offset ``k = 4i``: R 48 (``k % 2`` is always 0), G and B
    48 or 207 from ``floor(k / phi) % 2`` and ``floor(k / phi**2) % 2``."""
    k = _pixel_index(box, width) * 4
    green = 48 + 159 * ((k / 1.618033988749895).floor() % 2)
    blue = 48 + 159 * ((k / 2.618033988749895).floor() % 2)
    return green.new_from_image(48).bandjoin([green, blue])


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


def _oklab_test(a_box: pyvips.Image, b_box: pyvips.Image, box: _Box, width: int) -> ColourTest:
    """pixelmatch 8 ``colorDelta``: HyAB distance ``|dLr| + sqrt(da**2 + db**2)`` (Abasi et
    al. 2019) in OKLab above ``threshold`` (1 is black against white)."""
    background = None if _is_opaque(a_box, b_box) else _checkerboard(box, width)
    lms1, toe1 = _oklab(_blended(a_box, background)[0])
    lms2, toe2 = _oklab(_blended(b_box, background)[0])
    chroma = (lms1 - lms2).recomb(OKLAB_AB)
    # Both terms are kept so that two thresholds cost one conversion.
    terms = (toe1 - toe2).abs().bandjoin(chroma.extract_band(0) ** 2 + chroma.extract_band(1) ** 2)
    terms = terms.copy_memory()

    def fails(threshold: float) -> pyvips.Image:
        rest = threshold - terms.extract_band(0)
        return (rest < 0) | (terms.extract_band(1) > rest * rest)

    return fails


def _luma(image: pyvips.Image) -> pyvips.Image:
    return image.extract_band(0, n=3).cast("double").recomb([list(LUMA)]).copy_memory()


# --- anti-aliasing, on the pixels that fail the colour test only ---------------------------


# The 8 neighbours in pixelmatch's scan order (columns outside), so that ties between equally
# dark or bright neighbours resolve to the same one.
NEIGHBOURS = [(dx, dy) for dx in (-1, 0, 1) for dy in (-1, 0, 1) if dx or dy]


class _Around:
    """Both images around the box, padded so that every neighbour lookup is a crop, with
    pixelmatch's anti-aliasing detector ("Anti-aliased Pixel and Intensity Slope Detector",
    V. Vysniauskas, 2009) evaluated for all box pixels at once as libvips images.

    Pixelmatch skips neighbours outside the image and counts the image border as one equal
    sibling; here the padding carries a validity band that does the same.
    """

    PAD = 2  # the detector reads neighbours of neighbours

    def __init__(
        self, a: pyvips.Image, b: pyvips.Image, box: _Box, overlap: _Box, metric: Metric
    ) -> None:
        self.box = box
        self.overlap = overlap
        self.metric = metric
        pad = self.PAD
        left, top = max(box.left - pad, 0), max(box.top - pad, 0)
        right = min(box.left + box.width + pad, overlap.width)
        bottom = min(box.top + box.height + pad, overlap.height)
        self.origin = (left - pad, top - pad)  # overlap coordinates of the padded images' 0, 0
        width, height = right - left + 2 * pad, bottom - top + 2 * pad

        regions = [image.crop(left, top, right - left, bottom - top) for image in (a, b)]
        self.a, self.b = (region.embed(pad, pad, width, height) for region in regions)
        # Opaque regions (most screenshots) take luma once per pixel instead of per pair.
        opaque = all(region.extract_band(3).min() == 255 for region in regions)
        self.luma = {"a": _luma(self.a), "b": _luma(self.b)} if opaque else {}
        inside = pyvips.Image.black(right - left, bottom - top) + 255
        self.valid = inside.cast("uchar").embed(pad, pad, width, height)
        # What semi-transparent pixels are blended over for brightness, per centre pixel.
        if metric == "yiq":
            self.background = _yiq_background(box, overlap.width)
        else:
            self.background = pyvips.Image.black(box.width, box.height, bands=3) + 255

    def at(self, image: pyvips.Image, area: _Box, dx: int = 0, dy: int = 0) -> pyvips.Image:
        """``image`` over ``area`` (overlap coordinates) shifted by one neighbour step."""
        x, y = area.left - self.origin[0] + dx, area.top - self.origin[1] + dy
        return image.crop(x, y, area.width, area.height)

    def words(self, image: pyvips.Image) -> pyvips.Image:
        """RGBA as one 32-bit word per pixel, so that equality is one comparison."""
        return image.copy(format="uint", bands=1)

    def on_border(self, area: _Box) -> pyvips.Image:
        """255 on the image border, where pixelmatch starts counting equal siblings at 1."""
        valid = [self.at(self.valid, area, dx, dy) for dx, dy in NEIGHBOURS]
        return pyvips.Image.sum(valid) < 8 * 255

    def many_siblings(self, image: pyvips.Image, area: _Box) -> pyvips.Image:
        """pixelmatch ``hasManySiblings``: 255 where a pixel has 3+ neighbours of identical
        RGBA, the border counting as one."""
        words = self.words(image)
        centre = self.at(words, area)
        equal = [
            (centre == self.at(words, area, dx, dy)) & self.at(self.valid, area, dx, dy)
            for dx, dy in NEIGHBOURS
        ]
        return pyvips.Image.sum([*equal, self.on_border(area)]) > 2 * 255

    def flat(self) -> pyvips.Image:
        """255 where a box pixel has 3+ identical neighbours in both images: it cannot be
        anti-aliased, since ``antialiased`` returns early on 3 equal siblings."""
        return self.many_siblings(self.a, self.box) & self.many_siblings(self.b, self.box)

    def brightness(self, side: Literal["a", "b"], dx: int, dy: int) -> pyvips.Image:
        """Luma difference between each box pixel and one neighbour, 0 outside the image.

        yiq: pixelmatch 7 ``colorDelta(..., yOnly)``, semi-transparent pixels blended over its
        pattern at the centre pixel. oklab: pixelmatch 8 ``brightnessDelta``, blended over
        white; when luma cancels out but alpha differs, half the alpha difference.
        Pixels equal in RGBA give exactly 0 in both formulas, as pixelmatch's early return;
        opaque pixels take the difference of lumas, which is the same sum regrouped.
        """
        image = self.a if side == "a" else self.b
        luma = self.luma.get(side)
        if luma is not None:
            d = self.at(luma, self.box) - self.at(luma, self.box, dx, dy)
            return self.at(self.valid, self.box, dx, dy).ifthenelse(d, 0)
        centre = self.at(image, self.box).cast("double")
        other = self.at(image, self.box, dx, dy).cast("double")
        a1, a2 = centre.extract_band(3), other.extract_band(3)
        rgb1, rgb2 = centre.extract_band(0, n=3), other.extract_band(0, n=3)
        d = ((rgb1 * a1 - rgb2 * a2 - self.background * (a1 - a2)) / 255).recomb([list(LUMA)])
        if self.metric == "oklab":
            d = ((d == 0) & (a1 != a2)).ifthenelse((a1 - a2) / 2, d)
        return self.at(self.valid, self.box, dx, dy).ifthenelse(d, 0)

    def antialiased(self, side: Literal["a", "b"], both_many: pyvips.Image) -> pyvips.Image:
        """pixelmatch ``antialiased``: 255 where the pixel sits on an intensity ramp between
        a darkest and a brightest neighbour, one of which has 3+ equal siblings in both
        images (``both_many``, over the box grown by 1)."""
        deltas = [self.brightness(side, dx, dy) for dx, dy in NEIGHBOURS]
        zeroes = pyvips.Image.sum(
            [
                (d == 0) & self.at(self.valid, self.box, dx, dy)
                for d, (dx, dy) in zip(deltas, NEIGHBOURS, strict=True)
            ]
            + [self.on_border(self.box)]
        )
        darkest, brightest = deltas[0], deltas[0]
        for delta in deltas[1:]:
            darkest, brightest = darkest.minpair(delta), brightest.maxpair(delta)
        # Materialised: each is compared with all 8 deltas below, and libvips would
        # otherwise recompute the whole chain for every comparison.
        darkest, brightest = darkest.copy_memory(), brightest.copy_memory()
        settled_dark = settled_bright = pyvips.Image.black(self.box.width, self.box.height)
        for delta, (dx, dy) in reversed(
            list(zip(deltas, NEIGHBOURS, strict=True))
        ):  # first one wins
            many = both_many.crop(1 + dx, 1 + dy, self.box.width, self.box.height)
            settled_dark = (delta == darkest).ifthenelse(many, settled_dark)
            settled_bright = (delta == brightest).ifthenelse(many, settled_bright)
        return (
            (zeroes <= 2 * 255) & (darkest < 0) & (brightest > 0) & (settled_dark | settled_bright)
        )

    def drop_antialiased(self, fails: pyvips.Image) -> pyvips.Image:
        """Keep the failing pixels that are anti-aliasing in neither image."""
        grown = _Box(self.box.left - 1, self.box.top - 1, self.box.width + 2, self.box.height + 2)
        both_many = (
            self.many_siblings(self.a, grown) & self.many_siblings(self.b, grown)
        ).copy_memory()
        aa = self.antialiased("a", both_many) | self.antialiased("b", both_many)
        return fails & (aa == 0)


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
