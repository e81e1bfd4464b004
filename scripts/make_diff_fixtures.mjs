// Recompute the reference counts of the diff fixture folders, so the Python tests need no node:
// `cd scripts && npm install --no-save && node make_diff_fixtures.mjs [FOLDER...]`
// (folders relative to the repository root or absolute; by default tests/fixtures/diff and
// tests/fixtures/screens).
//
// Every pair NAME.a.png / NAME.b.png of a folder is decoded by pngjs (as pixelmatch's own CLI
// does) and counted by pixelmatch 7.1.0 (YIQ) and 8.0.0 (OKLab HyAB) at thresholds 0.1 and 0.05,
// with and without includeAA ("aa": anti-aliased pixels counted), into the folder's
// expected.json. Pixelmatch needs equal sizes: pairs of different sizes are compared on their
// overlap and the rest of the union box max(w) x max(h) is added, as child/diff/compare.py
// counts them.
//
// The folder's odiff.json holds odiff's counts (odiff-bin, its CLI binary, on the files): "odiff"
// at its defaults (YIQ, threshold 0.1, anti-aliased pixels counted) and "odiff aa" with
// --antialiasing, which in odiff means the opposite of pixelmatch's includeAA: anti-aliased
// pixels are ignored. They are a file of their own because the tests read every key of
// expected.json as "metric threshold [aa]" of pixelmatch. odiff decodes with its own PNG decoder
// and compares images of different sizes itself: it counts the pixels of either image outside
// their overlap (the union box less the corner that lies in neither image; the same as the
// union box when one side only differs).

import {spawnSync} from 'node:child_process';
import fs from 'node:fs';
import {createRequire} from 'node:module';
import path from 'node:path';
import {fileURLToPath} from 'node:url';
import {PNG} from 'pngjs';
import pixelmatch7 from 'pixelmatch7';
import pixelmatch8 from 'pixelmatch8';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.join(here, '..');
const DEFAULT_FOLDERS = ['tests/fixtures/diff', 'tests/fixtures/screens'];
// The path of the binary that odiff-bin's own `odiff` command and its compare() run: the
// platform package's (@odiff/linux-x64 and so on).
const {findBinary} = createRequire(import.meta.url)('odiff-bin/binary.js');

// [key, reference function, threshold, includeAA]
const RUNS = [
    ['yiq 0.1', pixelmatch7, 0.1, false],
    ['yiq 0.1 aa', pixelmatch7, 0.1, true],
    ['yiq 0.05', pixelmatch7, 0.05, false],
    ['yiq 0.05 aa', pixelmatch7, 0.05, true],
    ['oklab 0.1', pixelmatch8, 0.1, false],
    ['oklab 0.1 aa', pixelmatch8, 0.1, true],
    ['oklab 0.05', pixelmatch8, 0.05, false],
    ['oklab 0.05 aa', pixelmatch8, 0.05, true],
];

// [key, extra odiff arguments]
const ODIFF_RUNS = [
    ['odiff', []],
    ['odiff aa', ['--antialiasing']],
];

function crop(png, width, height) {
    const out = new Uint8Array(width * height * 4);
    for (let y = 0; y < height; y++) {
        out.set(png.data.subarray(y * png.width * 4, (y * png.width + width) * 4), y * width * 4);
    }
    return out;
}

function counts(a, b) {
    const width = Math.min(a.width, b.width);
    const height = Math.min(a.height, b.height);
    const outside = Math.max(a.width, b.width) * Math.max(a.height, b.height) - width * height;
    const result = {};
    for (const [key, match, threshold, includeAA] of RUNS) {
        result[key] = outside + match(crop(a, width, height), crop(b, width, height), null, width, height, {threshold, includeAA});
    }
    return result;
}

// odiff exits 0 when the images match and 22 with "count;percentage" on stdout when pixels
// differ (--parsable-stdout). No diff image is asked for, so it writes nothing.
function odiff(a, b, extra) {
    const run = spawnSync(findBinary(), [a, b, '--parsable-stdout', ...extra], {encoding: 'utf8'});
    if (run.status === 0) return 0;
    const count = run.stdout.trim().split(';')[0];
    if (run.status !== 22 || !/^\d+$/.test(count)) {
        throw new Error(`odiff ${a} ${b} ${extra.join(' ')}: exit ${run.status}: ${run.stdout}${run.stderr}`);
    }
    return Number(count);
}

function odiffCounts(a, b) {
    return Object.fromEntries(ODIFF_RUNS.map(([key, extra]) => [key, odiff(a, b, extra)]));
}

function write(folder, name, table) {
    fs.writeFileSync(path.join(folder, name), JSON.stringify(table, null, 2) + '\n');
}

for (const relative of process.argv.length > 2 ? process.argv.slice(2) : DEFAULT_FOLDERS) {
    const folder = path.resolve(root, relative);
    const expected = {};
    const odiffs = {};
    for (const file of fs.readdirSync(folder).filter(f => f.endsWith('.a.png')).sort()) {
        const name = file.slice(0, -'.a.png'.length);
        const [a, b] = ['.a.png', '.b.png'].map(suffix => path.join(folder, name + suffix));
        expected[name] = counts(PNG.sync.read(fs.readFileSync(a)), PNG.sync.read(fs.readFileSync(b)));
        odiffs[name] = odiffCounts(a, b);
    }
    write(folder, 'expected.json', expected);
    write(folder, 'odiff.json', odiffs);
    console.log(`${path.relative(root, folder)}: ${Object.keys(expected).length} pairs`);
}
