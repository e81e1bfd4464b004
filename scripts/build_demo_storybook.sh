#!/bin/sh
# Rebuild the Storybook that `python -m supervisor demo` captures, in its two variants, from
# scripts/demo_storybook/ into supervisor/data/demo_storybook/{main,branch}/.
#
# The builds are committed and shipped as package data, so the demo needs neither node nor npm.
# Each is the preview only (iframe.html, index.json and their assets; the capture never loads
# the manager UI). project.json is left out: it is Storybook's telemetry summary, with build
# timestamps that would make every rebuild differ. So are the copies of Storybook's common
# assets (its UI font and favicons) that the build also puts at its root: the preview loads
# them from sb-common-assets/ only. Run this after changing the demo's sources
# or lock file, and commit the sources and both builds together.
set -eu
here="$(cd "$(dirname "$0")" && pwd)"
out="$here/../supervisor/data/demo_storybook"
cd "$here/demo_storybook"
nice -n 19 npm ci --no-audit --no-fund
for variant in main branch; do
    rm -rf "$out/$variant"
    DEMO_VARIANT="$variant" nice -n 19 npx storybook build -o "$out/$variant" --preview-only --quiet
    rm -f "$out/$variant/project.json"
    for asset in "$out/$variant"/sb-common-assets/*; do
        copy="$out/$variant/$(basename "$asset")"
        if cmp -s "$asset" "$copy"; then rm "$copy"; fi
    done
done
du -sh "$out/main" "$out/branch"
