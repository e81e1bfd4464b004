"""How a report page links to what lies beside it: every link relative to its folder.

A report's folder holds copies of its images and diffs under their artifact keys
(`ipc.publish`), so an image is linked by its key as it is; other reports of the project sit
beside the folder, by build id.
"""

from __future__ import annotations

from html import escape
from urllib.parse import quote

from ipc.publish import other_report


def artifact_link(path: str) -> str:
    """`path` (an artifact key, copied into the report's folder) as a link from the page:
    URL-quoted, then escaped for an HTML attribute (stored names come from uploaded paths)."""
    return escape(quote(path))


def report_link(build_id: int) -> str:
    """Build `build_id`'s report as seen from another report, ready for an HTML attribute."""
    return escape(quote(other_report(build_id)))
