"""Screenshot-like demo images: a baseline set of stories and a branch with real changes.

The `demo` command and the tests need PNGs that look like component screenshots (rows of
text-like glyphs, buttons, cards) and differ the way real branches do: a colour token changed
(`#2563eb` to `#1d4ed8`), text moved by a few pixels, a card added, a new story, the rest
untouched. They are drawn here in pure Python (a bytearray canvas, PNG written with `zlib` and
`struct`) because this runs in the parent, which must never load libvips. Output is
deterministic: an untouched story is byte-identical in both sets, as real unchanged
screenshots are, so the capture takes its same-bytes path.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Variant = Literal["baseline", "branch"]
Colour = tuple[int, int, int]

WIDTH, HEIGHT = 800, 600
#: Glyphs are 3x5 cells of this many pixels, with one cell of spacing: roughly 14 px text.
GLYPH_CELL = 2
WHITE: Colour = (255, 255, 255)
PAGE: Colour = (248, 250, 252)
INK: Colour = (15, 23, 42)
MUTED: Colour = (100, 116, 139)
BORDER: Colour = (226, 232, 240)
PRIMARY_BASELINE: Colour = (0x25, 0x63, 0xEB)  # #2563eb
PRIMARY_BRANCH: Colour = (0x1D, 0x4E, 0xD8)  # #1d4ed8, the one-step darker token
#: How far the branch moves the typography story's text down, in pixels.
TEXT_SHIFT = 3


class Canvas:
    """An RGB picture in a bytearray, drawn by filling row slices (fast in pure Python)."""

    def __init__(self, width: int, height: int, background: Colour) -> None:
        self.width, self.height = width, height
        self.pixels = bytearray(bytes(background) * (width * height))

    def rect(self, x: int, y: int, width: int, height: int, colour: Colour) -> None:
        left, right = max(x, 0), min(x + width, self.width)
        top, bottom = max(y, 0), min(y + height, self.height)
        if left >= right:
            return
        run = bytes(colour) * (right - left)
        for row in range(top, bottom):
            start = (row * self.width + left) * 3
            self.pixels[start : start + len(run)] = run

    def rounded(self, x: int, y: int, width: int, height: int, radius: int, colour: Colour) -> None:
        """A rectangle with corners cut along a circle of `radius` (buttons, cards, badges)."""
        for dy in range(height):
            edge = min(dy, height - 1 - dy)
            inset = 0
            if edge < radius:
                offset = radius - edge - 0.5
                inset = round(radius - (radius * radius - offset * offset) ** 0.5)
            self.rect(x + inset, y + dy, width - 2 * inset, 1, colour)

    def box(self, x: int, y: int, width: int, height: int, fill: Colour, line: Colour) -> None:
        """A card: a bordered rounded rectangle."""
        self.rounded(x, y, width, height, 8, line)
        self.rounded(x + 1, y + 1, width - 2, height - 2, 7, fill)

    def text(self, x: int, y: int, words: str, colour: Colour, scale: int = 1) -> int:
        """Draw `words` as glyph blocks; returns the x after the last one."""
        cell = GLYPH_CELL * scale
        for char in words:
            if char != " ":
                self._glyph(x, y, _glyph_bits(char), cell, colour)
            x += 4 * cell
        return x

    def _glyph(self, x: int, y: int, bits: int, cell: int, colour: Colour) -> None:
        for index in range(15):
            if bits >> index & 1:
                self.rect(x + (index % 3) * cell, y + (index // 3) * cell, cell, cell, colour)

    def png(self) -> bytes:
        """The picture as an 8-bit RGB PNG (filter 0 on every row)."""
        stride = self.width * 3
        raw = b"".join(
            b"\x00" + self.pixels[row * stride : (row + 1) * stride] for row in range(self.height)
        )
        header = struct.pack(">IIBBBBB", self.width, self.height, 8, 2, 0, 0, 0)
        return b"".join(
            [
                b"\x89PNG\r\n\x1a\n",
                _chunk(b"IHDR", header),
                _chunk(b"IDAT", zlib.compress(raw, 6)),
                _chunk(b"IEND", b""),
            ]
        )


def _glyph_bits(char: str) -> int:
    """A fixed 3x5 pattern per character, with a stem so that none is blank."""
    mixed = (ord(char) * 2654435761) & 0xFFFFFFFF
    return (mixed >> 7) & 0x7FFF | 0b001_001_001_001_001


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


@dataclass(frozen=True)
class Theme:
    """What differs between the two sets."""

    primary: Colour
    text_shift: int
    extra_card: bool


THEMES = {
    "baseline": Theme(PRIMARY_BASELINE, 0, False),
    "branch": Theme(PRIMARY_BRANCH, TEXT_SHIFT, True),
}


def _paragraph(canvas: Canvas, x: int, y: int, lines: list[str], colour: Colour = MUTED) -> int:
    for line in lines:
        canvas.text(x, y, line, colour)
        y += 20
    return y


def _button(canvas: Canvas, x: int, y: int, label: str, fill: Colour, ink: Colour) -> None:
    width = len(label) * 4 * GLYPH_CELL + 32
    canvas.rounded(x, y, width, 40, 6, fill)
    canvas.text(x + 16, y + 15, label, ink)


def button_primary(canvas: Canvas, theme: Theme) -> None:
    canvas.text(40, 40, "Buttons / Primary", INK, 2)
    _button(canvas, 40, 100, "Save changes", theme.primary, WHITE)
    _button(canvas, 240, 100, "Publish", theme.primary, WHITE)
    _paragraph(canvas, 40, 180, ["Primary actions use the brand colour token.", "One per view."])


def button_secondary(canvas: Canvas, theme: Theme) -> None:
    canvas.text(40, 40, "Buttons / Secondary", INK, 2)
    for index, label in enumerate(("Cancel", "Back", "More options")):
        x = 40 + index * 170
        canvas.rounded(x, 100, 150, 40, 6, BORDER)
        canvas.rounded(x + 1, 101, 148, 38, 5, WHITE)
        canvas.text(x + 16, 115, label, INK)


def _card(canvas: Canvas, x: int, y: int, title: str) -> None:
    canvas.box(x, y, 220, 260, WHITE, BORDER)
    canvas.rect(x + 1, y + 1, 218, 110, (203, 213, 225))
    canvas.text(x + 16, y + 128, title, INK)
    _paragraph(
        canvas, x + 16, y + 156, ["A short description", "of this card that", "wraps lines."]
    )


def card_default(canvas: Canvas, theme: Theme) -> None:
    canvas.text(40, 40, "Card / Default", INK, 2)
    _card(canvas, 40, 100, "Quarterly report")


def card_list(canvas: Canvas, theme: Theme) -> None:
    canvas.text(40, 40, "Card / List", INK, 2)
    titles = ["Design system", "Release notes"] + (["Roadmap"] if theme.extra_card else [])
    for index, title in enumerate(titles):
        _card(canvas, 40 + index * 240, 100, title)


def form_login(canvas: Canvas, theme: Theme) -> None:
    canvas.box(200, 60, 400, 460, WHITE, BORDER)
    canvas.text(240, 100, "Sign in", INK, 2)
    for index, label in enumerate(("Email address", "Password")):
        y = 170 + index * 100
        canvas.text(240, y, label, INK)
        canvas.box(240, y + 24, 320, 44, WHITE, BORDER)
    _button(canvas, 240, 400, "Sign in to your account", theme.primary, WHITE)
    canvas.text(240, 470, "Forgot your password?", theme.primary)


def nav_header(canvas: Canvas, theme: Theme) -> None:
    canvas.rect(0, 0, WIDTH, 64, INK)
    canvas.rounded(24, 16, 32, 32, 8, (56, 189, 248))
    canvas.text(72, 26, "Storyshelf", WHITE)
    for index, label in enumerate(("Builds", "Projects", "Settings")):
        canvas.text(420 + index * 120, 26, label, (203, 213, 225))
    _paragraph(canvas, 40, 110, ["Navigation header at full width."])


def typography_paragraph(canvas: Canvas, theme: Theme) -> None:
    y = 40 + theme.text_shift
    canvas.text(40, y, "Typography", INK, 3)
    canvas.text(40, y + 70, "Section heading", INK, 2)
    lines = [
        "The quick brown fox jumps over the lazy dog while the",
        "designers argue about line height and the engineers ship.",
        "Every paragraph in a component library deserves a story.",
    ] * 3
    _paragraph(canvas, 40, y + 120, lines, INK)


def alert_warning(canvas: Canvas, theme: Theme) -> None:
    canvas.text(40, 40, "Alert / Warning", INK, 2)
    canvas.box(40, 100, 720, 90, (254, 252, 232), (250, 204, 21))
    canvas.rounded(60, 128, 32, 32, 16, (234, 179, 8))
    canvas.text(110, 126, "Your trial ends in 3 days", (113, 63, 18))
    canvas.text(110, 152, "Add a payment method to keep your builds.", (133, 77, 14))


def badge_status(canvas: Canvas, theme: Theme) -> None:
    canvas.text(40, 40, "Badge / Status", INK, 2)
    badges = (("passed", (22, 163, 74)), ("changed", (217, 119, 6)), ("failed", (192, 57, 43)))
    for index, (label, colour) in enumerate(badges):
        canvas.rounded(40 + index * 140, 100, 120, 28, 14, colour)
        canvas.text(60 + index * 140, 109, label, WHITE)


Story = Callable[[Canvas, Theme], None]
BASELINE_STORIES: dict[str, Story] = {
    "button/primary": button_primary,
    "button/secondary": button_secondary,
    "card/default": card_default,
    "card/list": card_list,
    "form/login": form_login,
    "nav/header": nav_header,
    "typography/paragraph": typography_paragraph,
    "alert/warning": alert_warning,
}
#: The branch has every baseline story and one new one.
BRANCH_STORIES: dict[str, Story] = {**BASELINE_STORIES, "badge/status": badge_status}


def render_story(name: str, variant: Variant) -> bytes:
    """Story `name` of `variant` as PNG bytes."""
    stories = BASELINE_STORIES if variant == "baseline" else BRANCH_STORIES
    canvas = Canvas(WIDTH, HEIGHT, PAGE)
    stories[name](canvas, THEMES[variant])
    return canvas.png()


def write_demo_images(folder: Path, variant: Variant) -> list[Path]:
    """Write every story of `variant` as `<folder>/<story name>.png`; returns the files."""
    stories = BASELINE_STORIES if variant == "baseline" else BRANCH_STORIES
    written = []
    for name in stories:
        path = folder / f"{name}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(render_story(name, variant))
        written.append(path)
    return written
