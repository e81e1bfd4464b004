"""The HTML report of a build: one self-contained page, written once the build's end commits.

Where each part lives:

- `publish`: writing the page atomically after the build ended, and recording where it is; a
  report that cannot be written never fails the build (`publish_report`, `with_report`);
- `paths`: where reports live, and the relative links from a report to images and to other
  builds' reports;
- `render`: the page (header, filter, groups), with `report.css` and `report.js` inlined;
- `snapshot`: one snapshot's section, crop, full images and overlay;
- `crop`: the arithmetic of the enlarged crop of a changed area;
- `report.css`, `report.js`: the page's look and behaviour (filter, keys, overlay, zoom,
  images loaded on demand), kept as files of their own so that each reads as what it is.
"""

from supervisor.builds.report.paths import REPORTS_FOLDER, report_path
from supervisor.builds.report.publish import publish_report, with_report
from supervisor.builds.report.render import render_report

__all__ = ["REPORTS_FOLDER", "publish_report", "render_report", "report_path", "with_report"]
