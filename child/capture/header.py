"""The size of a PNG from the first bytes of its file, for an image the child need not decode.

An image with its baseline's bytes is `unchanged` without decoding, yet its result carries its
size. libvips would read the header lazily too, but opening a file through it builds, caches
and runs an operation: a millisecond or more per file, most of the time a byte-identical
snapshot took. Every PNG starts with its signature and then its IHDR chunk, whose first fields
are the width and the height (PNG specification, sections 5.2, 5.6 and 11.2.2), so the first
24 bytes say it.
"""

from __future__ import annotations

import struct
from pathlib import Path

from child.diff.compare import ImageError

#: Signature, IHDR's length (always 13) and type, width, height: big-endian, as PNG is.
PNG_HEADER = struct.Struct(">8sI4sII")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: The largest width or height a PNG may state (PNG specification, section 11.2.2).
MAX_PNG_SIDE = 2**31 - 1


def png_size(path: Path, max_pixels: int) -> tuple[int, int]:
    """Width and height of the PNG at `path`, from its header; an `ImageError` for a file that
    does not start as a PNG does, or that states more than `max_pixels` pixels (an `OSError`
    when it cannot be read)."""
    with path.open("rb", buffering=0) as file:
        head = file.read(PNG_HEADER.size)
    if len(head) < PNG_HEADER.size:
        raise ImageError(f"{path}: not a PNG image (shorter than its header)")
    signature, length, kind, width, height = PNG_HEADER.unpack(head)
    if (signature, length, kind) != (PNG_SIGNATURE, 13, b"IHDR"):
        raise ImageError(f"{path}: not a PNG image (no PNG header)")
    if not (0 < width <= MAX_PNG_SIDE and 0 < height <= MAX_PNG_SIDE):
        raise ImageError(f"{path}: not a PNG image (a size of {width}x{height})")
    if width * height > max_pixels:
        raise ImageError(
            f"{path}: {width}x{height} is {width * height} pixels, above the limit of {max_pixels}"
        )
    return width, height
