#!/bin/sh
# Rebuild tests/fixtures/storybook/storybook-static/ and hostile-static/ from the fixture's sources.
#
# The static build is committed so that the capture tests and CI need neither node nor npm:
# they serve this folder as CI would hand it to the host. Run this after changing the
# fixture's stories, config or lock file, and commit the sources and the new build together.
# It builds the preview only (iframe.html, index.json and their assets; no manager UI, which
# the capture never loads), keeping the committed folder small.
set -eu
cd "$(dirname "$0")/../tests/fixtures/storybook"
nice -n 19 npm ci --no-audit --no-fund
rm -rf storybook-static hostile-static
nice -n 19 npx storybook build -o storybook-static --preview-only --quiet
# The hostile Storybook: the same packages, its own stories and config (.storybook-hostile).
nice -n 19 npx storybook build -c .storybook-hostile -o hostile-static --preview-only --quiet
