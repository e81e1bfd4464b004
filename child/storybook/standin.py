"""Temporary: the index parser and snapshot planner the plan job calls, until their own modules
(`ipc.storybook_index`, `child.storybook.parameters`) land; only what the fixture needs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from ipc.storybook import (
    DEFAULT_VIEWPORT_HEIGHT,
    MAX_DELAY_MS,
    PlanResult,
    SkippedStory,
    StorySnapshot,
)


class IndexProblem(ValueError):
    pass


class IndexEntry(NamedTuple):
    id: str
    title: str
    name: str
    type: str
    tags: tuple[str, ...]


def parse_index(document: Any) -> list[IndexEntry]:
    if not isinstance(document, dict) or not isinstance(document.get("entries"), dict):
        raise IndexProblem("not a Storybook index")
    return [
        IndexEntry(
            key,
            entry["title"],
            entry["name"],
            entry.get("type", "story"),
            tuple(entry.get("tags", ())),
        )
        for key, entry in document["entries"].items()
    ]


def plan_snapshots(
    entries: Sequence[IndexEntry],
    stories: Mapping[str, Mapping[str, Any]],
    initial_globals: Mapping[str, Any],
) -> PlanResult:
    snapshots: list[StorySnapshot] = []
    skipped: list[SkippedStory] = []
    docs = 0
    for entry in entries:
        if entry.type == "docs":
            docs += 1
            continue
        record = stories.get(entry.id, {})
        parameters = record.get("parameters", {})
        chromatic = parameters.get("chromatic", {})
        lostpixel = parameters.get("lostpixel", {})
        if chromatic.get("disableSnapshot"):
            skipped.append(
                {
                    "story_id": entry.id,
                    "title": entry.title,
                    "story": entry.name,
                    "reason": "chromatic.disableSnapshot",
                }
            )
            continue
        if "snapshot" not in record.get("tags", entry.tags):
            skipped.append(
                {
                    "story_id": entry.id,
                    "title": entry.title,
                    "story": entry.name,
                    "reason": "no snapshot tag",
                }
            )
            continue
        widths = chromatic.get("viewports") or lostpixel.get("breakpoints") or []
        modes: list[tuple[str | None, int]] = [(str(w), int(w)) for w in widths] or [(None, 1200)]
        threshold = chromatic.get("diffThreshold", lostpixel.get("threshold"))
        for mode, width in modes:
            name = entry.id if mode is None or len(modes) == 1 else f"{entry.id} [{mode}]"
            snapshots.append(
                {
                    "name": name,
                    "story_id": entry.id,
                    "title": entry.title,
                    "story": entry.name,
                    "mode": mode if len(modes) > 1 else None,
                    "viewport": {"width": width, "height": DEFAULT_VIEWPORT_HEIGHT},
                    "delay_ms": min(int(chromatic.get("delay", 0)), MAX_DELAY_MS),
                    "pause_animation_at_end": bool(chromatic.get("pauseAnimationAtEnd", True)),
                    "crop": "root",
                    "threshold": None if threshold is None else float(threshold),
                    "count_aa": chromatic.get("diffIncludeAntiAliasing"),
                }
            )
    return {"snapshots": snapshots, "skipped": skipped, "docs": docs, "error": None}
