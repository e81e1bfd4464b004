// Recompute tests/fixtures/diff/expected.json with the reference tools, so the Python tests
// need no node: `cd scripts && npm install --no-save && node make_diff_fixtures.mjs`.
//
// Every pair NAME.a.png / NAME.b.png is decoded by pngjs (as pixelmatch's own CLI does) and
// counted by pixelmatch 7.1.0 (YIQ) and 8.0.0 (OKLab HyAB), with and without includeAA.
// Pixelmatch needs equal sizes: pairs of different sizes are compared on their overlap and
// the rest of the union box max(w) x max(h) is added, as child/diff.py counts them.

import fs from 'node:fs';
import path from 'node:path';
import {fileURLToPath} from 'node:url';
import {PNG} from 'pngjs';
import pixelmatch7 from 'pixelmatch7';
import pixelmatch8 from 'pixelmatch8';

const here = path.dirname(fileURLToPath(import.meta.url));
const folder = path.join(here, '..', 'tests', 'fixtures', 'diff');

// [key, reference function, threshold, includeAA]
const RUNS = [
    ['yiq 0.1', pixelmatch7, 0.1, false],
    ['yiq 0.1 aa', pixelmatch7, 0.1, true],
    ['oklab 0.1', pixelmatch8, 0.1, false],
    ['oklab 0.1 aa', pixelmatch8, 0.1, true],
    ['oklab 0.05', pixelmatch8, 0.05, false],
    ['oklab 0.05 aa', pixelmatch8, 0.05, true],
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

const expected = {};
for (const file of fs.readdirSync(folder).filter(f => f.endsWith('.a.png')).sort()) {
    const name = file.slice(0, -'.a.png'.length);
    const read = suffix => PNG.sync.read(fs.readFileSync(path.join(folder, name + suffix)));
    expected[name] = counts(read('.a.png'), read('.b.png'));
}
fs.writeFileSync(path.join(folder, 'expected.json'), JSON.stringify(expected, null, 2) + '\n');
console.log(expected);
