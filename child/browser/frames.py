"""The frames of a capture page, which draws only when asked (`child.browser.pages`), and the
shots taken from them.

A frame is begun through the page's DevTools session (`HeadlessExperimental.beginFrame`): a look
at a story still rendering begins one without drawing (`advance`), so that what runs on the
page's frames (layout, resize and intersection observers, the animations' timeline) goes on as
it would at 60 Hz; a shot begins one that is drawn and read back (`shoot`). A shot's frame
draws the shot's area alone (the viewport's visible part set to it, unseen by the page), and
the browser encodes it fastest: the child decodes its pixels and encodes the PNG it keeps
itself (`Pixels.png`), once a story's shots agree, so the shots in between are compared as
pixels and never encoded. An area past the viewport (a whole page, a root taller than the
viewport) is drawn with the viewport stretched over it for that frame, as
`Page.captureScreenshot`'s `captureBeyondViewport` does.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable
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


#: How many frames a shot may begin before one is drawn: the first after the viewport or its
#: visible part changes is not (its surface is being made at the new size), and on a loaded
#: machine the renderer may take a while to make it. The first few are begun back to back,
#: the rest `FRAME_WAIT_SECONDS` apart (a second in all).
MAX_FRAMES_A_SHOT = 50
BACK_TO_BACK_FRAMES = 3
FRAME_WAIT_SECONDS = 0.02


def _drawn(devtools: CDPSession, sleep: Callable[[float], None] = time.sleep) -> str:
    """The screenshot of the first frame begun that is drawn (base64 PNG)."""
    for begun in range(MAX_FRAMES_A_SHOT):
        if begun >= BACK_TO_BACK_FRAMES:
            sleep(FRAME_WAIT_SECONDS)
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
    always reports damage (the read-back redraws), so it cannot be one of the two. The first of
    the two must have drawn (damage): a frame not drawn at all (its surface not made yet, after
    the viewport changed) reports none either, and says nothing."""
    first: dict[str, Any] = devtools.send("HeadlessExperimental.beginFrame", {})
    second: dict[str, Any] = devtools.send("HeadlessExperimental.beginFrame", {})
    return first.get("hasDamage") is True and second.get("hasDamage") is False


def resize(devtools: CDPSession, width: int, height: int) -> None:
    """The page's viewport, in CSS pixels at scale 1, taken up at the next frame (begun here).
    Playwright's `set_viewport_size` waits for a frame that a page drawing only when asked
    never draws of itself."""
    _metrics(devtools, (width, height))
    advance(devtools)


def _metrics(devtools: CDPSession, size: tuple[int, int], visible: Box | None = None) -> None:
    """The viewport's size, and with `visible` the part of the page (its coordinates) that a
    frame draws: that part alone is drawn, read back and encoded, and the page does not see it
    (nothing lays out anew, nothing moves), as `Page.captureScreenshot`'s clip does."""
    metrics: dict[str, Any] = {
        "width": size[0], "height": size[1], "deviceScaleFactor": 1, "mobile": False,
    }  # fmt: skip
    if visible is not None:
        left, top, width, height = visible
        metrics["viewport"] = {"x": left, "y": top, "width": width, "height": height, "scale": 1}
    devtools.send("Emulation.setDeviceMetricsOverride", metrics)


def shoot(
    devtools: CDPSession, area: Box, viewport: tuple[int, int], beyond: tuple[int, int] | None
) -> Pixels:
    """The pixels of `area` (page coordinates) in a frame begun now, which draws that area
    alone; `viewport` is the viewport's width and height. With `beyond` (the page's width and
    height), the frame is drawn with the viewport stretched over the whole page, and put back
    after."""
    if beyond is not None:
        resize(devtools, *beyond)
    _metrics(devtools, beyond or viewport, visible=area)
    try:
        data = _drawn(devtools)
    finally:
        if beyond is not None:
            resize(devtools, *viewport)
        else:
            _metrics(devtools, viewport)
    drawn = pyvips.Image.new_from_buffer(base64.b64decode(data), "")
    if (drawn.width, drawn.height) != area[2:]:
        raise NotDrawn(
            f"the frame drawn is {drawn.width}x{drawn.height}, not the {area[2]}x{area[3]} asked"
        )
    return Pixels(drawn.write_to_memory(), drawn.width, drawn.height, drawn.bands)
