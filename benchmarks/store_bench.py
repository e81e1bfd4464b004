"""Uploads and settling through an S3 bucket beside the same through a folder, on PostgreSQL.

Run ``python benchmarks/store_bench.py [--snapshots 1000] [--runs 3] [--keep DIR]``. The same
builds go through one host with ``--artifacts`` a folder, then ``--artifacts s3://BUCKET/PREFIX``
on a throwaway SeaweedFS (``tests.object_store_server``, on loopback and on the same cores: what
is measured is the host's side of the bucket, its requests and its cache, not a network), each
run on a throwaway PostgreSQL (``tests.postgres_server``, fsync off). SeaweedFS runs as in the tests,
without a Go heap limit (``--store-memory-limit 64MiB`` sets one: see `BenchObjectStore`). The
files are ``settle_bench``'s: N distinct 1280x800 pages of about 125 KiB; and a branch copy of
them in which every tenth is another page (a moved paragraph, a recoloured button, a badge:
``diff_bench``'s ``changed`` pair) with bytes of its own, the rest byte-identical.

Each run, for each store in turn (the folder, then the bucket, so both meet the same machine):
a fresh database, a fresh folder or bucket prefix, a fresh cache folder (``run --cache-dir``;
a folder store is read in place and never fills it), then

1. ``enqueue-build`` of the N files on ``main`` (timed: hashing them, asking the store which it
   lacks, storing all of them, queueing): MB (10^6 bytes) and files stored per second;
2. ``run --drain``: the baseline build, every snapshot ``new``, so each image is read (from a
   bucket: downloaded into the cache) and decoded;
3. ``enqueue-build`` of the branch copy on ``feature``, then ``run --drain`` with the SAME cache
   folder, as one host would: the changed images are downloaded, compared with their baselines
   (from the cache) and their diffs stored; the others are ``unchanged`` by hash, their files
   still asked of the cache (which has them from step 2);
4. ``enqueue-build`` of the N baseline files again (on ``again``: timed; everything is stored
   already, so the upload is hashing, existence checks and queueing). Its build stays queued in
   the run's own database, which nothing runs again.

snapshots/s is N over ``settle_bench``'s window: a build's first event in the host's JSON log
(``capture prepared``) to its ``build finished``. The cache's hit rate is 1 - downloads / reads
over the branch build's ``artifacts read`` events (one per capture job: the keys it read and
those its host's cache did not have); a folder store downloads nothing ("local"). CPU times are
each command's and those of the processes it reaped (the host's: its fork server and children);
the store server's CPU time is taken around each step. The last column is bucket / folder of
the value on its row: below 1 on a rate, above 1 on a time, means the bucket is slower. Each
cell is the median of ``--runs``; every build is checked to have the expected counts (all
``new``; ``changed`` and ``unchanged`` as written; nothing failed) and its report. ``--keep DIR``
works in DIR and leaves the images, folder stores, caches and logs there (not the bucket: its
server's folder goes with it).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import psutil  # noqa: E402
from sqlalchemy import create_engine, text  # noqa: E402

from benchmarks.diff_bench import page  # noqa: E402
from benchmarks.settle_bench import (  # noqa: E402
    Case,
    Measured,
    build_times,
    events,
    fresh_database,
    high_water_mark,
    measured,
    postgres,
    with_text_chunk,
    write_images,
)
from tests.object_store_server import TemporaryObjectStore  # noqa: E402

STORES = ("folder", "bucket")
#: Every this many images of the branch copy is another picture.
CHANGED_EVERY = 10
MB = 10**6


@dataclass(frozen=True)
class Run:
    """One store, one run: what the table's rows show."""

    upload_bytes: int
    #: Each step's command: wall and CPU time (of it and of the processes it reaped).
    upload: Measured
    baseline: Measured
    branch: Measured
    again: Measured
    #: The two builds' windows in the host's log, in seconds.
    baseline_window: float
    branch_window: float
    #: Summed over the branch build's `artifacts read` events.
    reads: int
    downloads: int
    #: CPU seconds of the object store's server during each step (0 for a folder).
    server_cpu: Mapping[str, float]


@contextmanager
def environment(variables: Mapping[str, str]) -> Iterator[None]:
    """`variables` in this process's environment (which `measured` hands its command) for a
    while; what was there before put back after."""
    before = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


class BenchObjectStore(TemporaryObjectStore):
    """The tests' SeaweedFS, with a Go heap limit `memory_limit` if one is given (None: none,
    as the tests and anyone with the machine's memory to use run it).

    A limit below what the store holds (64 MiB) makes it collect garbage all the time: 11 ms of
    its CPU per 125 KiB GET against 1.7 ms without, three times the wall time per request
    (measured on the machine of the README's table): the store's cost, not the host's.
    """

    def __init__(self, bucket: str, memory_limit: str | None) -> None:
        super().__init__(bucket=bucket)
        self.memory_limit = memory_limit

    def _environment(self) -> dict[str, str]:
        variables = super()._environment()
        if self.memory_limit is not None:
            variables["GOMEMLIMIT"] = self.memory_limit
        return variables


class StoreCase(Case):
    """`settle_bench`'s case on a given store: its location and environment, and a cache."""

    def __init__(
        self,
        folder: Path,
        url: str,
        count: int,
        options: argparse.Namespace,
        label: str,
        location: str,
        variables: Mapping[str, str],
        server: psutil.Process | None,
    ) -> None:
        super().__init__(folder, url, count, options, label)
        self.location = location
        self.variables = variables
        self.server = server
        self.cache = folder / "cache"
        self.server_cpu: dict[str, float] = {}

    def supervisor(self, *args: str, profile: Path | None = None) -> Measured:
        where = ["--database-url", self.url]
        if args[0] != "migrate":
            where += ["--artifacts", self.location]
        if args[0] == "run":
            where += ["--cache-dir", str(self.cache)]
            if self.options.cache_mib is not None:
                where += ["--cache-mib", str(self.options.cache_mib)]
        log_path = self.folder / f"{args[0]}-{len(list(self.folder.glob('*.log'))):02d}.log"
        with environment(self.variables):
            return measured([sys.executable, "-m", "supervisor", *args, *where], log_path)

    def step(self, name: str, work: Any) -> Any:
        """`work()`, the store server's CPU time meanwhile kept under `name`."""
        before = self._server_cpu()
        done = work()
        self.server_cpu[name] = self._server_cpu() - before
        return done

    def _server_cpu(self) -> float:
        if self.server is None:
            return 0.0
        times = self.server.cpu_times()
        return float(times.user + times.system)

    def upload(self, branch: str, images: Path, name: str) -> tuple[Measured, int]:
        """`enqueue-build` of `images` on `branch` (a step called `name`): the command and its
        build's id."""
        self.images = images
        done, queued = self.step(name, lambda: self.enqueue(branch))
        return done, int(queued["build_id"])

    def settle(self, build_id: int, name: str) -> tuple[Measured, float]:
        """`run --drain` (a step called `name`), and the build's window in its log."""
        run = self.step(name, self.drain)
        window, _report = build_times(run.log, build_id)
        return run, window

    def counts(self, build_id: int) -> dict[str, Any]:
        engine = create_engine(self.url)
        try:
            with engine.connect() as conn:
                row = conn.execute(
                    text(
                        "SELECT status, new, unchanged, changed, failed, report_url"
                        " FROM builds WHERE id = :id"
                    ),
                    {"id": build_id},
                ).one()
        finally:
            engine.dispose()
        return dict(row._mapping)

    def expect(self, build_id: int, **wanted: Any) -> None:
        """The build ended with `wanted` counts and its report: else nothing was measured."""
        counts = self.counts(build_id)
        if {key: counts[key] for key in wanted} != wanted or counts["report_url"] is None:
            raise RuntimeError(f"{self.label}: build {build_id} is {counts}, not {wanted}")


def write_branch(baseline: Path, branch: Path) -> int:
    """The baseline's files under `branch`, every `CHANGED_EVERY`th another picture with bytes of
    its own; how many changed."""
    branch.mkdir(parents=True)
    other = page(1280, 800, variant=True).pngsave_buffer(compression=6)
    changed = 0
    for index, source in enumerate(sorted(baseline.iterdir())):
        if index % CHANGED_EVERY == 0:
            (branch / source.name).write_bytes(with_text_chunk(other, f"story {index} changed"))
            changed += 1
        else:
            shutil.copyfile(source, branch / source.name)
    return changed


def reads_of(log: str, build_id: int) -> tuple[int, int]:
    """Keys read and downloaded by the build's capture jobs, from their `artifacts read`."""
    reads = downloads = 0
    for event in events(log):
        if event.get("event") == "artifacts read" and event.get("build_id") == build_id:
            reads += int(event["reads"])
            downloads += int(event["downloads"])
    return reads, downloads


def one_run(
    store: str,
    folder: Path,
    url: str,
    files: tuple[Path, Path, int],
    options: argparse.Namespace,
    bucket: BenchObjectStore | None,
    index: int,
) -> Run:
    baseline, branch, changed = files
    count = options.snapshots
    if store == "bucket":
        assert bucket is not None and bucket.process is not None
        location = f"s3://{bucket.bucket}/run-{index}"
        variables, server = bucket.environment(), psutil.Process(bucket.process.pid)
    else:
        location, variables, server = str(folder / "artifacts"), {}, None
    case = StoreCase(folder, url, count, options, store, location, variables, server)
    case.supervisor("migrate")
    uploaded, main_id = case.upload("main", baseline, "upload")
    first, baseline_window = case.settle(main_id, "baseline")
    case.expect(main_id, status="passed", new=count, failed=0)
    _, feature_id = case.upload("feature", branch, "branch upload")
    second, branch_window = case.settle(feature_id, "branch")
    case.expect(feature_id, status="changed", changed=changed, unchanged=count - changed, failed=0)
    again, _ = case.upload("again", baseline, "again")
    reads, downloads = reads_of(second.log, feature_id)
    if reads < count:
        raise RuntimeError(f"{store}: the branch build logged {reads} reads of {count} snapshots")
    return Run(
        upload_bytes=sum(path.stat().st_size for path in baseline.iterdir()),
        upload=uploaded,
        baseline=first,
        branch=second,
        again=again,
        baseline_window=baseline_window,
        branch_window=branch_window,
        reads=reads,
        downloads=downloads,
        server_cpu=case.server_cpu,
    )


def report_run(store: str, index: int, run: Run, count: int) -> None:
    """One run's figures as it ends, on stderr (the table is the medians)."""
    print(
        f"  run {index + 1} {store:<6}: upload {run.upload.seconds:.2f} s"
        f" (CPU {run.upload.cpu_seconds:.2f}), again {run.again.seconds:.2f} s"
        f" (CPU {run.again.cpu_seconds:.2f}), baseline {count / run.baseline_window:,.0f}/s,"
        f" branch {count / run.branch_window:,.0f}/s,"
        f" {run.downloads} of {run.reads} reads downloaded; store server CPU s:"
        f" {', '.join(f'{step} {cpu:.1f}' for step, cpu in run.server_cpu.items())}",
        file=sys.stderr,
        flush=True,
    )


#: The table's rows: label, the value of a run, its format; `{changed}` is filled in.
ROWS: list[tuple[str, Callable[[Run, int], float], str]] = [
    ("baseline upload, MB/s stored", lambda r, n: r.upload_bytes / MB / r.upload.seconds, ".1f"),
    ("baseline upload, files/s stored", lambda r, n: n / r.upload.seconds, ",.0f"),
    ("baseline upload, s", lambda r, n: r.upload.seconds, ".2f"),
    ("  its CPU s (enqueue-build)", lambda r, n: r.upload.cpu_seconds, ".2f"),
    ("second upload (all stored), s", lambda r, n: r.again.seconds, ".2f"),
    ("  its CPU s (enqueue-build)", lambda r, n: r.again.cpu_seconds, ".2f"),
    ("settle baseline (all new), snapshots/s", lambda r, n: n / r.baseline_window, ",.0f"),
    ("  run --drain, s", lambda r, n: r.baseline.seconds, ".2f"),
    ("  run --drain, host CPU s", lambda r, n: r.baseline.cpu_seconds, ".2f"),
    ("settle branch ({changed} changed), snapshots/s", lambda r, n: n / r.branch_window, ",.0f"),
    ("  run --drain, s", lambda r, n: r.branch.seconds, ".2f"),
    ("  run --drain, host CPU s", lambda r, n: r.branch.cpu_seconds, ".2f"),
]


def print_table(results: dict[str, list[Run]], count: int, changed: int) -> None:
    def median(store: str, value: Callable[[Run, int], float]) -> float:
        return float(statistics.median(value(run, count) for run in results[store]))

    print(f"{'':<48} {'folder':>9} {'bucket':>9} {'bucket / folder':>15}")
    for label, value, style in ROWS:
        folder, bucket = median("folder", value), median("bucket", value)
        print(
            f"{label.format(changed=changed):<48} {format(folder, style):>9}"
            f" {format(bucket, style):>9} {bucket / folder:>15.2f}"
        )
    hit = median("bucket", lambda r, n: 1 - r.downloads / r.reads)
    reads = median("bucket", lambda r, n: r.reads)
    downloads = median("bucket", lambda r, n: r.downloads)
    print(
        f"{'branch build, cache hit rate':<48} {'local':>9} {hit:>9.1%} {'':>15}"
        f"  ({downloads:,.0f} downloads of {reads:,.0f} reads)"
    )
    steps = results["bucket"][0].server_cpu.keys()
    spent = {step: median("bucket", lambda r, n, s=step: r.server_cpu[s]) for step in steps}
    print(
        "the bucket's server, CPU s by step: "
        + ", ".join(f"{step} {cpu:.1f}" for step, cpu in spent.items())
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--snapshots", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3, help="runs per store (median)")
    parser.add_argument("--keep", type=Path, help="work here and leave everything behind")
    parser.add_argument("--postgres-url", help="a server to use instead of a throwaway one")
    parser.add_argument("--shards", type=int, help="enqueue-build --shards (default: its own)")
    parser.add_argument("--concurrency", type=int, help="run --concurrency (default: its own)")
    parser.add_argument("--cache-mib", type=int, help="run --cache-mib (default: its own)")
    parser.add_argument(
        "--store-memory-limit",
        metavar="GOMEMLIMIT",
        help="SeaweedFS's Go heap limit (default: none, as in the tests)",
    )
    options = parser.parse_args(argv)
    options.profile = None  # what `Case` reads; `settle_bench --profile` is for profiles
    count = options.snapshots
    with ExitStack() as stack:
        if options.keep is None:
            root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="store-bench-")))
        else:
            root = options.keep
            root.mkdir(parents=True, exist_ok=True)
        server_url = stack.enter_context(postgres(options.postgres_url))
        bucket = BenchObjectStore("store-bench", options.store_memory_limit).start()
        stack.callback(bucket.stop)
        assert bucket.process is not None
        server = psutil.Process(bucket.process.pid)
        baseline, branch = root / "images-main", root / "images-feature"
        write_images(baseline, count)
        changed = write_branch(baseline, branch)
        print(
            f"{count:,} snapshots ({changed} changed on the branch), folder and SeaweedFS bucket"
            f" on loopback, PostgreSQL; medians of {options.runs} runs; {os.cpu_count()} CPUs",
            flush=True,
        )
        results: dict[str, list[Run]] = {store: [] for store in STORES}
        for index in range(options.runs):
            for store in STORES:
                folder = root / f"run-{index}-{store}"
                folder.mkdir()
                url = fresh_database(server_url, f"store_{store}_{index}")
                run = one_run(
                    store, folder, url, (baseline, branch, changed), options, bucket, index
                )
                report_run(store, index, run, count)
                results[store].append(run)
        print_table(results, count, changed)
        print(
            f"SeaweedFS server (GOMEMLIMIT {options.store_memory_limit or 'unset'}):"
            f" peak RSS {high_water_mark(server) / 2**20:.0f} MiB"
        )


if __name__ == "__main__":
    main()
