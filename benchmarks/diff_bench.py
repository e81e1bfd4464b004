"""Time child.diff.compare against the floor (decoding both PNGs) and the reference tools.

Run ``python benchmarks/diff_bench.py [--runs N]``. For each size it renders a screenshot-like
page and two variants: ``changed`` (a paragraph moved 1px, a button recoloured, a badge added)
and ``same-pixels`` (the same pixels saved at another zlib level, so the bytes differ). Every
tool reads both PNG files, compares, and writes a diff PNG when there is a difference:

- floor: pyvips decoding both files into memory, nothing else;
- ours: ``compare`` in this warm process, ``yiq`` 0.1 (odiff's metric) and our defaults;
- pixelmatch 8 (OKLab 0.1): pngjs decode + pixelmatch + pngjs encode, timed inside node, so
  node's start-up is excluded;
- odiff CLI (YIQ 0.1, anti-aliasing ignored): one process per pair, start-up included, as a
  CI step would run it; odiff server: odiff-bin's ``ODiffServer`` with a warm process, timed
  in node around each request.

Times are medians of ``--runs`` runs (the machine is shared). Each size is measured once for
each ``--vips-threads`` setting (default: libvips' own, all cores, then 1, as a host with one
child per core runs it; the same knob, ``pyvips.concurrency_set``, that a child's ``threads``
sets), every tool again beside ours, so that each ratio compares figures taken together.
A summary then gives, for the changed pairs, ours (defaults) over odiff's server and
pixelmatch 8 over ours. The npm tools are installed on first use into ``benchmarks/.npm`` with
``npm install --no-save``.

The byte-identical case a host settles without decoding is ``benchmarks/settle_bench.py``'s.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import pyvips

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from child.diff.compare import DiffOptions, compare

HERE = Path(__file__).resolve().parent
NPM = HERE / ".npm"
SIZES = [(1280, 800), (1920, 1080), (3840, 2160)]
# libvips' own number of threads (one per core, or VIPS_CONCURRENCY), read before any change.
ALL_CORES = pyvips.concurrency_get()
LOREM = (
    "Visual regression testing compares each new screenshot with its approved baseline and "
    "flags the pixels that changed. Anti-aliased text edges, sub-pixel layout shifts and colour "
    "tokens all leave different traces, which is why the comparison is layered. "
) * 40

# Each mode prints {"times": [ms, ...], "count": n} after one untimed warm-up run.
NODE_RUNNER = r"""
import fs from 'node:fs';
import {createRequire} from 'node:module';
import {PNG} from 'pngjs';
import pixelmatch from 'pixelmatch';
const require = createRequire(import.meta.url);
const [mode, a, b, out, runs] = process.argv.slice(2);
const times = [];
let count = 0;
async function once() {
    if (mode === 'pixelmatch') {
        const img1 = PNG.sync.read(fs.readFileSync(a));
        const img2 = PNG.sync.read(fs.readFileSync(b));
        const {width, height} = img1;
        const diff = new PNG({width, height});
        count = pixelmatch(img1.data, img2.data, diff.data, width, height, {threshold: 0.1});
        if (count) fs.writeFileSync(out, PNG.sync.write(diff));
    } else {
        const result = await server.compare(a, b, out, {threshold: 0.1, antialiasing: true});
        count = result.match ? 0 : result.diffCount ?? -1;
    }
}
const server = mode === 'odiff-server'
    ? new (require('odiff-bin/server.js').ODiffServer)() : null;
await once();
for (let i = 0; i < Number(runs); i++) {
    const start = process.hrtime.bigint();
    await once();
    times.push(Number(process.hrtime.bigint() - start) / 1e6);
}
server?.stop();
console.log(JSON.stringify({times, count}));
"""


@dataclass(frozen=True)
class Timing:
    tool: str
    ms: float
    count: int | None


def ensure_npm_tools() -> None:
    """Install pixelmatch 8, pngjs and odiff-bin into benchmarks/.npm once."""
    if (NPM / "node_modules" / "odiff-bin").exists():
        return
    NPM.mkdir(exist_ok=True)
    shutil.copy(HERE / "package.json", NPM / "package.json")
    subprocess.run(
        ["npm", "install", "--no-save", "--no-package-lock", "--no-audit", "--no-fund"],
        cwd=NPM,
        check=True,
    )


def text(markup: str, width: int, size: int) -> pyvips.Image:
    return pyvips.Image.text(markup, font=f"DejaVu Sans {size}", width=width, dpi=72)


def page(width: int, height: int, *, variant: bool) -> pyvips.Image:
    """A document page: header bar, heading, wrapped body text in two columns, a button."""
    scale = width / 1280
    size = round(13 * scale)
    canvas = (pyvips.Image.black(width, height, bands=3) + 255).cast("uchar")
    canvas = canvas.draw_rect([243, 244, 246], 0, 0, width, round(56 * scale), fill=True)
    column = width // 2 - round(48 * scale)

    def ink(mask: pyvips.Image, colour: list[int], x: int, y: int) -> pyvips.Image:
        placed = mask.crop(0, 0, min(mask.width, width - x), min(mask.height, height - y))
        return placed.embed(x, y, width, height).ifthenelse(colour, canvas, blend=True)

    canvas = ink(text("<b>Release notes</b>", width, size * 2), [17, 24, 39], 32, round(80 * scale))
    body = text(LOREM, column, size)
    top = round(140 * scale)
    canvas = ink(body, [55, 65, 81], 32, top)
    canvas = ink(body, [55, 65, 81], width // 2 + (1 if variant else 0), top)
    button = [29, 78, 216] if variant else [37, 99, 235]
    canvas = canvas.draw_rect(
        button, 32, height - round(80 * scale), round(140 * scale), round(40 * scale), fill=True
    )
    if variant:
        canvas = canvas.draw_rect(
            [220, 38, 38],
            width - round(160 * scale),
            round(12 * scale),
            round(120 * scale),
            round(32 * scale),
            fill=True,
        )
    return canvas.cast("uchar")


def make_pairs(folder: Path, width: int, height: int) -> dict[str, tuple[Path, Path]]:
    base = page(width, height, variant=False)
    paths = {name: folder / f"{width}x{height}-{name}.png" for name in ("base", "b6", "new")}
    base.pngsave(str(paths["base"]), compression=1)
    base.pngsave(str(paths["b6"]), compression=6)
    page(width, height, variant=True).pngsave(str(paths["new"]), compression=1)
    return {"changed": (paths["base"], paths["new"]), "same-pixels": (paths["base"], paths["b6"])}


def median_ms(run: Callable[[], int | None], runs: int) -> Timing:
    count = run()  # warm-up, and the count
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        run()
        times.append((time.perf_counter() - start) * 1000)
    return Timing("", statistics.median(times), count)


def floor(a: Path, b: Path) -> None:
    for path in (a, b):
        pyvips.Image.new_from_file(str(path), access="sequential").copy_memory()


def ours(a: Path, b: Path, out: Path, options: DiffOptions) -> int:
    return compare(a, b, out, options).diff_pixels


def odiff_cli(a: Path, b: Path, out: Path) -> int:
    odiff = NPM / "node_modules" / ".bin" / "odiff"
    args = [str(odiff), str(a), str(b), str(out), "--threshold", "0.1", "--antialiasing"]
    done = subprocess.run([*args, "--parsable-stdout"], capture_output=True, text=True)
    return int(done.stdout.split(";")[0]) if done.stdout.strip() else 0


def node(mode: str, a: Path, b: Path, out: Path, runs: int) -> Timing:
    script = NPM / "runner.mjs"
    script.write_text(NODE_RUNNER)
    done = subprocess.run(
        ["node", str(script), mode, str(a), str(b), str(out), str(runs)],
        capture_output=True,
        text=True,
        check=True,
        cwd=NPM,
    )
    report = json.loads(done.stdout.strip().splitlines()[-1])
    return Timing(mode, statistics.median(report["times"]), report["count"])


def bench_pair(a: Path, b: Path, folder: Path, runs: int) -> list[Timing]:
    out = folder / "diff.png"
    yiq = DiffOptions(metric="yiq", threshold=0.1, flat_threshold=None)
    rows = [
        ("floor (pyvips decode)", lambda: floor(a, b)),
        ("ours yiq 0.1", lambda: ours(a, b, out, yiq)),
        ("ours defaults", lambda: ours(a, b, out, DiffOptions())),
        ("odiff CLI", lambda: odiff_cli(a, b, out)),
    ]
    timings = [
        Timing(name, timing.ms, timing.count)
        for name, run in rows
        for timing in [median_ms(run, runs)]
    ]
    timings.append(replace(node("odiff-server", a, b, out, runs), tool="odiff server"))
    timings.append(replace(node("pixelmatch", a, b, out, runs), tool="pixelmatch 8 (node)"))
    return timings


def vips_threads(setting: str) -> int:
    """``all`` (libvips' default, one per core) or a number of threads."""
    return ALL_CORES if setting == "all" else int(setting)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--vips-threads",
        type=vips_threads,
        nargs="+",
        default=[ALL_CORES, 1],
        help="libvips threads for ours and the floor: 'all' (its default) or N; each is a pass",
    )
    arguments = parser.parse_args()
    runs = arguments.runs
    ensure_npm_tools()
    print(f"libvips threads: {ALL_CORES} by default (vips column)")
    print(
        f"{'size':>10} {'pair':<12} {'vips':>4} {'tool':<22} {'ms':>9} {'count':>8}"
        f" {'x floor':>8} {'x odiff':>8}"
    )
    summary: list[str] = []
    with tempfile.TemporaryDirectory() as temporary:
        folder = Path(temporary)
        for width, height in SIZES:
            pairs = make_pairs(folder, width, height)
            for threads in arguments.vips_threads:
                pyvips.concurrency_set(threads)
                label = str(threads)
                for pair, (a, b) in pairs.items():
                    timings = bench_pair(a, b, folder, runs)
                    base = timings[0].ms
                    odiff = next(t.ms for t in timings if t.tool == "odiff CLI")
                    for t in timings:
                        count = "" if t.count is None else str(t.count)
                        print(
                            f"{width}x{height:<5} {pair:<12} {label:>4} {t.tool:<22} {t.ms:9.1f}"
                            f" {count:>8} {t.ms / base:8.2f} {t.ms / odiff:8.2f}"
                        )
                    if pair == "changed":
                        ms = {t.tool: t.ms for t in timings}
                        ours, server = ms["ours defaults"], ms["odiff server"]
                        pixelmatch = ms["pixelmatch 8 (node)"]
                        summary.append(
                            f"{width}x{height:<5} {label:>4} {ours:9.1f} {server:9.1f}"
                            f" {pixelmatch:9.1f} {ours / server:9.2f} {pixelmatch / ours:9.2f}"
                        )
        pyvips.concurrency_set(ALL_CORES)
    print("\nchanged pairs: ours (defaults) against odiff's server and pixelmatch 8, ms")
    print(
        f"{'size':>10} {'vips':>4} {'ours':>9} {'server':>9} {'pm 8':>9}"
        f" {'ours/srv':>9} {'pm8/ours':>9}"
    )
    print("\n".join(summary))


if __name__ == "__main__":
    main()
