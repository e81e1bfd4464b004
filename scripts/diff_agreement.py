"""How often each diff setting agrees with the labelled Chromium screenshots: README's table.

`python scripts/diff_agreement.py` compares every pair of `tests/fixtures/screens` with this
host's defaults and reads the reference tools' counts stored beside the pairs (pixelmatch 7.1
and 8.0 in `expected.json`, odiff in `odiff.json`, made by `scripts/make_diff_fixtures.mjs`).
A setting agrees with a pair's label when it counts no pixel on an `unchanged` pair and at
least one on a `changed` one. Prints a Markdown table, by category, and then each pair a
setting got wrong.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from child.diff.compare import DiffOptions, compare

SCREENS = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "screens"
#: Column title -> (file, key) of the stored reference counts; `None` is this host's defaults.
SETTINGS: dict[str, tuple[str, str] | None] = {
    "Storyshelf defaults": None,
    "pixelmatch 7.1 (yiq 0.1)": ("expected.json", "yiq 0.1"),
    "pixelmatch 8.0 (oklab 0.1)": ("expected.json", "oklab 0.1"),
    "pixelmatch 8.0 at 0.05": ("expected.json", "oklab 0.05"),
    "odiff 4 (defaults)": ("odiff.json", "odiff"),
    "odiff 4 --antialiasing": ("odiff.json", "odiff aa"),
}


def counts() -> dict[str, dict[str, int]]:
    """Setting -> pair -> differing pixels."""
    stored = {
        name: json.loads((SCREENS / name).read_text()) for name in ("expected.json", "odiff.json")
    }
    labels = json.loads((SCREENS / "labels.json").read_text())
    table: dict[str, dict[str, int]] = {}
    for setting, source in SETTINGS.items():
        if source is None:
            table[setting] = {
                name: compare(
                    SCREENS / f"{name}.a.png", SCREENS / f"{name}.b.png", None, DiffOptions()
                ).diff_pixels
                for name in labels
            }
        else:
            file, key = source
            table[setting] = {name: int(stored[file][name][key]) for name in labels}
    return table


def main() -> None:
    labels: dict[str, dict[str, str]] = json.loads((SCREENS / "labels.json").read_text())
    table = counts()
    categories: dict[str, list[str]] = defaultdict(list)
    for name, label in labels.items():
        categories[f"{label['category']} ({label['label']})"].append(name)

    def agree(setting: str, names: list[str]) -> int:
        return sum((table[setting][n] > 0) == (labels[n]["label"] == "changed") for n in names)

    print("| category | pairs | " + " | ".join(SETTINGS) + " |")
    print("|---|--:|" + "--:|" * len(SETTINGS))
    for category, names in sorted(
        categories.items(), key=lambda item: item[0].split(" (")[1] + item[0]
    ):
        cells = [f"{agree(setting, names)}" for setting in SETTINGS]
        print(f"| {category} | {len(names)} | " + " | ".join(cells) + " |")
    everything = list(labels)
    cells = [f"**{agree(s, everything)}/{len(everything)}**" for s in SETTINGS]
    print(f"| all | {len(everything)} | " + " | ".join(cells) + " |")
    print()
    for setting in SETTINGS:
        wrong = [
            f"{n} ({table[setting][n]})"
            for n in everything
            if (table[setting][n] > 0) != (labels[n]["label"] == "changed")
        ]
        print(f"{setting}: {', '.join(wrong) or 'none wrong'}")


if __name__ == "__main__":
    main()
