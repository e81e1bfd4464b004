"""The frames of a capture page, which draws only when asked (`child.browser.pages`), and the
shots taken from them.

A frame is begun through the page's DevTools session (`HeadlessExperimental.beginFrame`): a look
at a story still rendering begins one without drawing (`advance`), so that what runs on the
page's frames (layout, resize and intersection observers, the animations' timeline) goes on as
it would at 60 Hz; a shot begins one that is drawn and read back (`shoot`). A begun frame is the
whole viewport, as the browser encodes it fastest: the child cuts the shot's area out of its
pixels and encodes the PNG it keeps itself (`Pixels.png`), once a story's shots agree, so the
shots in between are compared as pixels and never encoded. An area past the viewport (a whole
page, a root taller than the viewport) is drawn with the viewport stretched over it for that
frame, as `Page.captureScreenshot`'s `captureBeyondViewport` does.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

import pyvips
from playwright.sync_api import CDPSession

#: A box in pixels (of the page, or of an image): left, top, width, height.
Box = tuple[int, int, int, int]
#: zlib's level for the kept PNGs: its default, the size Chromium's own screenshots had.
PNG_COMPRESSION = 6


@dataclass(frozen=True)
class Pixels:
    """A shot's pixels, as the frame drew them: the bytes two shots that agree have the same
    of, row by row, `bands` bytes a pixel."""

    data: bytes
    width: int
    height: int
    bands: int

    def png(self) -> bytes:
        """The PNG the capture keeps: the same bytes for the same pixels, on every run."""
        image = pyvips.Image.new_from_memory(
            self.data, self.width, self.height, self.bands, "uchar"
        ).copy(interpretation="srgb")
        encoded: bytes = image.pngsave_buffer(
            compression=PNG_COMPRESSION, keep=pyvips.enums.ForeignKeep.NONE
        )
        return encoded


#: How many frames a shot may begin before one is drawn: the first after a resize is not (its
#: surface is being made at the new size).
MAX_FRAMES_A_SHOT = 5


def _drawn(devtools: CDPSession) -> str:
    """The screenshot of the first frame begun that is drawn (base64 PNG)."""
    for _ in range(MAX_FRAMES_A_SHOT):
        frame: dict[str, Any] = devtools.send(
            "HeadlessExperimental.beginFrame",
            {"screenshot": {"format": "png", "optimizeForSpeed": True}},
        )
        if "screenshotData" in frame:
            return str(frame["screenshotData"])
    raise NotDrawn(f"no frame was drawn in {MAX_FRAMES_A_SHOT} begun")


class NotDrawn(Exception):
    """The page drew none of the frames begun for a shot."""


def advance(devtools: CDPSession) -> None:
    """Begin a frame that is not drawn: the page's rendering steps run (layout, observers,
    the animations' timeline), and nothing is read back."""
    devtools.send("HeadlessExperimental.beginFrame", {"noDisplayUpdates": True})


def still(devtools: CDPSession) -> bool:
    """Whether the page drew the same pixels in two frames begun one after the other: the
    second reports no damage. The browser's display compositor redraws only what changed since
    the frame before (`hasDamage` says whether it redrew anything), so a frame with none is the
    one before it, pixel for pixel, and the page is as still as two shots that agree would show,
    for the price of two frames drawn and none read back. A frame with damage says nothing (a
    page may redraw the same pixels): the shots are then compared as before. A shot's own frame
    always reports damage (the read-back redraws), so it cannot be one of the two."""
    devtools.send("HeadlessExperimental.beginFrame", {})
    frame: dict[str, Any] = devtools.send("HeadlessExperimental.beginFrame", {})
    return frame.get("hasDamage") is False


def resize(devtools: CDPSession, width: int, height: int) -> None:
    """The page's viewport, in CSS pixels at scale 1, taken up at the next frame (begun here).
    Playwright's `set_viewport_size` waits for a frame that a page drawing only when asked
    never draws of itself."""
    devtools.send(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
    )
    advance(devtools)


def shoot(
    devtools: CDPSession, area: Box, scroll: tuple[int, int], viewport: tuple[int, int],
    beyond: tuple[int, int] | None,
) -> Pixels:  # fmt: skip
    """The pixels of `area` (page coordinates) in a frame begun now; `scroll` is where the
    viewport (`viewport`: its width and height) is scrolled to. With `beyond` (the page's width
    and height), the frame is drawn with the viewport stretched over the whole page, and put
    back after."""
    left, top, width, height = area
    if beyond is not None:
        resize(devtools, *beyond)
        scroll = (0, 0)
    try:
        data = _drawn(devtools)
    finally:
        if beyond is not None:
            resize(devtools, *viewport)
    drawn = pyvips.Image.new_from_buffer(base64.b64decode(data), "")
    cut = drawn.crop(left - scroll[0], top - scroll[1], width, height)
    return Pixels(cut.write_to_memory(), width, height, cut.bands)
