"""One snapshot of a capture job judged against its baseline: new, unchanged, changed or failed.

Both captures judge alike, a shard of uploaded images (`child.capture.shard`) and one of
stories rendered first (`child.storybook.capture`), so this lives below both: each of them
imports it, and neither imports the other's judging.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyvips
import structlog

from child.artifacts.access import JobArtifacts
from child.cache.content import HashMismatch
from child.capture.header import png_size
from child.diff.compare import DiffOptions, ImageError, compare, gone, probe
from child.worker import resources
from ipc.artifacts.keys import UnsafeKey
from ipc.artifacts.store import ArtifactMissing
from ipc.capture import RESULT_FIELDS, SETTING_FIELDS

log = structlog.get_logger(__name__)

SnapshotResult = dict[str, Any]


def log_reads(payload: Mapping[str, Any], artifacts: JobArtifacts) -> None:
    """How many files the job read, and how many its host's cache did not have."""
    log.info(
        "artifacts read",
        build_id=payload.get("build_id"),
        shard_id=payload.get("shard_id"),
        store=artifacts.location,
        reads=artifacts.reads,
        downloads=artifacts.downloads,
    )


def diff_options(given: Mapping[str, Any]) -> DiffOptions:
    """The payload's diff options."""
    flat = given["flat_threshold"]
    return DiffOptions(
        metric=given["metric"],
        threshold=float(given["threshold"]),
        flat_threshold=None if flat is None else float(flat),
        count_aa=bool(given["count_aa"]),
        budget_pixels=int(given["budget_pixels"]),
    )


def capture_one(
    artifacts: JobArtifacts, diff_dir: str, shot: Mapping[str, Any], options: DiffOptions
) -> SnapshotResult:
    """One snapshot's result; a bad image or key is a `failed` result, never an exception
    (but a child out of threads, memory or disk raises `OutOfResources`: see
    `child.worker.resources`; and a store that does not answer raises `StoreUnavailable`, for
    the job to be retried)."""
    try:
        try:
            return _judged(artifacts, diff_dir, shot, options)
        except FileNotFoundError:
            # A file read through the host's cache vanished before it was opened (the cache's
            # folder deleted under the job): read again. Still missing is the snapshot's fault.
            return _judged(artifacts, diff_dir, shot, options)
    except (ImageError, UnsafeKey, ArtifactMissing, HashMismatch, OSError) as error:
        resources.check(error)  # the host's trouble, not the image's: the job is retried
        return _result(shot, "failed", error=artifacts.named(str(error) or type(error).__name__))


def _judged(
    artifacts: JobArtifacts, diff_dir: str, shot: Mapping[str, Any], options: DiffOptions
) -> SnapshotResult:
    image = artifacts.read(shot["image"], shot["sha256"])
    baseline = shot.get("baseline")
    if baseline is None:
        return _new(shot, image, options)
    if baseline["sha256"] == shot["sha256"]:
        return _unchanged(shot, image, options)
    return _compared(artifacts, diff_dir, shot, image, options)


def _new(shot: Mapping[str, Any], image: Path, options: DiffOptions) -> SnapshotResult:
    """No baseline: nothing to compare, but the image must decode, for it may become one.

    The header-only probe refuses oversized images before any pixel is read; a full decode
    then catches what a header cannot show (a truncated file, damaged image data). A damaged
    image let through here would fail every later build as their baseline.
    """
    width, height = probe(image, options.max_pixels)
    _decode_fully(image)
    return _result(shot, "new", width=width, height=height, **_settings(options))


def _decode_fully(image: Path) -> None:
    try:
        pyvips.Image.new_from_file(str(image), fail_on="error").avg()
    except pyvips.Error as error:
        detail = (error.detail or error.message or "").strip().splitlines()
        reason = detail[-1].strip() if detail else "cannot decode"
        resources.check(error)
        if not image.exists():
            raise gone(image) from None
        raise ImageError(f"{image}: damaged image ({reason})") from error


def _unchanged(shot: Mapping[str, Any], image: Path, options: DiffOptions) -> SnapshotResult:
    """Same bytes as the baseline: unchanged without decoding, nor even opening the file in
    libvips (its PNG header gives the size: `child.capture.header`)."""
    width, height = png_size(image, options.max_pixels)
    return _result(
        shot,
        "unchanged",
        width=width,
        height=height,
        diff_pixels=0,
        diff_ratio=0.0,
        **_settings(options),
    )


def _compared(
    artifacts: JobArtifacts,
    diff_dir: str,
    shot: Mapping[str, Any],
    image: Path,
    options: DiffOptions,
) -> SnapshotResult:
    baseline = shot["baseline"]
    diff_key = f"{diff_dir}/{hashlib.sha256(shot['name'].encode()).hexdigest()}.png"
    baseline_path = artifacts.read(baseline["image"], baseline["sha256"])
    written = artifacts.new_scratch(".png")
    try:
        ignore = [tuple(box) for box in shot.get("ignore") or ()]
        outcome = compare(baseline_path, image, written, options, ignore=ignore)
        if outcome.diff_written:
            artifacts.keep(diff_key, written)
    finally:
        written.unlink(missing_ok=True)
    return _result(
        shot,
        outcome.status,
        width=outcome.width,
        height=outcome.height,
        diff_pixels=outcome.diff_pixels,
        diff_ratio=outcome.diff_ratio,
        diff_path=diff_key if outcome.diff_written else None,
        diff_box=list(outcome.box) if outcome.box else None,
        **_settings(options),
    )


def _settings(options: DiffOptions) -> dict[str, Any]:
    """The settings a snapshot was judged with, which its result is stored with: a new one's
    too, so that a story's own threshold shows from its first build."""
    return {key: getattr(options, key) for key in SETTING_FIELDS}


def failed_result(shot: Mapping[str, Any], error: str) -> SnapshotResult:
    """The result of a snapshot that has no image to compare, and why."""
    return _result(shot, "failed", error=error)


def _result(shot: Mapping[str, Any], status: str, **facts: Any) -> SnapshotResult:
    baseline = shot.get("baseline")
    result: SnapshotResult = dict.fromkeys(RESULT_FIELDS)
    result.update(
        name=shot["name"], status=status, baseline_id=baseline["id"] if baseline else None
    )
    result.update(facts)
    return result
