"""Record what a Storybook static build's preview says of its stories, for the plan's unit tests.

    python scripts/record_storybook_extract.py tests/fixtures/storybook/storybook-static \
        tests/fixtures/storybook/extract.json

Serves the build on loopback, opens its iframe.html in Chromium, and writes the preview's
`extract()` (each story's id, title, name, tags, parameters, globals and storyGlobals) and its
initial globals as JSON, so `tests/unit/test_story_parameters.py` plans the real shapes without
a browser. Run it again after rebuilding the build.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from playwright.sync_api import sync_playwright

from ipc.storybook import configured_chromium

#: The fields of a story's record the plan reads; the rest (args, argTypes, ...) is left out.
FIELDS = ("id", "title", "name", "tags", "parameters", "globals", "storyGlobals")

EXTRACT = """async () => {
  const preview = window.__STORYBOOK_PREVIEW__;
  await preview.ready();
  const stories = await preview.extract();
  return { stories, initialGlobals: preview.storyStoreValue.userGlobals.initialGlobals };
}"""


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def record(build: Path) -> dict[str, Any]:
    handler = functools.partial(QuietHandler, directory=str(build))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=configured_chromium(),
                args=["--no-sandbox"] if os.geteuid() == 0 else [],
            )
            page = browser.new_page()
            page.goto(f"http://127.0.0.1:{server.server_port}/iframe.html")
            page.wait_for_function("() => window.__STORYBOOK_PREVIEW__ !== undefined")
            data: dict[str, Any] = page.evaluate(EXTRACT)
            browser.close()
    finally:
        server.shutdown()
    return {
        "initialGlobals": data["initialGlobals"],
        "stories": {
            story_id: {field: story.get(field) for field in FIELDS}
            for story_id, story in data["stories"].items()
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("build", type=Path, help="a Storybook static build (storybook-static/)")
    parser.add_argument("output", type=Path, help="the JSON file to write")
    arguments = parser.parse_args()
    document = record(arguments.build)
    arguments.output.write_text(json.dumps(document, indent=1) + "\n")


if __name__ == "__main__":
    main()
