"""Where reports live, and how a report links to what lies beside it.

Every link in a report is relative, so that the reports folder and the artifacts beside it can
be opened from disk, copied or served from anywhere: images are reached from the reports folder
(`../images/...`), and other builds' reports sit in the same folder, by file name.
"""

from __future__ import annotations

from html import escape
from urllib.parse import quote

REPORTS_FOLDER = "reports"


def report_name(build_id: int) -> str:
    """Build `build_id`'s report's file name, which is also its link from another report."""
    return f"build-{build_id}.html"


def report_path(build_id: int) -> str:
    """Where build `build_id`'s report lives, relative to the artifacts root."""
    return f"{REPORTS_FOLDER}/{report_name(build_id)}"


def artifact_link(path: str) -> str:
    """`path` (relative to the artifacts root) as seen from the reports folder: URL-quoted, then
    escaped for an HTML attribute (stored names come from uploaded paths)."""
    return escape(quote(f"../{path}"))


def report_link(build_id: int) -> str:
    """Build `build_id`'s report as seen from another report, ready for an HTML attribute."""
    return escape(quote(report_name(build_id)))
