"""Capture one Storybook build with this host and with storycap, side by side.

Run ``python benchmarks/capture_bench.py [--stories N] [--runs R] [--storybook DIR]``. Both tools
capture the same static Storybook build, in the same invocation, alternating run by run:

- the build: the fixture project of ``tests/fixtures/storybook/`` (its lock file, config, design
  tokens and web font) with its own stories replaced by N generated ones (default 300): plain
  panels of varying width, colour, text and list length, deterministic and cheap to render, so
  the figures are about capturing, not about the failure handling the fixture's hanging,
  throwing and external-image stories exercise. It is built once (``npm ci``, ``storybook
  build``) into ``benchmarks/.cache/storybook-<key>/``, keyed by the SHA-256 of every source file
  the generator writes, so a repeated run skips the build. With ``--storybook DIR``, that static
  build instead, as it is: a real-world one of ``tests/fixtures/realworld/*/storybook-static``,
  with its animations, play functions, fonts and failures;
- this host, through its command line as a user runs it, in a fresh temporary folder per run
  (a SQLite file and an artifacts folder): ``migrate`` and ``enqueue-build --storybook`` (not
  timed), then ``run --drain --concurrency 2`` (timed: start-up, the ``plan`` job, the captures
  and the exit), then ``build ID --json`` for the results. Then the same again in the same
  folder (the "unchanged" row): the project's second build of the same Storybook, where every
  story has its baseline, as in a pull request that changes nothing visible, the common case in
  CI. When the build does not end with its snapshots, its row says why;
- storycap (npm, pinned in ``benchmarks/storycap/``, installed by ``npm ci`` into
  ``benchmarks/.cache/``), in simple mode (no addon in the Storybook), on the browser this host
  takes (``--chromiumPath``: Debian's headless shell when installed, `ipc.storybook`), with 2
  browsers (``--parallel 2``) and the host's default viewport, against the build served on
  loopback by a thread of this process.

For each run: stories captured; stories per second (captured / wall time of the capturing
process, start-up and exit included); the first story's latency (from the process's start to
the first PNG under its output folder, polled every 20 ms); peak memory per slot (the PSS of the
process's whole tree, browsers included, sampled every 500 ms, the peak divided by the 2 slots);
and how many stories differ between this run and the previous one of the same tool (images
whose bytes differ, or that one run has and the other not). The table shows medians of ``--runs``
runs (at least 2, for the last column); the machine is shared, so read ratios, not absolute
times.

A second table splits a story's time in this host's children by phase, for each host row (the ``story timings``
each capture job logs, `child.browser.stopwatch`), in milliseconds per story, beside each tool's
wall time per story and slot (wall time x slots / stories): what a slot spends on a story,
start-up and the plan included, against what the story itself took.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import http.server
import itertools
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_args

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import psutil  # noqa: E402

from benchmarks.queue_bench import print_table  # noqa: E402
from child.browser.stopwatch import Phase  # noqa: E402
from ipc.storybook import configured_chromium  # noqa: E402

HERE = Path(__file__).resolve().parent
CACHE = HERE / ".cache"
FIXTURE = REPO / "tests" / "fixtures" / "storybook"
STORYCAP_PACKAGE = HERE / "storycap"
CHROMIUM = configured_chromium()
#: One child (host) or one browser (storycap) per slot.
SLOTS = 2
#: The host's default viewport (`ipc.storybook.DEFAULT_VIEWPORT_*`), given to storycap too.
VIEWPORT = "1200x900"
STORIES_PER_FILE = 10
#: The fixture's files the generated project keeps (its own stories are left out).
FIXTURE_FILES = (
    "package.json",
    "package-lock.json",
    ".npmrc",
    ".storybook/main.js",
    ".storybook/preview.js",
    ".storybook/preview-head.html",
    "stories/tokens.css",
    "public/fonts/inter-latin-400-normal.woff2",
    "public/fonts/OFL.txt",
)
#: The preview only, as the fixture is built: the host never loads the manager, and storycap's
#: crawler reads the story list from the preview (`__STORYBOOK_PREVIEW__`), not the manager.
BUILD_COMMAND = ("npx", "storybook", "build", "-o", "storybook-static", "--preview-only", "--quiet")
FIRST_IMAGE_POLL_SECONDS = 0.020
#: One reading of a Chromium tree's PSS (~20 processes) costs ~60 ms of kernel time here (the
#: kernel walks every mapping of every process), so a reading every 100 ms would take a third of
#: a core from the tools measured; every 500 ms it takes ~6 % of one.
MEMORY_SAMPLE_SECONDS = 0.500
#: Longest one capture run may take before the bench gives up on it.
RUN_TIMEOUT_SECONDS = 1800.0
MIB = 2**20

PANEL_JS = """\
// The generated stories' one component: a panel of a given width, hue and text, plain DOM.
export function createPanel({ title, width, hue, lines, items, action }) {
  const panel = document.createElement('section');
  panel.style.cssText =
    `width: ${width}px; padding: var(--space); border: 2px solid hsl(${hue} 55% 45%);` +
    `border-radius: var(--radius); background: hsl(${hue} 80% 97%);`;
  const heading = document.createElement('h3');
  heading.textContent = title;
  heading.style.cssText = `margin: 0 0 8px; font-size: 16px; color: hsl(${hue} 70% 25%);`;
  panel.append(heading);
  for (const line of lines) {
    const paragraph = document.createElement('p');
    paragraph.textContent = line;
    paragraph.style.cssText = 'margin: 0 0 6px; font-size: 14px; line-height: 1.4;';
    panel.append(paragraph);
  }
  if (items.length) {
    const list = document.createElement('ul');
    list.style.cssText = 'margin: 0 0 8px; padding-left: 20px; font-size: 13px;';
    for (const item of items) {
      const entry = document.createElement('li');
      entry.textContent = item;
      list.append(entry);
    }
    panel.append(list);
  }
  const button = document.createElement('button');
  button.type = 'button';
  button.className = 'sf-button';
  button.textContent = action;
  button.style.cssText = `background: hsl(${hue} 65% 40%); color: #fff;`;
  panel.append(button);
  return panel;
}
"""

#: The generated text's vocabulary.
VOCABULARY = (
    "build baseline snapshot story shard capture preview manager token colour border radius "
    "spacing heading paragraph button panel layout review branch commit accept reject viewport "
    "pixel threshold browser render settle font image report"
)
WORDS = VOCABULARY.split()


def story_args(index: int) -> dict[str, Any]:
    """The generated story `index`'s arguments: a fixed function of the index, no randomness."""
    words = [WORDS[(index * 7 + k * 3) % len(WORDS)] for k in range(24)]
    lines = [
        " ".join(words[k * 6 : k * 6 + 4 + (index + k) % 3]).capitalize() + "."
        for k in range(1 + index % 4)
    ]
    return {
        "title": f"Panel {index:03d}: {words[0]} {words[1]}",
        "width": 160 + (index * 37) % 9 * 60,
        "hue": (index * 47) % 360,
        "lines": lines,
        "items": [f"{words[k]} {index % (k + 2)}" for k in range(index % 5)],
        "action": words[2].capitalize(),
    }


def story_file(group: int, indices: Sequence[int]) -> str:
    """One generated CSF file: a title per group, a story per index (`Story007` -> `Story 007`)."""
    lines = [
        "// Generated by benchmarks/capture_bench.py: plain panels, deterministic and cheap.",
        "import { createPanel } from './panel.js';",
        "",
        f"export default {{ title: 'Generated/Group {group:02d}', render: (args) => createPanel(args) }};",
        "",
    ]
    lines += [
        f"export const Story{i:03d} = {{ args: {json.dumps(story_args(i))} }};" for i in indices
    ]
    return "\n".join(lines) + "\n"


def storybook_sources(stories: int) -> dict[str, bytes]:
    """Every file of the generated Storybook project, by path: the fixture's kept files and the
    generated stories."""
    files = {path: (FIXTURE / path).read_bytes() for path in FIXTURE_FILES}
    files["stories/panel.js"] = PANEL_JS.encode()
    for group, start in enumerate(range(0, stories, STORIES_PER_FILE), 1):
        indices = range(start, min(start + STORIES_PER_FILE, stories))
        files[f"stories/group-{group:02d}.stories.js"] = story_file(group, indices).encode()
    return files


def sources_key(files: dict[str, bytes]) -> str:
    """A cache folder's key: changing any file, or its path, builds or installs afresh."""
    digest = hashlib.sha256()
    for path, data in sorted(files.items()):
        digest.update(f"{path}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()[:16]


def npm_ci(folder: Path) -> None:
    """Install `folder`'s locked packages; npm's output goes to stderr, off the report."""
    subprocess.run(
        ["npm", "ci", "--no-audit", "--no-fund"], cwd=folder, check=True, stdout=sys.stderr
    )


def ensure_storybook(stories: int) -> Path:
    """The static build of the generated Storybook, built on the first call for these sources."""
    files = storybook_sources(stories)
    key = sources_key({**files, "(build command)": " ".join(BUILD_COMMAND).encode()})
    project = CACHE / f"storybook-{key}"
    static = project / "storybook-static"
    done = project / ".built"
    if done.exists():
        return static
    print(f"building a Storybook of {stories} stories in {project} ...", file=sys.stderr)
    shutil.rmtree(project, ignore_errors=True)
    for path, data in files.items():
        (project / path).parent.mkdir(parents=True, exist_ok=True)
        (project / path).write_bytes(data)
    npm_ci(project)
    subprocess.run(
        BUILD_COMMAND,
        cwd=project,
        check=True,
        stdout=sys.stderr,
        env={**os.environ, "STORYBOOK_DISABLE_TELEMETRY": "1"},
    )
    done.touch()
    return static


def ensure_storycap() -> Path:
    """storycap's command, installed on first use from `benchmarks/storycap/`'s lock file."""
    names = ("package.json", "package-lock.json", ".npmrc")
    files = {name: (STORYCAP_PACKAGE / name).read_bytes() for name in names}
    folder = CACHE / f"storycap-{sources_key(files)}"
    command = folder / "node_modules" / ".bin" / "storycap"
    done = folder / ".installed"
    if done.exists():
        return command
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (folder / name).write_bytes(data)
    npm_ci(folder)
    done.touch()
    return command


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextlib.contextmanager
def serve(folder: Path) -> Iterator[str]:
    """The folder served on loopback by a thread of this process, as storycap's docs serve a
    static build; yields its URL."""
    handler = functools.partial(QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def tree_pss(pid: int) -> int:
    """The PSS of a process and all its descendants, in bytes; processes that end while being
    read count nothing."""
    try:
        root = psutil.Process(pid)
        family = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0
    total = 0
    for process in family:
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            total += process.memory_full_info().pss
    return total


def pngs(folder: Path) -> Iterator[str]:
    for parent, _, names in os.walk(folder):
        yield from (os.path.join(parent, name) for name in names if name.endswith(".png"))


class Watch:
    """While a capturing process runs: when the first PNG appears under `images` (one that was
    not there before it started), and the peak PSS of the process's tree."""

    def __init__(
        self, process: subprocess.Popen[bytes], images: Path, before: set[str], started: float
    ) -> None:
        self.process = process
        self.images = images
        self.before = before
        self.started = started
        self.first: float | None = None
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        next_sample = 0.0
        while not self._stop.is_set():
            now = time.perf_counter()
            if self.first is None and any(p not in self.before for p in pngs(self.images)):
                self.first = now - self.started
            if now >= next_sample:
                self.peak = max(self.peak, tree_pss(self.process.pid))
                next_sample = now + MEMORY_SAMPLE_SECONDS
            self._stop.wait(FIRST_IMAGE_POLL_SECONDS)

    def wait(self) -> tuple[int, float]:
        """The process's exit status and its wall time in seconds."""
        try:
            code = self.process.wait(RUN_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
        wall = time.perf_counter() - self.started
        self._stop.set()
        self._thread.join()
        return code, wall


@dataclass(frozen=True)
class Sample:
    """One run of one tool: wall time, first story's latency, peak PSS of its tree, and each
    captured story's image digest by name."""

    seconds: float
    first: float | None
    peak_pss: int
    images: dict[str, str]
    #: This host's children's seconds by phase, summed over the run's stories (`story timings`).
    phases: dict[str, float] = field(default_factory=dict)


class Unavailable(Exception):
    """The tool cannot capture the build here; the message says why."""


def watched(command: Sequence[str], images: Path, log: Path, **popen: Any) -> tuple[int, Watch]:
    """Run `command` to its end under a `Watch`, its output in `log`; its exit status."""
    before = set(pngs(images))
    with log.open("wb") as out:
        started = time.perf_counter()
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, **popen)
        watch = Watch(process, images, before, started)
        code, _ = watch.wait()
    return code, watch


def log_tail(log: Path, lines: int = 5) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def run_storycap(command: Path, url: str, folder: Path) -> Sample:
    """One storycap run into `folder/out`; images named by their path under it."""
    out = folder / "out"
    log = folder / "storycap.log"
    args = [
        str(command), url, "--outDir", str(out),
        "--parallel", str(SLOTS), "--viewport", VIEWPORT, "--chromiumPath", CHROMIUM,
        "--puppeteerLaunchConfig", json.dumps({"args": ["--no-sandbox"]}),
    ]  # fmt: skip
    started = time.perf_counter()
    code, watch = watched(args, out, log)
    seconds = time.perf_counter() - started
    if code != 0:
        raise Unavailable(f"storycap exited {code}: {log_tail(log)}")
    images = {str(p.relative_to(out)): digest(p) for p in sorted(out.rglob("*.png"))}
    return Sample(seconds, watch.first, watch.peak, images)


def supervisor(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`python -m supervisor ARGS` on the SQLite file and artifacts in `folder`."""
    return subprocess.run(
        [sys.executable, "-m", "supervisor", *args, *host_options(folder)],
        capture_output=True,
        text=True,
        cwd=REPO,
    )


def host_options(folder: Path) -> list[str]:
    return [
        "--database-url", f"sqlite:///{folder / 'host.sqlite'}",
        "--artifacts", str(folder / "artifacts"),
    ]  # fmt: skip


def first_line(text: str) -> str:
    return next((line for line in text.splitlines() if line.strip()), "(no output)")


def host_images(folder: Path, build: dict[str, Any]) -> dict[str, str]:
    """Each captured snapshot's image digest by name, from `build --json` when it carries them
    (`image_sha256`, or the content-addressed `image_path`), else from the host's SQLite file."""
    captured = [s for s in build["snapshots"] if s["status"] != "failed"]
    if all("image_sha256" in s or "image_path" in s for s in captured):
        return {s["name"]: s.get("image_sha256") or Path(s["image_path"]).stem for s in captured}
    with contextlib.closing(sqlite3.connect(folder / "host.sqlite")) as db:
        rows = db.execute(
            "SELECT name, image_sha256 FROM snapshots WHERE build_id = ? AND status != 'failed'",
            (build["id"],),
        ).fetchall()
    return {str(name): str(sha) for name, sha in rows}


def run_host(storybook: Path, folder: Path) -> Sample:
    """One host run in `folder`: migrate, enqueue the build, `run --drain`, read the build.
    Run again in the same folder, the build is the project's second of the same Storybook:
    every story has its baseline, as in a pull request that changes nothing visible."""
    for step in (
        ["migrate"],
        ["enqueue-build", "--project", "bench", "--branch", "main", "--storybook", str(storybook), "--json"],
    ):  # fmt: skip
        done = supervisor(folder, *step)
        if done.returncode != 0:
            raise Unavailable(f"{step[0]} exited {done.returncode}: {first_line(done.stderr)}")
    build_id = int(json.loads(done.stdout)["build_id"])
    log = folder / f"host-{build_id}.log"
    images = folder / "artifacts" / "images"
    command = [
        sys.executable, "-m", "supervisor", "run", "--drain",
        "--concurrency", str(SLOTS), *host_options(folder),
    ]  # fmt: skip
    started = time.perf_counter()
    code, watch = watched(command, images, log, cwd=REPO)
    seconds = time.perf_counter() - started
    if code != 0:
        raise Unavailable(f"run exited {code}: {log_tail(log, 2)}")
    shown = supervisor(folder, "build", str(build_id), "--json")
    # 0 passed, 1 changed, 3 failed (a story of a real-world build may fail on its own): all
    # ended, with their captures to count.
    if shown.returncode not in (0, 1, 3):
        raise Unavailable(f"build {build_id} exited {shown.returncode}: {first_line(shown.stderr)}")
    build = json.loads(shown.stdout)
    failed = [s["name"] for s in build["snapshots"] if s["status"] == "failed"]
    if failed:
        print(
            f"  this host: {len(failed)} stories failed: {', '.join(failed[:5])}", file=sys.stderr
        )
    if (build["error"] and not failed) or not build["snapshots"]:
        raise Unavailable(
            f"build {build_id} ended {build['status']} with {len(build['snapshots'])} snapshots"
            + (f": {build['error']}" if build["error"] else "")
        )
    return Sample(seconds, watch.first, watch.peak, host_images(folder, build), phases(log))


def phases(log: Path) -> dict[str, float]:
    """The seconds by phase the run's capture jobs logged (`story timings`), summed."""
    totals: dict[str, float] = {}
    for line in log.read_text(errors="replace").splitlines():
        if '"story timings"' not in line:
            continue
        with contextlib.suppress(ValueError):
            for phase, seconds in json.loads(line).get("seconds", {}).items():
                totals[phase] = totals.get(phase, 0.0) + float(seconds)
    return totals


def differed(a: dict[str, str], b: dict[str, str]) -> int:
    """Stories whose images differ between two runs, or that only one of them captured."""
    return sum(a.get(name) != b.get(name) for name in a.keys() | b.keys())


@dataclass
class Tool:
    """One tool's runs, or why it could not run."""

    name: str
    samples: list[Sample]
    unavailable: str | None = None

    def median(self, value: str) -> float | None:
        values = [getattr(s, value) for s in self.samples]
        present = [v for v in values if v is not None]
        return statistics.median(present) if present else None

    def rate(self) -> float:
        return statistics.median(len(s.images) / s.seconds for s in self.samples)

    def row(self) -> list[str]:
        if not self.samples:
            return [self.name, "-", "-", "-", "-", "-"]
        first = self.median("first")
        changes = [differed(a.images, b.images) for a, b in itertools.pairwise(self.samples)]
        rates = [len(s.images) / s.seconds for s in self.samples]
        return [
            self.name,
            f"{statistics.median(len(s.images) for s in self.samples):.0f}",
            f"{self.rate():.2f} ({min(rates):.2f}-{max(rates):.2f})",
            "" if first is None else f"{first:.2f}",
            f"{statistics.median(s.peak_pss for s in self.samples) / SLOTS / MIB:.0f}",
            " ".join(str(n) for n in changes) if changes else "",
        ]


def measure(stories: int, runs: int, given: Path | None = None) -> list[Tool]:
    """`runs` runs of each tool, alternating, on one build (`given`, else `stories` generated
    ones); a tool that fails stops its runs."""
    storybook = given or ensure_storybook(stories)
    storycap = ensure_storycap()
    host = Tool(f"this host, {SLOTS} children", [])
    again = Tool(f"this host, {SLOTS} children, unchanged", [])
    installed = json.loads((storycap.parent.parent / "storycap" / "package.json").read_text())
    theirs = Tool(f"storycap {installed['version']}, {SLOTS} browsers", [])
    with serve(storybook) as url:
        for run in range(runs):
            for tool in (host, theirs):
                if tool.unavailable:
                    continue
                with tempfile.TemporaryDirectory(prefix="capture-bench-") as temporary:
                    folder = Path(temporary)
                    try:
                        if tool is host:
                            sample = run_host(storybook, folder)
                        else:
                            sample = run_storycap(storycap, url, folder)
                        tool.samples.append(sample)
                        show(run, runs, tool, sample)
                        if tool is host:
                            # The same folder again: a second build, every story a baseline.
                            sample = run_host(storybook, folder)
                            again.samples.append(sample)
                            show(run, runs, again, sample)
                    except Unavailable as error:
                        tool.unavailable = str(error)
                        tool.samples.clear()
                        if tool is host:
                            again.samples.clear()
                        print(f"  {tool.name}: not available ({error})", file=sys.stderr)
    return [host, again, theirs]


def show(run: int, runs: int, tool: Tool, sample: Sample) -> None:
    print(
        f"  run {run + 1}/{runs} {tool.name}: {len(sample.images)} stories in "
        f"{sample.seconds:.1f} s, first {sample.first or 0:.2f} s, "
        f"peak {sample.peak_pss / MIB:.0f} MiB",
        file=sys.stderr,
        flush=True,
    )


def report(tools: list[Tool], what: str, runs: int) -> None:
    print_table(
        f"Capturing {what}, medians of {runs} runs ({os.cpu_count()} CPUs, {CHROMIUM})",
        [
            "tool",
            "stories",
            "stories/s (min-max)",
            "first story s",
            "peak MiB/slot",
            "differed, run to run",
        ],
        [tool.row() for tool in tools],
    )
    for tool in tools:
        if tool.unavailable:
            print(f"{tool.name}: not available ({tool.unavailable})")
    *hosts, theirs = tools
    for host in hosts:
        if host.samples and theirs.samples:
            print(
                f"{host.name} / storycap, stories/s: {host.rate() / theirs.rate():.2f}"
                " (> 1: the host is faster)"
            )
    split(tools)


#: The phases in the order a story goes through them.
PHASE_ORDER: tuple[str, ...] = get_args(Phase)


def spent(sample: Sample, phase: str | None) -> float:
    """A host run's seconds in `phase`, or in every phase."""
    return sample.phases.get(phase, 0.0) if phase else sum(sample.phases.values())


def wall_per_story(tool: Tool) -> float:
    """A tool's wall time per story and slot (start-up and exit included), median of its runs."""
    return statistics.median(s.seconds * SLOTS / len(s.images) for s in tool.samples)


def split(tools: list[Tool]) -> None:
    """Where a story's time goes in this host's children, by phase, for each of its rows, beside
    each tool's wall time per story and slot; medians of the runs."""
    *hosts, theirs = tools
    runs = {host.name: [s for s in host.samples if s.phases and s.images] for host in hosts}
    shown = [host for host in hosts if runs[host.name]]
    if not shown:
        return
    names = sorted(
        {name for host in shown for s in runs[host.name] for name in s.phases},
        key=PHASE_ORDER.index,
    )

    def per_story(host: Tool, phase: str | None) -> str:
        """Milliseconds per story in `phase` (None: all phases), median of the host's runs."""
        each = [spent(s, phase) / len(s.images) for s in runs[host.name]]
        return f"{statistics.median(each) * 1000:.1f}"

    rows = [
        [name or "(sum of phases)", *(per_story(h, name) for h in shown)] for name in [*names, None]
    ]
    rows.append(
        ["wall x slots / stories", *(f"{wall_per_story(host) * 1000:.1f}" for host in shown)]
    )
    if theirs.samples:
        rows.append(
            [
                f"wall x slots / stories: {theirs.name}",
                f"{wall_per_story(theirs) * 1000:.1f}",
                *[""] * (len(shown) - 1),
            ]
        )
    print_table(
        "Where a story's time goes (ms per story)", ["phase", *(h.name for h in shown)], rows
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--stories", type=int, default=300, help="generated stories")
    parser.add_argument("--runs", type=int, default=3, help="runs of each tool (at least 2)")
    parser.add_argument(
        "--storybook", type=Path, metavar="DIR", help="a static Storybook build to capture instead"
    )
    arguments = parser.parse_args()
    if arguments.runs < 2 or arguments.stories < 1:
        parser.error("--runs must be at least 2 and --stories at least 1")
    given = arguments.storybook
    if given is not None and not (given / "iframe.html").is_file():
        parser.error(f"{given} is not a static Storybook build (no iframe.html)")
    what = (
        f"the static Storybook build {given}"
        if given is not None
        else f"a generated Storybook 10 build of {arguments.stories} stories"
    )
    report(measure(arguments.stories, arguments.runs, given), what, arguments.runs)


if __name__ == "__main__":
    main()
