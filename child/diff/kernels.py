"""The diff's per-pixel loops, compiled: the tests that look at a pixel's 3x3 neighbourhood,
and the diff image.

pixelmatch's anti-aliasing detector and our finer pass each ask, for every pixel that failed
the colour test (a few hundred thousand on a changed 4K page), about its 8 neighbours and
theirs. Written as array operations over the changed pixels, that is a dozen gathers of
8 x pixels elements each, and those gathers took three quarters of a diff's time; written as
the loops of pixelmatch's ``index.js``, compiled by numba, the same tests are a few memory
reads per pixel. So the code below reads like pixelmatch, one pixel at a time. The diff image
is a loop too: one pass writing each pixel, where array operations made several.

The functions are compiled when this module is imported, for the one signature each is called
with, and the machine code is cached beside the module (``cache=True``): the fork server
imports the diff before it forks, so children inherit the compiled code, and a fresh process
loads it from the cache instead of compiling again. Compiling takes 10 to 30 s, so the first
start after an install (or an upgrade) says it does, before it begins. They start no thread
(``nogil`` only lets libvips' threads run alongside).

Images are 1-D arrays of 32-bit words (one pixel's RGBA bytes, little-endian), pixel
``i = y * width + x``, as ``compare._Overlap`` holds them. Floating-point work is float64 in the
order the numpy formulas of pixelmatch's port used (no fast-math, no fused multiply-add), so
that deltas are bit-identical to pixelmatch's JavaScript numbers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

import numba
import numpy as np
import numpy.typing as npt
import structlog
from numba.core import event

log = structlog.get_logger(__name__)

Words = npt.NDArray[np.uint32]
Indices = npt.NDArray[np.intp]
Flags = npt.NDArray[np.bool_]
Floats = npt.NDArray[np.float64]
Pixels = npt.NDArray[np.uint8]

# Rec.601 luma weights that pixelmatch uses for brightness (Kotsarenko and Ramos 2009).
LUMA = (0.29889531, 0.58662247, 0.11448223)
# OKLab (Ottosson 2020): differences of cube-rooted LMS -> a, b.
OKLAB_A = (1.9779984951, 2.4285922050, 0.4505937099)  # a = c0 * dl - c1 * dm + c2 * ds
OKLAB_B = (0.0259040371, 0.7827717662, 0.8086757660)  # b = c0 * dl + c1 * dm - c2 * ds
# Neighbours within this many levels in every channel are alike: a gradient (a level or two a
# pixel, dithered) is as flat as a plain fill, where pixelmatch's exact equality sees no flat
# pixel in it. Measured on the labelled screenshots (tests/fixtures/screens): 2 to 4 all hold.
FLAT_LEVELS = 3
# A change that moving an edge by less than this many pixels explains is anti-aliasing: a
# pixel's coverage, and so its colour between the two sides of the edge, moves by at most the
# shift. Shapes moved by 0.3 px are then unchanged, text moved by 0.5 px is not (its glyphs
# are re-rasterised, not shifted). 0.3 to 0.5 all hold on the labelled screenshots.
SHIFT_PIXELS = 0.4

_Function = TypeVar("_Function", bound=Callable[..., Any])


class _FirstCompile(event.Listener):
    """Says once, as numba begins compiling, that this start is slow and the next ones will not
    be: otherwise a new user's first `run` or `demo` sits silent for 20 s. numba compiles only
    when its cache has no machine code for the function (a new install, a changed module,
    another numba), so a start that loads the cache says nothing.

    A warning, so that it shows at the demo's level too; a host that says it at every start
    (a container whose cache folder is not kept) is worth a warning anyway.
    """

    def __init__(self) -> None:
        self.said = False

    def on_start(self, _event: event.Event) -> None:
        if not self.said:
            self.said = True
            log.warning("compiling the diff's loops once (about 20 s); later starts reuse them")

    def on_end(self, _event: event.Event) -> None:
        pass


_FIRST_COMPILE = _FirstCompile()


def _compiled(signature: str) -> Callable[[_Function], _Function]:
    """``numba.njit`` for one signature, compiled at import and cached on disk, typed as the
    Python function it compiles."""

    def compile_(function: _Function) -> _Function:
        with event.install_listener("numba:compile", _FIRST_COMPILE):
            return cast(_Function, numba.njit(signature, cache=True, nogil=True)(function))

    return compile_


def _inline(function: _Function) -> _Function:
    """A helper the compiled functions call, compiled into each of them."""
    return cast(_Function, numba.njit(inline="always")(function))


@_inline
def _channel(word: np.uint32, shift: int) -> int:
    return int((word >> shift) & 255)


Neighbours = tuple[int, int, int, int, int, int, int, int]


@_inline
def _neighbours(pixel: int, width: int, height: int) -> tuple[Neighbours, int]:
    """The 8 neighbours of ``pixel`` in pixelmatch's scan order (columns outside, rows inside),
    and where pixelmatch starts its count of equal neighbours (1 on the border).

    pixelmatch skips neighbours outside the image. Here they are the pixel itself, which makes
    each of them an identical neighbour, with a brightness delta of exactly 0 (neither darker
    nor brighter) and inside the range of any block that holds the pixel; so the count starts
    lower by one for each. A fixed list instead of pixelmatch's clamped loops lets the compiler
    unroll every loop over the neighbours.
    """
    y, x = divmod(pixel, width)
    left, right, up, down = x > 0, x < width - 1, y > 0, y < height - 1
    if left and right and up and down:
        return (
            pixel - width - 1,
            pixel - 1,
            pixel + width - 1,
            pixel - width,
            pixel + width,
            pixel - width + 1,
            pixel + 1,
            pixel + width + 1,
        ), 0
    neighbours = (
        pixel - width - 1 if left and up else pixel,
        pixel - 1 if left else pixel,
        pixel + width - 1 if left and down else pixel,
        pixel - width if up else pixel,
        pixel + width if down else pixel,
        pixel - width + 1 if right and up else pixel,
        pixel + 1 if right else pixel,
        pixel + width + 1 if right and down else pixel,
    )
    outside = 0
    for neighbour in neighbours:
        outside += neighbour == pixel
    return neighbours, 1 - outside


@_inline
def _brightness(words: Words, centre: int, other: int, yiq: bool) -> float:
    """Luma difference between pixel ``centre`` and its neighbour ``other``.

    yiq: pixelmatch 7 ``colorDelta(..., yOnly)``, semi-transparent pixels blended over its
    pattern at the centre pixel: R 48, G and B 48 or 207 from the byte offset ``k = 4i``
    (``(k / phi | 0) % 2`` and ``(k / phi**2 | 0) % 2``). oklab: pixelmatch 8
    ``brightnessDelta``, blended over white; when luma cancels out but alpha differs, half the
    alpha difference. Each channel's difference is ``(c1 * a1 - c2 * a2 - bg * (a1 - a2)) /
    255``, an exact integer over 255, which is exactly ``c1 - c2`` for opaque pixels. Pixels
    equal in RGBA give exactly 0, as pixelmatch's early return does.
    """
    w1, w2 = words[centre], words[other]
    if w1 == w2:
        return 0.0
    a1, a2 = _channel(w1, 24), _channel(w2, 24)
    if a1 == 255 and a2 == 255:  # the formula below, without its divisions: exactly c1 - c2
        luma = 0.0
        for channel in range(3):
            luma += (_channel(w1, 8 * channel) - _channel(w2, 8 * channel)) * LUMA[channel]
        return luma
    if yiq:
        k = centre * 4.0
        background = (
            48,
            48 + 159 * int(np.floor(k / 1.618033988749895) % 2),
            48 + 159 * int(np.floor(k / 2.618033988749895) % 2),
        )
    else:
        background = (255, 255, 255)
    luma = 0.0
    for channel in range(3):  # pixelmatch's ``rgb2y``, added in its order
        c1, c2 = _channel(w1, 8 * channel), _channel(w2, 8 * channel)
        luma += (c1 * a1 - c2 * a2 - background[channel] * (a1 - a2)) / 255 * LUMA[channel]
    if not yiq and luma == 0 and a1 != a2:
        return (a1 - a2) / 2
    return luma


@_inline
def _slot(word: np.uint32, size: int) -> int:
    """A hash of a word into a table of ``size`` (a power of 2) slots."""
    mixed = int(word) ^ (int(word) >> 16)
    mixed = (mixed * 0x45D9F3B) ^ ((mixed * 0x45D9F3B) >> 16)
    return mixed & (size - 1)


@_compiled("Tuple((uint32[::1], int64[::1]))(uint32[::1])")
def distinct(words: Words) -> tuple[Words, Indices]:
    """``np.unique(words)`` and the row of each word in it (``searchsorted``), from one pass
    through a hash table instead of a sort and a binary search per word: a changed 4K page has
    a million words and a few hundred distinct colours. Open addressing, linear probing, the
    table doubled whenever it is half full."""
    found = np.empty(words.size, np.uint32)  # in order of first appearance
    rows = np.empty(words.size, np.int64)
    size, count = 1024, 0
    keys, slots = np.empty(size, np.uint32), np.full(size, -1, np.int64)
    for n in range(words.size):
        word = words[n]
        if n and word == words[n - 1]:  # a run of one colour
            rows[n] = rows[n - 1]
            continue
        slot = _slot(word, size)
        while slots[slot] >= 0 and keys[slot] != word:
            slot = (slot + 1) & (size - 1)
        if slots[slot] < 0:
            keys[slot], slots[slot], found[count] = word, count, word
            count += 1
        rows[n] = slots[slot]
        if 2 * count > size:
            size *= 2
            keys, slots = np.empty(size, np.uint32), np.full(size, -1, np.int64)
            for row in range(count):
                slot = _slot(found[row], size)
                while slots[slot] >= 0:
                    slot = (slot + 1) & (size - 1)
                keys[slot], slots[slot] = found[row], row
    # Sorted, as np.unique returns them, so that the conversion sees the same array.
    order = np.argsort(found[:count])
    rank = np.empty(count, np.int64)
    rank[order] = np.arange(count)
    for n in range(words.size):
        rows[n] = rank[rows[n]]
    return found[order], rows


@_compiled("UniTuple(float64[::1], 2)(float64[:, ::1], float64[::1], int64[::1], int64[::1])")
def hyab_terms(lms: Floats, lr: Floats, rows1: Indices, rows2: Indices) -> tuple[Floats, Floats]:
    """pixelmatch 8 ``colorDelta``'s two terms for each pair of rows of cube-rooted LMS
    (``lms``) and toe-corrected lightness (``lr``): ``|dLr|`` and ``da**2 + db**2``. One pass
    over the pixels, where array operations made a dozen."""
    lightness, chroma = np.empty(rows1.size), np.empty(rows1.size)
    for n in range(rows1.size):
        one, two = rows1[n], rows2[n]
        dl, dm, ds = lms[one, 0] - lms[two, 0], lms[one, 1] - lms[two, 1], lms[one, 2] - lms[two, 2]
        da = OKLAB_A[0] * dl - OKLAB_A[1] * dm + OKLAB_A[2] * ds
        db = OKLAB_B[0] * dl + OKLAB_B[1] * dm - OKLAB_B[2] * ds
        lightness[n] = abs(lr[one] - lr[two])
        chroma[n] = da * da + db * db
    return lightness, chroma


@_inline
def _many_siblings(words: Words, width: int, height: int, pixel: int) -> bool:
    """pixelmatch ``hasManySiblings``: 3+ neighbours of identical RGBA, the border counting
    as one."""
    neighbours, zeroes = _neighbours(pixel, width, height)
    for neighbour in neighbours:
        zeroes += words[neighbour] == words[pixel]
    return zeroes > 2


@_inline
def _antialiased(
    image: Words, a32: Words, b32: Words, width: int, height: int, pixel: int, yiq: bool
) -> bool:
    """pixelmatch ``antialiased`` ("Anti-aliased Pixel and Intensity Slope Detector",
    V. Vysniauskas, 2009) in ``image``: the pixel sits on an intensity ramp between a darkest
    and a brightest neighbour (the first in scan order, columns outside, wins a tie), one of
    which has 3+ identical siblings in both images."""
    neighbours, zeroes = _neighbours(pixel, width, height)
    darkest, brightest = 0.0, 0.0
    dark, bright = -1, -1
    for neighbour in neighbours:
        delta = _brightness(image, pixel, neighbour, yiq)
        if delta == 0:
            zeroes += 1
            if zeroes > 2:
                return False
        elif delta < darkest:
            darkest, dark = delta, neighbour
        elif delta > brightest:
            brightest, bright = delta, neighbour
    if dark < 0 or bright < 0:
        return False
    return (
        _many_siblings(a32, width, height, dark) and _many_siblings(b32, width, height, dark)
    ) or (_many_siblings(a32, width, height, bright) and _many_siblings(b32, width, height, bright))


@_compiled("boolean[::1](uint32[::1], uint32[::1], int64, int64, int64[::1], boolean)")
def antialiased_in_either(
    a32: Words, b32: Words, width: int, height: int, pixels: Indices, yiq: bool
) -> Flags:
    """pixelmatch's ``antialiased(img1, ...) || antialiased(img2, ...)`` for each pixel."""
    either = np.empty(pixels.size, np.bool_)
    for n in range(pixels.size):
        pixel = pixels[n]
        either[n] = _antialiased(a32, a32, b32, width, height, pixel, yiq) or _antialiased(
            b32, a32, b32, width, height, pixel, yiq
        )
    return either


@_inline
def _alike(words: Words, width: int, height: int, pixel: int) -> bool:
    """3+ neighbours within ``FLAT_LEVELS`` of the pixel in every channel, the border counting
    as one (as pixelmatch counts siblings)."""
    neighbours, alike = _neighbours(pixel, width, height)
    for neighbour in neighbours:
        close = True
        for shift in range(0, 32, 8):
            level = _channel(words[neighbour], shift)
            close &= abs(level - _channel(words[pixel], shift)) <= FLAT_LEVELS
        alike += close
    return alike > 2


@_compiled("boolean[::1](uint32[::1], uint32[::1], int64, int64, int64[::1])")
def alike_in_both(a32: Words, b32: Words, width: int, height: int, pixels: Indices) -> Flags:
    """Flat in both images: ``_alike`` in image 1 and in image 2."""
    both = np.empty(pixels.size, np.bool_)
    for n in range(pixels.size):
        both[n] = _alike(a32, width, height, pixels[n]) and _alike(b32, width, height, pixels[n])
    return both


@_compiled("boolean[::1](uint32[::1], uint32[::1], int64, int64, int64[::1])")
def shifted(a32: Words, b32: Words, width: int, height: int, pixels: Indices) -> Flags:
    """Whether a shift of less than ``SHIFT_PIXELS`` explains each pixel's change: in every
    channel, each image's value lies within the range of the other's 3x3 block (give or take
    ``FLAT_LEVELS``), and the largest change of a channel is at most ``SHIFT_PIXELS`` times
    the local contrast (the largest range of a channel over both blocks). A recoloured or
    moved-by-a-pixel edge fails one or the other."""
    explained = np.empty(pixels.size, np.bool_)
    for n in range(pixels.size):
        pixel = pixels[n]
        neighbours, _ = _neighbours(pixel, width, height)
        within = True
        contrast, change = 0, 0
        for shift in range(0, 32, 8):
            value1, value2 = _channel(a32[pixel], shift), _channel(b32[pixel], shift)
            low1, high1, low2, high2 = value1, value1, value2, value2
            for neighbour in neighbours:
                level1, level2 = _channel(a32[neighbour], shift), _channel(b32[neighbour], shift)
                low1, high1 = min(low1, level1), max(high1, level1)
                low2, high2 = min(low2, level2), max(high2, level2)
            within = (
                within
                and low1 - FLAT_LEVELS <= value2 <= high1 + FLAT_LEVELS
                and low2 - FLAT_LEVELS <= value1 <= high2 + FLAT_LEVELS
            )
            contrast = max(contrast, max(high1, high2) - min(low1, low2))
            change = max(change, abs(value2 - value1))
        explained[n] = within and change <= SHIFT_PIXELS * contrast
    return explained


@_compiled(
    "uint8[:, :, ::1](uint32[::1], uint8[::1], int64, int64, int64[::1], int64, int64,"
    " float64[::1], float64[::1])"
)
def diff_image(
    a32: Words,
    grey: Pixels,
    width: int,
    height: int,
    counted: Indices,
    union_width: int,
    union_height: int,
    grey_red_green: Floats,
    grey_blue: Floats,
) -> Pixels:
    """pixelmatch's diff image as RGB rows: the counted pixels (numbered over the ``width`` x
    ``height`` overlap) and everything outside the overlap red, the rest the baseline's faded
    grey (``drawGrayPixel``). That grey is ``grey`` when given (a baseline that is not opaque,
    computed by libvips) or else, for an opaque baseline ``a32``, a table by red and green (the
    low 16 bits of the word) plus one by blue, truncated to a byte (``compare.GREY_BLUE``),
    once for each run of one colour, most of a screenshot."""
    image = np.empty((union_height, union_width, 3), np.uint8)
    image[height:, :, 0], image[:, width:, 0] = 255, 255  # outside the overlap: red
    image[height:, :, 1:], image[:, width:, 1:] = 0, 0
    last, level = -1, np.uint8(0)  # no colour yet
    for y in range(height):
        for x in range(width):
            if grey.size:
                level = grey[y * width + x]
            elif a32[y * width + x] != last:
                last = a32[y * width + x]
                level = np.uint8(grey_red_green[last & 0xFFFF] + grey_blue[(last >> 16) & 0xFF])
            image[y, x, 0], image[y, x, 1], image[y, x, 2] = level, level, level
    for pixel in counted:
        y, x = divmod(pixel, width)
        image[y, x, 0], image[y, x, 1], image[y, x, 2] = 255, 0, 0
    return image
