"""One snapshot of the report, as HTML: what a reviewer needs to judge it, most telling first.

Under its name, one line of facts: the story, how many pixels changed, the build its baseline
came from and the settings it was compared with. A changed snapshot then opens with the
enlarged crop of its changed area (`crop`), then the full baseline, new and diff side by side
(one above the other when the snapshot is a wide strip), or baseline and new overlaid to slide
or blink between. A failed one shows its error; a new one
its image. An unchanged one is a line, its image linked as `data-src` only and loaded when
asked, so that a build of thousands of unchanged snapshots opens at once.

The markup's classes and data attributes are what `report.js` drives and `report.css` lays
out; every name and message is HTML-escaped, since names come from uploaded paths and story
titles from the Storybook.
"""

from __future__ import annotations

from functools import lru_cache
from html import escape

from child.report.crop import Crop, crop_of
from child.report.paths import artifact_link, report_link
from child.report.review import REVIEWABLE, decision_badge, snapshot_review
from ipc.build_view import SnapshotView

#: The width the overlay enlarges a small screenshot towards, in CSS pixels...
OVERLAY_PX = 960
#: ...by a whole zoom of at most this.
OVERLAY_ZOOM_MAX = 4
#: A snapshot at least this many times as wide as it is tall shows its three full images one
#: above the other. Side by side each gets a third of the page's width, and a wide strip (a
#: 1168x42 toolbar) shrinks to a few pixels' height; stacked, each has the page's width. Three
#: stacked at that width still fit in one window when the strip is wider than three times the
#: window's shape under the toolbar (a laptop's: about 1.7 wide to 1 tall): all three stay in
#: view together, which is what side by side is for. Squarer and taller snapshots stay side by
#: side, where stacking them would push the diff out of the window.
STACKED_RATIO = 5


def snapshot_section(snapshot: SnapshotView, key: str, review_of: int | None = None) -> str:
    """The snapshot's `<section>`; `key` makes its element ids unique in the page.
    `review_of`: the build's id when it takes review, which a changed or new snapshot then
    offers (`child.report.review`), named by its `data-name`."""
    status = escape(snapshot.status)
    unstable = (
        (' data-unstable="true"', ' <span class="badge unstable">unstable</span>')
        if snapshot.unstable
        else ("", "")
    )
    named = badge = review = ""
    if review_of is not None and snapshot.status in REVIEWABLE:
        named = f' data-name="{escape(snapshot.name)}"'
        badge = decision_badge(snapshot.review)
        review = snapshot_review(review_of, snapshot.name)
    return (
        f'<section class="snapshot {status}" data-status="{status}"{unstable[0]}{named}'
        f' id="{key}" tabindex="-1" aria-labelledby="{key}-title">'
        f'<h3 id="{key}-title"><span class="badge {status}">{status}</span>{unstable[1]}{badge} '
        f"{escape(snapshot.label)}</h3>"
        f"{_facts(snapshot)}{review}{_body(snapshot, key)}</section>"
    )


def _body(snapshot: SnapshotView, key: str) -> str:
    if snapshot.status == "failed":
        return f'<p class="error">{escape(snapshot.error or "failed")}</p>'
    if snapshot.status == "changed":
        return _crops(snapshot) + _compare(snapshot)
    if snapshot.image_path is None:
        return ""
    if snapshot.status == "unchanged":
        return _on_demand(snapshot, key, snapshot.image_path)
    return f'<div class="sides one">{_figure(snapshot, "new", snapshot.image_path)}</div>'


def _facts(snapshot: SnapshotView) -> str:
    """The numbers behind the verdict: how much changed, against which build, with which
    settings, and the story a Storybook snapshot is of."""
    facts = []
    if snapshot.story_id is not None:
        facts.append(f"story <code>{escape(snapshot.story_id)}</code>")
        if snapshot.name != snapshot.story_id:
            facts.append(f"snapshot <code>{escape(snapshot.name)}</code>")
    if snapshot.settled is False:
        facts.append("never settled: two shots in a row never agreed, the last is shown")
    if snapshot.diff_pixels:
        facts.append(_changed(snapshot.diff_pixels, snapshot.diff_ratio or 0.0))
    if snapshot.baseline_build_id is not None:
        facts.append(_baseline_from(snapshot.baseline_build_id))
    if snapshot.metric is not None:
        facts.append(
            _settings(
                snapshot.metric, snapshot.threshold, snapshot.flat_threshold, snapshot.count_aa
            )
        )
    if snapshot.width is not None and snapshot.height is not None:
        facts.append(f"{snapshot.width}x{snapshot.height}")
    items = "".join(f"<li>{fact}</li>" for fact in facts)
    return f'<ul class="facts">{items}</ul>' if items else ""


def _changed(pixels: int, ratio: float) -> str:
    """How much changed; a share too small for two decimals keeps one significant digit, so
    that a 1 px change never reads as 0.00 %."""
    percent = ratio * 100
    share = f"{percent:.2f}" if percent >= 0.01 else f"{percent:.1g}"
    return f"{pixels} pixel{'s' if pixels != 1 else ''} changed ({share} %)"


@lru_cache(maxsize=256)
def _baseline_from(build_id: int) -> str:
    """Where the baseline came from: the same few builds for thousands of snapshots, so made
    once each."""
    return f'baseline from <a href="{report_link(build_id)}">build {build_id}</a>'


@lru_cache(maxsize=256)
def _settings(
    metric: str, threshold: float | None, flat_threshold: float | None, count_aa: bool | None
) -> str:
    """The comparison's settings in words: a threshold means little without its metric, and the
    flat-area pass may be off. A build's snapshots share a few sets of settings, so each is
    worded once."""
    parts = [
        f"metric {escape(str(metric))}",
        f"threshold {_number(threshold)}",
        "flat-area pass off"
        if flat_threshold is None
        else f"flat-area threshold {_number(flat_threshold)}",
    ]
    if count_aa is not None:
        parts.append("anti-aliasing " + ("counted" if count_aa else "ignored"))
    return "compared with " + ", ".join(parts)


def _number(value: object) -> str:
    return (
        "-" if value is None else escape(f"{value:g}" if isinstance(value, float) else str(value))
    )


def _sides(snapshot: SnapshotView) -> list[tuple[str, str]]:
    """The changed snapshot's images that exist, as (what it is, path)."""
    sides = [
        ("baseline", snapshot.baseline_image),
        ("new", snapshot.image_path),
        ("diff", snapshot.diff_path),
    ]
    return [(side, path) for side, path in sides if path]


def _crops(snapshot: SnapshotView) -> str:
    """The changed area of each image, enlarged, with the changed box marked on baseline and
    new (on the diff, its red pixels mark it)."""
    if snapshot.diff_box is None:
        return '<p class="meta">No box of the changed pixels was recorded: see the images.</p>'
    crop = crop_of(snapshot.diff_box, (snapshot.width or 0, snapshot.height or 0))
    frames = "".join(
        _crop_frame(snapshot, crop, side, path, mark=side != "diff")
        for side, path in _sides(snapshot)
    )
    box = ",".join(str(value) for value in crop.box)
    return (
        f'<div class="crops {crop.layout}" data-box="{box}" data-scale="{crop.scale:g}">'
        f"{frames}</div>"
    )


def _crop_frame(snapshot: SnapshotView, crop: Crop, side: str, path: str, *, mark: bool) -> str:
    width, height = crop.frame
    left, top, box_width, box_height = crop.box
    marker = (
        f'<span class="mark" style="left:{(left - crop.left) * crop.scale:g}px;'
        f"top:{(top - crop.top) * crop.scale:g}px;width:{box_width * crop.scale:g}px;"
        f'height:{box_height * crop.scale:g}px"></span>'
        if mark
        else ""
    )
    zoom = f"{crop.scale:g}:1" if crop.scale >= 1 else f"{crop.scale * 100:.0f} %"
    pixelated = " pixelated" if crop.enlarged else ""
    alt = escape(f"{snapshot.label}: {side}, the changed area")
    return (
        f'<figure class="crop"><figcaption>{side} <span class="meta">{zoom}</span></figcaption>'
        f'<button type="button" class="zoom-in crop-frame{pixelated}" data-side="{side}"'
        f' data-box="{",".join(str(v) for v in crop.box)}"'
        f' data-title="{escape(f"{snapshot.label}: {side}")}"'
        f' style="width:{width:g}px;height:{height:g}px" aria-label="zoom into {alt}">'
        f'<img src="{artifact_link(path)}" alt="{alt}" loading="lazy"'
        f' style="transform:scale({crop.scale:g}) translate({-crop.left}px,{-crop.top}px)">'
        f"{marker}</button></figure>"
    )


def _compare(snapshot: SnapshotView) -> str:
    """The full images, side by side or overlaid; side by side first, since it shows all
    three at once."""
    sides = "".join(_figure(snapshot, side, path) for side, path in _sides(snapshot))
    stacked = " stacked" if _strip(snapshot.width, snapshot.height) else ""
    return (
        '<div class="compare" data-mode="sides">'
        '<div class="modes" role="group" aria-label="how to compare">'
        '<button type="button" data-mode="sides" aria-pressed="true">side by side</button>'
        '<button type="button" data-mode="overlay" aria-pressed="false">overlay</button>'
        f'</div><div class="sides{stacked}">{sides}</div>{_overlay(snapshot)}</div>'
    )


def _strip(width: int | None, height: int | None) -> bool:
    """Whether the snapshot is so wide and short that its images stack (`STACKED_RATIO`); one of
    unknown size stays side by side."""
    if not width or not height:
        return False
    return width >= STACKED_RATIO * height


def _overlay(snapshot: SnapshotView) -> str:
    """Baseline under new, the new one clipped left of the slider's line; or the two blinking,
    which shows a small shift that side by side hides."""
    if snapshot.baseline_image is None or snapshot.image_path is None:
        return ""
    label = escape(snapshot.label)
    zoom = overlay_zoom(snapshot.width)
    pixelated = " pixelated" if zoom > 1 else ""
    width = f";max-width:{snapshot.width * zoom}px" if snapshot.width else ""
    return (
        f'<div class="overlay" hidden><div class="stack{pixelated}" data-zoom="{zoom}"'
        f' style="--reveal:50%{width}">'
        f'<img class="under" src="{artifact_link(snapshot.baseline_image)}"'
        f' alt="{label}: baseline" loading="lazy">'
        f'<img class="over" src="{artifact_link(snapshot.image_path)}"'
        f' alt="{label}: new" loading="lazy">'
        '<span class="tag left">baseline</span><span class="tag right">new</span></div>'
        '<div class="overlay-controls">'
        '<label>baseline <input type="range" class="reveal" min="0" max="100" value="50"'
        ' aria-label="where the line between baseline and new is"> new</label>'
        '<button type="button" class="blink" aria-pressed="false">blink</button>'
        '<output class="showing">baseline left of the line, new right of it</output>'
        "</div></div>"
    )


def overlay_zoom(width: int | None) -> int:
    """The whole zoom the overlay shows images at: a small screenshot is enlarged (up to
    `OVERLAY_ZOOM_MAX`) to fill about `OVERLAY_PX`, where a shift of a pixel can be seen."""
    if not width:
        return 1
    return max(1, min(OVERLAY_ZOOM_MAX, OVERLAY_PX // width))


def _on_demand(snapshot: SnapshotView, key: str, path: str) -> str:
    """An unchanged snapshot's image, off until asked: no `src`, so nothing loads."""
    alt = escape(f"{snapshot.label}: new")
    return (
        f'<button type="button" class="show" aria-expanded="false" aria-controls="{key}-image">'
        "show image</button>"
        f'<figure class="on-demand" id="{key}-image" hidden>'
        f'<button type="button" class="zoom-in" aria-label="zoom into {alt}">'
        f'<img data-src="{artifact_link(path)}" alt="{alt}" loading="lazy">'
        "</button></figure>"
    )


def _figure(snapshot: SnapshotView, side: str, path: str) -> str:
    """A full image with what it is, a link to its file, and a click to zoom."""
    href = artifact_link(path)
    caption = side
    if side == "baseline" and snapshot.baseline_build_id is not None:
        caption = f"baseline (build {snapshot.baseline_build_id})"
    alt = escape(f"{snapshot.label}: {side}")
    return (
        f'<figure><figcaption>{caption} <a href="{href}">file</a></figcaption>'
        f'<button type="button" class="zoom-in" aria-label="zoom into {alt}">'
        f'<img src="{href}" alt="{alt}" loading="lazy"></button></figure>'
    )
