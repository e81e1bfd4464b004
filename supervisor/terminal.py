"""Output made for a person at a terminal: as wide as their window, with paths that open from
the folder they stand in.

`build` and `status` print rows that are read in a window; a name or a reason too long for it is
cut with an ellipsis or wrapped (their JSON forms carry everything whole). A path or URL is never
cut or broken, since a piece of one opens nothing: one longer than the window stands whole on a
line of its own, and the terminal folds it without breaking a copy of it.
"""

from __future__ import annotations

import os
import shutil
import textwrap

#: The width when standard output is not a terminal and `COLUMNS` is unset: no limit. A pipe or
#: a CI log is read by `grep` or a scroller, not in a window, and a name cut there could not be
#: searched for or given to `review --snapshot`.
NO_LIMIT = 0
ELLIPSIS = "…"


def output_width() -> int:
    """The columns of the window standard output goes to, `COLUMNS` first (as
    `shutil.get_terminal_size` reads them); `NO_LIMIT` when it goes elsewhere."""
    return shutil.get_terminal_size((NO_LIMIT, 0)).columns


def cut(text: str, width: int, *, middle: bool = False) -> str:
    """`text` on one line (its indent kept) of at most `width` characters (`NO_LIMIT`: any), cut
    with an ellipsis at its end, or in its `middle` for a name whose two ends tell it apart from
    its neighbours ("components-forms-date-picker--with-range [320]")."""
    line = text[: len(text) - len(text.lstrip())] + " ".join(text.split())
    if width <= NO_LIMIT or len(line) <= width:
        return line
    kept = max(width - len(ELLIPSIS), 0)
    if not middle:
        return line[:kept] + ELLIPSIS
    head = (kept + 1) // 2
    return line[:head] + ELLIPSIS + line[len(line) - (kept - head) :]


def wrap(text: str, width: int, *, first: str = "", rest: str = "") -> list[str]:
    """`text` after `first` in lines of at most `width` characters (`NO_LIMIT`: one line), the
    lines after the first set in by `rest`; a path or URL longer than `width` is left whole on
    a line of its own."""
    line = first + text
    if width <= NO_LIMIT or len(line) <= width:
        return [line]
    return textwrap.wrap(
        text,
        width,
        initial_indent=first,
        subsequent_indent=rest,
        break_long_words=False,
        break_on_hyphens=False,
    )


def openable(where: str) -> str:
    """Where a stored file is (`ArtifactStore.where`: an absolute path, or a bucket's URL) in its
    shortest form that opens from the current folder: relative to it when that is shorter."""
    if not os.path.isabs(where):
        return where
    relative = os.path.relpath(where)
    return relative if len(relative) < len(where) else where
