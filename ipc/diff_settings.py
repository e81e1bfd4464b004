"""The diff settings a project stores and a child applies, defined once for both sides.

The parent keeps them on the project row (`supervisor.builds.projects`) and sends them with each
capture job; the child compares with them (`child.diff.compare`). A default here is the default
everywhere: a new project's row, the child's `DiffOptions()`, and what README documents.
"""

from __future__ import annotations

from typing import Literal, get_args

#: The colour distance: pixelmatch 7's YIQ (also odiff's and reg-cli's), or pixelmatch 8's HyAB
#: distance in Oklab.
Metric = Literal["yiq", "oklab"]
METRICS: tuple[Metric, ...] = get_args(Metric)

DEFAULT_METRIC: Metric = "oklab"
#: pixelmatch's default threshold, in its units (share of the metric's largest distance).
DEFAULT_THRESHOLD = 0.1
#: The finer pass (`child.diff.compare._finer_pass`): this threshold where both images are flat,
#: so a one-step colour token there is a change, and sub-pixel shifts of edges forgiven. None
#: turns the pass off, and counts are then pixelmatch's exactly. Chosen on the labelled
#: Chromium screenshots of `tests/fixtures/screens`: every label holds from 0.01 to 0.04.
DEFAULT_FLAT_THRESHOLD: float | None = 0.02
#: pixelmatch's `includeAA`: anti-aliased pixels do not count as differing unless asked.
DEFAULT_COUNT_AA = False
#: Differing pixels a snapshot may have and still be `unchanged`.
DEFAULT_BUDGET_PIXELS = 0
