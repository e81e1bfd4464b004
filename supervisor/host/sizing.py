"""How many children this host runs at once, sized from what the process may really use.

psutil alone reports the machine's CPUs and memory, not the container's: the limits that bind
are cgroup v2's `cpu.max` and `memory.max` (the tightest of our cgroup and its ancestors), or
cgroup v1's CFS quota and memory limit, and the CPU affinity mask. One slot per child; libvips
threads per child are set so that children x threads fits the CPUs.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

import psutil
import structlog

CGROUP_ROOT = Path("/sys/fs/cgroup")
GIB = 2**30

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class Sizing:
    """How many children this host runs and with how many libvips threads each, and why."""

    slots: int
    threads_per_child: int
    reason: str


def own_cgroup_dir(
    root: Path = CGROUP_ROOT, proc_cgroup: Path = Path("/proc/self/cgroup")
) -> Path | None:
    """Our cgroup v2 folder, when the unified hierarchy is mounted."""
    try:
        for line in proc_cgroup.read_text().splitlines():
            hierarchy, _, path = line.split(":", 2)
            if hierarchy == "0":
                folder = root / path.lstrip("/")
                return folder if folder.is_dir() else None
    except (OSError, ValueError):
        return None
    return None


def _lineage(folder: Path, root: Path) -> list[Path]:
    """`folder` and its ancestors up to the cgroup root."""
    chain = [folder]
    while chain[-1] != root and root in chain[-1].parents:
        chain.append(chain[-1].parent)
    return chain


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def cgroup_v2_limits(folder: Path, root: Path = CGROUP_ROOT) -> tuple[float | None, int | None]:
    """(CPUs, bytes of memory still available) under the tightest limit of `folder`'s lineage."""
    cpus: float | None = None
    memory: int | None = None
    for level in _lineage(folder, root):
        quota = (_read(level / "cpu.max") or "max").split()
        if quota[0] != "max" and len(quota) == 2:
            level_cpus = int(quota[0]) / int(quota[1])
            cpus = level_cpus if cpus is None else min(cpus, level_cpus)
        limit = _read(level / "memory.max")
        if limit and limit != "max":
            used = int(_read(level / "memory.current") or 0)
            level_memory = max(int(limit) - used, 0)
            memory = level_memory if memory is None else min(memory, level_memory)
    return cpus, memory


def _v1_folder(controller: str, root: Path, proc_cgroup: Path) -> Path:
    """Our folder in a cgroup v1 controller's hierarchy (the controller's root if unknown)."""
    try:
        for line in proc_cgroup.read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            if controller in controllers.split(","):
                folder = root / controller / path.lstrip("/")
                if folder.is_dir():
                    return folder
    except (OSError, ValueError):
        pass
    return root / controller


def cgroup_v1_limits(
    root: Path = CGROUP_ROOT, proc_cgroup: Path = Path("/proc/self/cgroup")
) -> tuple[float | None, int | None]:
    """CPU and memory limits of a cgroup v1 hierarchy (older Docker and Kubernetes nodes)."""
    cpus: float | None = None
    memory: int | None = None
    cpu = _v1_folder("cpu", root, proc_cgroup)
    quota, period = _read(cpu / "cpu.cfs_quota_us"), _read(cpu / "cpu.cfs_period_us")
    if quota and period and int(quota) > 0:
        cpus = int(quota) / int(period)
    memory_folder = _v1_folder("memory", root, proc_cgroup)
    limit = _read(memory_folder / "memory.limit_in_bytes")
    # An unlimited v1 group reports a huge number near 2^63.
    if limit and int(limit) < 2**60:
        used = int(_read(memory_folder / "memory.usage_in_bytes") or 0)
        memory = max(int(limit) - used, 0)
    return cpus, memory


def size_host(
    child_memory_bytes: int, override: int | None = None, root: Path = CGROUP_ROOT
) -> Sizing:
    """Slots and libvips threads per child, with the reason in words for the log.

    `--concurrency` (the override) is capped at what memory holds: more children than that
    would not run faster, they would push the machine into the OOM killer, which takes the host
    as readily as a child. The cap is in the reason, and logged as a warning.
    """
    cpus = float(len(os.sched_getaffinity(0)))
    available = psutil.virtual_memory().available
    folder = own_cgroup_dir(root)
    limits = cgroup_v2_limits(folder, root) if folder else cgroup_v1_limits(root)
    if limits[0] is not None:
        cpus = min(cpus, limits[0])
    if limits[1] is not None:
        available = min(available, limits[1])
    whole_cpus = max(1, math.floor(cpus))
    by_memory = int(max(1, available // child_memory_bytes))
    if override is None:
        slots, why = min(whole_cpus, by_memory), ""
    elif override > by_memory:
        slots, why = by_memory, f" (--concurrency {override} capped by memory)"
    else:
        slots, why = override, " (--concurrency)"
    threads = max(1, whole_cpus // slots)
    reason = (
        f"{slots} slots: {cpus:g} CPUs, {available / GIB:.1f} GiB available, "
        f"{child_memory_bytes / 2**20:.0f} MiB per child, {threads} libvips threads each{why}"
    )
    if override is not None and slots < override:
        log.warning("concurrency capped by memory", asked=override, slots=slots, reason=reason)
    return Sizing(slots, threads, reason)
