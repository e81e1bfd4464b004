"""What a child sends back for each snapshot of a capture job: one contract for both sides.

The child fills a result with these keys (`child.capture.judge`), the parent refuses a result
with any key more or less (`supervisor.builds.capture`) and stores each in the snapshot's row. A
Storybook snapshot's result adds `ipc.storybook.STORY_RESULT_FIELDS`.
"""

from __future__ import annotations

#: The diff settings a result was judged with (a story's own folded in); None on a failed one.
SETTING_FIELDS = ("metric", "threshold", "flat_threshold", "count_aa")

#: The keys of every snapshot result.
RESULT_FIELDS = (
    "name",
    "status",
    "width",
    "height",
    "diff_pixels",
    "diff_ratio",
    "diff_path",
    # Around the pixels that counted: [left, top, width, height]; None when none did.
    "diff_box",
    *SETTING_FIELDS,
    "error",
    "baseline_id",
)
