"""The kernel's count of refused forks, read from the pids cgroups a process is in (v1 and v2),
and what it makes of a failure: the host's trouble when forks were refused meanwhile."""

from __future__ import annotations

from pathlib import Path

import pytest

from child.worker.resources import OutOfResources, RefusedForks, fork_refusals


def _layout(tmp_path: Path, mountinfo: str, cgroup: str) -> tuple[Path, Path]:
    (tmp_path / "mountinfo").write_text(mountinfo)
    (tmp_path / "cgroup").write_text(cgroup)
    return tmp_path / "cgroup", tmp_path / "mountinfo"


def _events(folder: Path, refused: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pids.events").write_text(f"max {refused}\n")


def test_v1_counts_the_group_and_each_ancestor(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    _events(pids / "host" / "child", 2)
    _events(pids / "host", 5)  # the root of a hierarchy has no pids.events
    cgroup, mountinfo = _layout(
        tmp_path,
        f"30 25 0:26 / {pids} rw,relatime shared:9 - cgroup cgroup rw,pids\n"
        f"31 25 0:27 / {tmp_path / 'memory'} rw - cgroup cgroup rw,memory\n",
        "9:memory:/elsewhere\n8:pids:/host/child\n0::/\n",
    )
    assert fork_refusals(cgroup, mountinfo) == {
        pids / "host" / "child" / "pids.events": 2,
        pids / "host" / "pids.events": 5,
    }


def test_v2_counts_the_unified_group_below_a_mount_of_a_subtree(tmp_path: Path) -> None:
    """A container's cgroup2 mount may start below the root: /proc/self/cgroup's path then
    begins with the mount's root, which is cut off."""
    unified = tmp_path / "unified"
    _events(unified / "jobs", 7)
    cgroup, mountinfo = _layout(
        tmp_path,
        f"40 25 0:30 /pod {unified} rw - cgroup2 cgroup2 rw\n",
        "0::/pod/jobs\n",
    )
    assert fork_refusals(cgroup, mountinfo) == {unified / "jobs" / "pids.events": 7}


def test_no_pids_controller_counts_nothing(tmp_path: Path) -> None:
    cgroup, mountinfo = _layout(tmp_path, "22 1 0:5 / /proc rw - proc proc rw\n", "0::/\n")
    assert fork_refusals(cgroup, mountinfo) == {}
    assert fork_refusals(tmp_path / "missing", tmp_path / "missing") == {}


def test_a_failure_with_forks_refused_meanwhile_is_the_hosts_trouble() -> None:
    counts = {Path("/a/pids.events"): 3}
    refused = RefusedForks(lambda: dict(counts))
    refused.blame("the page crashed")  # nothing refused yet: the story's own failure
    counts[Path("/a/pids.events")] = 4
    counts[Path("/b/pids.events")] = 2  # a group the process was moved to since: from zero
    assert refused.since() == 3
    with pytest.raises(OutOfResources) as raised:
        refused.blame("example--story: the page crashed while rendering the story")
    assert str(raised.value) == (
        "out of resources: the pids limit refused 3 fork(s) meanwhile: "
        "example--story: the page crashed while rendering the story"
    )
