"""The soak's network: hosts on machines of their own, cut from the services and let back.

One network namespace holds the services (the soak itself, PostgreSQL, the object store and the
latency forwarder, `scripts.partitions.latency`); each host slot has a namespace of its own,
joined to the services by a veth pair (a /30 per slot: 10.77.N.1 on the services' end,
10.77.N.2 on the host's). A host reaches PostgreSQL and the bucket only through the forwarder on
its slot's services address, so every packet between them crosses the veth and is delayed; the
host's own loopback (its `/healthz`, its children's story servers) stays inside its namespace.

A cut puts the `blackhole` qdisc on both ends of the slot's veth: every packet either way is
dropped without a word, the links stay up, and the host's connections hang (new ones time out),
as across a switch that lost its uplink. A kernel without that qdisc gets the services' end of
the veth taken down instead: connections in flight hang the same, and a new one fails after a
moment with "No route to host", as on a LAN whose peer is gone. Neither closes a connection.

Creating namespaces and veths needs root (CAP_NET_ADMIN) and the `ip` and `tc` tools;
`unavailable` says in one line why a machine cannot, so the soak never starts half of it.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

#: Where `ip netns add` mounts named namespaces.
NETNS_DIR = Path("/run/netns")
#: setns(2)'s flag for a network namespace.
CLONE_NEWNET = 0x40000000
#: Every namespace of a soak is named `<prefix>-<soak pid>-...`, so that one left by a soak that
#: was killed can be told from a live soak's and removed.
PREFIX = "storyshelf-chaos"
#: The name of a slot's veth end inside the services' namespace; inside the host's it is `eth0`.
SERVICES_LINK, HOST_LINK = "veth-h{index}", "eth0"

#: How a cut is made (see the module's docstring): the qdisc where the kernel has it.
CutMethod = Literal["blackhole qdisc", "link down"]


class NetworkError(RuntimeError):
    """A command that builds or changes the soak's network failed (the message is its stderr)."""


def run(*command: str) -> None:
    """Run `ip` or `tc`; its stderr is the error when it fails."""
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise NetworkError(f"{' '.join(command)}: {result.stderr.strip()}")


def unavailable(euid: int) -> str | None:
    """Why this machine cannot give the hosts namespaces of their own, or None when it can.

    `euid` is passed in (the soak's effective user), so that the refusal can be tested."""
    if euid != 0:
        return "network namespaces need root (CAP_NET_ADMIN)"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return f"`{tool}` (iproute2) is not installed"
    probe = f"{PREFIX}-probe-{os.getpid()}"
    try:
        run("ip", "netns", "add", probe)
    except NetworkError as error:
        return f"cannot make a network namespace: {error}"
    with contextlib.suppress(NetworkError):
        run("ip", "netns", "del", probe)
    return None


def remove_stale() -> list[str]:
    """Remove the namespaces of soaks that are no longer running (killed before they could);
    their names."""
    removed = []
    for path in sorted(NETNS_DIR.glob(f"{PREFIX}-*")):
        owner = path.name.removeprefix(f"{PREFIX}-").split("-", 1)[0]
        if owner.isdigit() and not Path(f"/proc/{owner}").exists():
            with contextlib.suppress(NetworkError):
                run("ip", "netns", "del", path.name)
                removed.append(path.name)
    return removed


def enter(namespace: str) -> None:
    """Move the calling thread (and whatever it starts from now on) into `namespace`.

    The soak calls it once, before any thread or connection exists; a host's process calls it
    between fork and exec."""
    fd = os.open(NETNS_DIR / namespace, os.O_RDONLY)
    try:
        if _libc().setns(fd, CLONE_NEWNET) != 0:
            error = ctypes.get_errno()
            raise OSError(error, f"setns into {namespace}: {os.strerror(error)}")
    finally:
        os.close(fd)


@contextlib.contextmanager
def inside(namespace: str, home: str) -> Iterator[None]:
    """The calling thread in `namespace` for the block, back in `home` after: a socket made in
    the block belongs to `namespace` for its whole life (how the soak asks a host's `/healthz`
    on the host's own loopback)."""
    enter(namespace)
    try:
        yield
    finally:
        enter(home)


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


@dataclass(frozen=True)
class Slot:
    """A host's machine on the soak's network: its namespace and the two ends of its veth."""

    index: int
    namespace: str

    @property
    def services_address(self) -> str:
        """Where the host reaches the forwarder (the services' end of its veth)."""
        return f"10.77.{self.index}.1"

    @property
    def host_address(self) -> str:
        return f"10.77.{self.index}.2"

    @property
    def services_link(self) -> str:
        return SERVICES_LINK.format(index=self.index)


class Network:
    """The services' namespace and a slot per host, made by `build`, removed by `remove`."""

    def __init__(self, hosts: int, method: CutMethod, owner: int) -> None:
        self.method = method
        self.services = f"{PREFIX}-{owner}-services"
        self.slots = tuple(Slot(i, f"{PREFIX}-{owner}-host-{i}") for i in range(hosts))
        self.cut_slots: set[int] = set()

    def build(self) -> None:
        """Make the namespaces and veths and move the soak into the services' namespace."""
        run("ip", "netns", "add", self.services)
        run("ip", "-n", self.services, "link", "set", "lo", "up")
        enter(self.services)
        for slot in self.slots:
            run("ip", "netns", "add", slot.namespace)
            run("ip", "link", "add", slot.services_link, "type", "veth",
                "peer", "name", HOST_LINK, "netns", slot.namespace)  # fmt: skip
            run("ip", "addr", "add", f"{slot.services_address}/30", "dev", slot.services_link)
            run("ip", "link", "set", slot.services_link, "up")
            run("ip", "-n", slot.namespace, "addr", "add", f"{slot.host_address}/30",
                "dev", HOST_LINK)  # fmt: skip
            run("ip", "-n", slot.namespace, "link", "set", HOST_LINK, "up")
            run("ip", "-n", slot.namespace, "link", "set", "lo", "up")

    def cut(self, slot: Slot) -> None:
        """Drop every packet between `slot` and the services (see the module's docstring)."""
        if self.method == "blackhole qdisc":
            run("tc", "qdisc", "add", "dev", slot.services_link, "root", "blackhole")
            run("tc", "-n", slot.namespace, "qdisc", "add", "dev", HOST_LINK, "root", "blackhole")
        else:
            run("ip", "link", "set", slot.services_link, "down")
        self.cut_slots.add(slot.index)

    def heal(self, slot: Slot) -> None:
        """Let `slot`'s packets through again; connections that did not time out go on."""
        if self.method == "blackhole qdisc":
            run("tc", "qdisc", "del", "dev", slot.services_link, "root")
            run("tc", "-n", slot.namespace, "qdisc", "del", "dev", HOST_LINK, "root")
        else:
            run("ip", "link", "set", slot.services_link, "up")
        self.cut_slots.discard(slot.index)

    def is_cut(self, slot: Slot) -> bool:
        return slot.index in self.cut_slots

    def remove(self) -> list[str]:
        """Remove every namespace (their veths go with them); what could not be removed."""
        problems = []
        for name in [slot.namespace for slot in self.slots] + [self.services]:
            try:
                run("ip", "netns", "del", name)
            except NetworkError as error:
                problems.append(str(error))
        return problems


def cut_method() -> CutMethod:
    """The blackhole qdisc if this kernel has it (tried on a veth in a namespace of its own),
    else taking the link down."""
    probe = f"{PREFIX}-probe-{os.getpid()}"
    run("ip", "netns", "add", probe)
    try:
        run("ip", "-n", probe, "link", "add", "probe0", "type", "veth", "peer", "name", "probe1")
        run("tc", "-n", probe, "qdisc", "add", "dev", "probe0", "root", "blackhole")
        return "blackhole qdisc"
    except NetworkError:
        return "link down"
    finally:
        run("ip", "netns", "del", probe)
