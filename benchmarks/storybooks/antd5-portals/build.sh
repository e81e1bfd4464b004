#!/usr/bin/env bash
# Rebuilds storybook-static/ from the committed sources (Storybook 10, preview only, no source maps).
set -euo pipefail
cd "$(dirname "$0")"

npm ci --no-audit --no-fund
rm -rf storybook-static
npx storybook build --preview-only -o storybook-static --disable-telemetry
rm -rf storybook-static/sb-manager storybook-static/sb-addons storybook-static/index.html
find storybook-static -name '*.map' -delete

if [ "${KEEP_NODE_MODULES:-0}" != 1 ]; then rm -rf node_modules; fi
