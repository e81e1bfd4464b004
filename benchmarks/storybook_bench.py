"""Time per story and the memory of a child's browser, on the Storybook fixture.

Run ``python benchmarks/storybook_bench.py [--runs N]``. Two measurements:

1. Time per story, switching stories through Storybook's channel (what the capture does) against
   loading the page again for every story, in this process with one browser: every planned
   snapshot of the fixture but the hang, each mode ``--runs`` times, alternating. A story's time
   runs from asking for it to its settled screenshot (two equal shots), its own delay included;
   the table gives the median over the stories of each story's median, and the total.
2. A real child: the fork server as the host starts it, one child, a ``plan`` job and then a
   ``capture`` job of every snapshot, sent over the child's socket as the host sends them. After
   the capture, the PSS (``psutil``'s ``memory_full_info().pss``) summed over the child's process
   tree: the child alone, and with its browser, the number the host's memory limit counts.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from child.artifacts.access import for_job  # noqa: E402
from child.browser.launch import child_browser  # noqa: E402
from child.browser.render import StoryRenderer, Switch  # noqa: E402
from child.browser.site import Site  # noqa: E402
from child.storybook import plan  # noqa: E402
from child.storybook.stored import load  # noqa: E402
from ipc.artifacts.folder import FolderStore  # noqa: E402
from ipc.framing import recv_message, send_message  # noqa: E402
from ipc.messages import TO_PARENT, Done, Failed, Hello, Run, Stop  # noqa: E402
from ipc.storybook import StorybookRef, StorySnapshot  # noqa: E402
from supervisor.builds.storybooks import store_storybook  # noqa: E402

FIXTURE = ROOT / "tests" / "fixtures" / "storybook" / "storybook-static"
HANG = "example-hang--main-thread-hang"
OPTIONS = {
    "metric": "oklab",
    "threshold": 0.1,
    "flat_threshold": 0.05,
    "count_aa": False,
    "budget_pixels": 0,
}


def planned(artifacts: Path, ref: StorybookRef) -> list[StorySnapshot]:
    payload = {"artifacts": str(artifacts), "build_id": 1, "storybook": ref}
    result = plan.run(payload, lambda _: None)
    assert result["error"] is None, result["error"]
    return [shot for shot in result["snapshots"] if shot["story_id"] != HANG]


def time_switches(
    artifacts: Path, ref: StorybookRef, shots: list[StorySnapshot], runs: int
) -> None:
    seconds: dict[Switch, dict[str, list[float]]] = {"channel": {}, "reload": {}}
    child_browser()
    for _ in range(runs):
        for switch in ("channel", "reload"):
            with (
                Site(load(for_job(str(artifacts)), ref)) as site,
                StoryRenderer(site, switch=switch) as renderer,
            ):
                for shot in shots:
                    taken = renderer.take(shot)
                    assert taken.error is None or "broken" in shot["story_id"], taken.error
                    seconds[switch].setdefault(shot["name"], []).append(taken.seconds)
    print(f"time per story, {len(shots)} snapshots, {runs} runs (medians)")
    print(f"{'switch':8} {'first':>7} {'median':>7} {'total':>7}")
    for switch, by_name in seconds.items():
        medians = [statistics.median(values) for values in by_name.values()]
        first = medians[0]
        print(f"{switch:8} {first:7.3f} {statistics.median(medians[1:]):7.3f} {sum(medians):7.3f}")


def child_memory(artifacts: Path, ref: StorybookRef) -> None:
    """Run in a fresh fork server's child; before this process ever starts Playwright, which a
    fork server must not inherit (the host's parent never starts it)."""
    from supervisor.host.forkserver import ForkServer

    server = ForkServer.start()
    pid, sock = server.spawn(threads=1)
    hello = recv_message(sock, TO_PARENT)
    assert isinstance(hello, Hello), hello
    plan_payload = {"artifacts": str(artifacts), "build_id": 1, "storybook": ref}
    result = _run(sock, 1, "plan", plan_payload)
    shots = [s for s in result["snapshots"] if s["story_id"] != HANG]
    capture_payload = {
        "artifacts": str(artifacts),
        "build_id": 1,
        "shard_id": 1,
        "diff_dir": "diffs/1",
        "options": OPTIONS,
        "storybook": ref,
        "snapshots": [{**shot, "baseline": None} for shot in shots],
    }
    _run(sock, 2, "capture", capture_payload)
    child = psutil.Process(pid)
    tree = [child, *child.children(recursive=True)]
    pss = {process.pid: process.memory_full_info().pss for process in tree}
    browsers = [p for p in tree if "chrom" in p.name()]
    print(f"after plan + capture of {len(shots)} snapshots in a child:")
    print(f"  child alone        {pss[pid] / 2**20:7.1f} MiB PSS")
    print(f"  whole tree         {sum(pss.values()) / 2**20:7.1f} MiB PSS, {len(tree)} processes")
    print(f"  of which Chromium  {sum(pss[p.pid] for p in browsers) / 2**20:7.1f} MiB PSS")
    send_message(sock, Stop())
    os.waitpid(pid, 0)
    server.stop()


def _run(sock: Any, job_id: int, kind: str, payload: dict[str, Any]) -> Any:
    send_message(sock, Run(job_id, kind, 1, payload))
    while True:
        message = recv_message(sock, TO_PARENT)
        if isinstance(message, Failed):
            raise SystemExit(f"{kind} failed: {message.error}")
        if isinstance(message, Done):
            return message.result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        artifacts = Path(folder)
        ref = store_storybook(FolderStore(artifacts), FIXTURE).ref
        child_memory(artifacts, ref)  # first: the fork server must not inherit a browser
        shots = planned(artifacts, ref)
        time_switches(artifacts, ref, shots, args.runs)


if __name__ == "__main__":
    main()
