"""The sizes a story asks to be captured at, from the parameters of the tools teams move from.

A story may name its sizes in Chromatic's, Lost Pixel's or storycap's parameters, or only
through Storybook's viewport addon. The first of these that gives at least one size decides
every size of the story, in this order:

1. `chromatic.modes` (`{name: {"viewport": ..., "disable": bool}}`): one size per mode not
   disabled, named by the mode. A mode's viewport is a width, a viewport addon's name, an object
   `{width, height}`, or the addon's global form `{value, isRotated}`; a mode without one is
   taken at the story's default size (below). Only the viewport of a mode is applied.
2. `chromatic.viewports` (widths; Chromatic's older API, superseded by modes): named by width.
3. `lostpixel.breakpoints` (widths): named by width.
4. storycap's `screenshot.viewports` (a list of viewport names, or `{name: viewport}`), then
   its `screenshot.viewport` (one name or `{width, height}`).
5. The viewport addon's default: Storybook 9 and later `globals.viewport = {value, isRotated}`
   (the story's `storyGlobals`, then its `globals`, then the preview's initial globals; a custom
   "375-667" value is read too) with the names of `parameters.viewport.options`; Storybook 7
   and 8 `globals.viewport` as a bare name, and `parameters.viewport.defaultViewport` (and
   `defaultOrientation`) with the names of `parameters.viewport.viewports`. "No viewport" is
   said in several ways, none of them a name to look up: `"reset"` (the default global of
   Storybook 7 and 8's addon), `"responsive"`, an empty value and `{value: undefined}`. Names are looked up
   in the story's own table, else in Storybook's built-in one (`MINIMAL_VIEWPORTS`).
6. Nothing: `DEFAULT_VIEWPORT_WIDTH` x `DEFAULT_VIEWPORT_HEIGHT`.

One source wins rather than all being merged because a team that moved from one tool to
another often keeps both tools' parameters for the same intent; a merge would double its
snapshots. A width alone is `DEFAULT_VIEWPORT_HEIGHT` high. Sizes are CSS pixels: numbers, or
strings such as "375px".

Two kinds of bad values, two outcomes. A value of the wrong type (a string where a list of
widths belongs, a width of `true`) is ignored, as if it were not there, like any malformed
parameter. A value of the right type that cannot be honoured (a viewport name no table knows,
a side outside 1..`MAX_VIEWPORT_SIDE` px) raises `SizeProblem`: the plan skips the story with
the message, so the user sees which parameter to fix instead of a picture at a size they did
not ask for.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from ipc.storybook import DEFAULT_VIEWPORT_HEIGHT, DEFAULT_VIEWPORT_WIDTH, Viewport

#: The largest side of a viewport, in CSS pixels: past it a screenshot's memory and time grow
#: for no story anyone reviews.
MAX_VIEWPORT_SIDE = 4096

#: Storybook's built-in viewports (its `MINIMAL_VIEWPORTS`), used when a story's parameters
#: give no table of their own, as the viewport addon does.
MINIMAL_VIEWPORTS: dict[str, tuple[str, int, int]] = {
    "mobile1": ("Small mobile", 320, 568),
    "mobile2": ("Large mobile", 414, 896),
    "tablet": ("Tablet", 834, 1112),
    "desktop": ("Desktop", 1280, 1024),
}

#: The addon's values for "no viewport" (the canvas fills the window): Storybook 7 and 8 set
#: the global to "reset" by default; "responsive" is the older and newer tables' entry.
_NO_VIEWPORT = frozenset({"reset", "responsive"})
#: A length in CSS pixels, as a number or "375px".
_PX = re.compile(r"\s*(-?\d+(?:\.\d+)?)\s*(?:px)?\s*")
#: The addon's custom size value, "375-667" or "375px-667px" (Storybook 9 and later).
_CUSTOM_VALUE = re.compile(r"(\d{1,4})(px)?-(\d{1,4})(px)?")


class SizeProblem(ValueError):
    """A size the story asks for that cannot be honoured; the message names the parameter."""


Sizes = list[tuple[str | None, Viewport]]


def story_sizes(parameters: Mapping[str, Any], globals_chain: Sequence[Mapping[str, Any]]) -> Sizes:
    """Each size to capture the story at, with its mode's name (None when there is one size).

    `globals_chain` is the story's globals, most specific first (its own, then the preview's
    initial globals). Raises `SizeProblem` for a size that cannot be honoured.
    """
    for sizes in _tool_sizes(parameters, globals_chain):
        if sizes:
            return [(None, sizes[0][1])] if len(sizes) == 1 else sizes
    return [(None, default_size(parameters, globals_chain))]


def _tool_sizes(
    parameters: Mapping[str, Any], globals_chain: Sequence[Mapping[str, Any]]
) -> Iterator[Sizes]:
    """The sizes each tool's parameters give, in the order they are preferred; each read only
    when the ones before it gave none, so a later tool's bad value cannot skip the story."""
    chromatic = _mapping(parameters.get("chromatic"))
    yield _chromatic_modes(chromatic, parameters, globals_chain)
    yield _widths(chromatic.get("viewports"), "chromatic.viewports")
    yield _widths(_mapping(parameters.get("lostpixel")).get("breakpoints"), "lostpixel.breakpoints")
    storycap = _mapping(parameters.get("screenshot"))
    yield _storycap_viewports(storycap.get("viewports"), parameters)
    yield _storycap_viewport(storycap.get("viewport"), parameters)


def default_size(
    parameters: Mapping[str, Any], globals_chain: Sequence[Mapping[str, Any]]
) -> Viewport:
    """The viewport addon's default for the story, or `DEFAULT_VIEWPORT_*` when it sets none."""
    for scope in globals_chain:
        value, rotated = _global_viewport(scope.get("viewport"))
        if value is not None:
            return _addon_value(value, rotated, parameters, "globals.viewport")
    addon = _mapping(parameters.get("viewport"))
    name = addon.get("defaultViewport")
    if isinstance(name, str) and name and name not in _NO_VIEWPORT:
        rotated = addon.get("defaultOrientation") == "landscape"
        return _rotate(_named(name, parameters, "viewport.defaultViewport"), rotated)
    return Viewport(width=DEFAULT_VIEWPORT_WIDTH, height=DEFAULT_VIEWPORT_HEIGHT)


def _chromatic_modes(
    chromatic: Mapping[str, Any],
    parameters: Mapping[str, Any],
    globals_chain: Sequence[Mapping[str, Any]],
) -> Sizes:
    sizes: Sizes = []
    for name, mode in _mapping(chromatic.get("modes")).items():
        if not isinstance(mode, Mapping) or mode.get("disable") is True:
            continue
        where = f"chromatic.modes.{name}.viewport"
        viewport = _mode_viewport(mode.get("viewport"), parameters, where)
        sizes.append((str(name), viewport or default_size(parameters, globals_chain)))
    return sizes


def _mode_viewport(value: object, parameters: Mapping[str, Any], where: str) -> Viewport | None:
    """A Chromatic mode's viewport, or None when it names none (or nothing of a known shape)."""
    if isinstance(value, str) and _px(value) is None:
        return _named(value, parameters, where)
    if isinstance(value, Mapping) and "value" in value:
        name, rotated = _global_viewport(value)
        return None if name is None else _addon_value(name, rotated, parameters, where)
    if isinstance(value, Mapping):
        return _object(value, where)
    width = _px(value)
    return None if width is None else _checked(width, DEFAULT_VIEWPORT_HEIGHT, where)


def _widths(value: object, where: str) -> Sizes:
    if not isinstance(value, list):
        return []
    sizes: Sizes = []
    for item in value:
        width = _px(item)
        if width is not None and all(mode != str(width) for mode, _ in sizes):
            sizes.append((str(width), _checked(width, DEFAULT_VIEWPORT_HEIGHT, where)))
    return sizes


def _storycap_viewports(value: object, parameters: Mapping[str, Any]) -> Sizes:
    where = "screenshot.viewports"
    if isinstance(value, list):
        names = [item for item in value if isinstance(item, str) and item]
        return [(name, _named(name, parameters, where)) for name in dict.fromkeys(names)]
    sizes: Sizes = []
    for name, viewport in _mapping(value).items():
        size = _storycap_size(viewport, parameters, f"{where}.{name}")
        if size is not None:
            sizes.append((str(name), size))
    return sizes


def _storycap_viewport(value: object, parameters: Mapping[str, Any]) -> Sizes:
    size = _storycap_size(value, parameters, "screenshot.viewport")
    return [] if size is None else [(None, size)]


def _storycap_size(value: object, parameters: Mapping[str, Any], where: str) -> Viewport | None:
    """storycap's viewport: a device or viewport name, or `{width, height, ...}` (its scale and
    mobile emulation are not applied)."""
    if isinstance(value, str) and value:
        return _named(value, parameters, where)
    if isinstance(value, Mapping):
        return _object(value, where)
    return None


def _global_viewport(value: object) -> tuple[str | None, bool]:
    """The addon's global, `{value, isRotated}` or (Storybook 8) a bare name, as (value,
    rotated); value None when it selects no viewport."""
    rotated = False
    if isinstance(value, Mapping):
        rotated = value.get("isRotated") is True
        value = value.get("value")
    if not isinstance(value, str) or not value or value in _NO_VIEWPORT:
        return None, False
    return value, rotated


def _addon_value(value: str, rotated: bool, parameters: Mapping[str, Any], where: str) -> Viewport:
    custom = _CUSTOM_VALUE.fullmatch(value)
    if custom:
        size = _checked(int(custom.group(1)), int(custom.group(3)), where)
    else:
        size = _named(value, parameters, where)
    return _rotate(size, rotated)


def _named(name: str, parameters: Mapping[str, Any], where: str) -> Viewport:
    """The size of a viewport the addon knows by `name` (its key, or its display name, so that
    storycap's device names match a table that lists them)."""
    table = _viewport_table(parameters)
    entry = table.get(name)
    if entry is None:
        folded = name.casefold()
        entry = next(
            (e for e in table.values() if str(e.get("name", "")).casefold() == folded), None
        )
    if entry is None:
        known = ", ".join(table) or "none"
        raise SizeProblem(f"{where}: no viewport named {name!r} (known: {known})")
    styles = _mapping(entry.get("styles"))
    width, height = _px(styles.get("width")), _px(styles.get("height"))
    if width is None or height is None:
        raise SizeProblem(
            f"{where}: viewport {name!r} has no size in px "
            f"(width {styles.get('width')!r}, height {styles.get('height')!r})"
        )
    return _checked(width, height, where)


def _viewport_table(parameters: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """The story's viewports by name: `viewport.options` (Storybook 9+), else `viewport.viewports`
    (7, 8), else Storybook's built-in ones."""
    addon = _mapping(parameters.get("viewport"))
    for key in ("options", "viewports"):
        table = addon.get(key)
        if isinstance(table, Mapping) and table:
            return {str(k): v for k, v in table.items() if isinstance(v, Mapping)}
    return {
        key: {"name": label, "styles": {"width": width, "height": height}}
        for key, (label, width, height) in MINIMAL_VIEWPORTS.items()
    }


def _object(value: Mapping[str, Any], where: str) -> Viewport | None:
    width = _px(value.get("width"))
    if width is None:
        return None
    height = _px(value.get("height"))
    return _checked(width, DEFAULT_VIEWPORT_HEIGHT if height is None else height, where)


def _checked(width: int, height: int, where: str) -> Viewport:
    for side, length in (("width", width), ("height", height)):
        if not 1 <= length <= MAX_VIEWPORT_SIDE:
            raise SizeProblem(f"{where}: {side} {length} px is outside 1..{MAX_VIEWPORT_SIDE} px")
    return Viewport(width=width, height=height)


def _rotate(size: Viewport, rotated: bool) -> Viewport:
    return Viewport(width=size["height"], height=size["width"]) if rotated else size


def _px(value: object) -> int | None:
    """A length in CSS pixels (a number, or a string like "375px"), rounded; None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return round(value) if math.isfinite(value) else None
    if isinstance(value, str):
        match = _PX.fullmatch(value)
        return round(float(match.group(1))) if match else None
    return None


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}
