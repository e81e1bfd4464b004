"""Which addresses a webhook may be POSTed to: the one rule the parent applies when a project is
configured and the child applies when it delivers.

A webhook is a URL anyone who may configure a project chooses, and the host POSTs to it from
inside its own network. Left open, that reaches what only the host should: the cloud's instance
metadata service (credentials, on 169.254.169.254 and fd00:ec2::254), link-local services, and
whatever listens on the host's loopback or its private network. So:

* link-local and cloud-metadata ranges are never a target (`NEVER`);
* this machine and private networks (`PRIVATE`) are a target only for a project whose
  `--webhook-allow-private` says so (a receiver on the same network is a real case: a CI server
  beside the capture hosts);
* everything else is.

An IPv6 address that maps an IPv4 one (`::ffff:169.254.169.254`) is judged as that IPv4 address,
since that is where a connection to it goes. The parent can judge only a URL whose host is an
address (`literal_address`); a name is judged by the child after resolving it, on every address
it resolves to, and the child then connects to the addresses it judged and to no other, so a
name that answers differently a moment later (DNS rebinding) reaches nothing unchecked.
"""

from __future__ import annotations

import ipaddress
import socket
from typing import Literal

Address = ipaddress.IPv4Address | ipaddress.IPv6Address

#: Where an address stands: never a target, a target only with the project's option, or one.
Reach = Literal["never", "private", "public"]

#: The project option that lets webhooks reach `PRIVATE` addresses.
ALLOW_OPTION = "--webhook-allow-private"

#: Link-local and cloud-metadata ranges, with what each is: never a target.
NEVER: tuple[tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, str], ...] = (
    (ipaddress.ip_network("169.254.0.0/16"), "link-local (cloud metadata)"),
    (ipaddress.ip_network("fe80::/10"), "link-local"),
    (ipaddress.ip_network("fd00:ec2::/64"), "cloud metadata"),
)
#: This machine and private networks, with what each is: a target only with `ALLOW_OPTION`.
PRIVATE: tuple[tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, str], ...] = (
    (ipaddress.ip_network("127.0.0.0/8"), "loopback"),
    (ipaddress.ip_network("::1/128"), "loopback"),
    # A connection to 0.0.0.0 or :: reaches this machine, as loopback does.
    (ipaddress.ip_network("0.0.0.0/8"), "this-host"),
    (ipaddress.ip_network("::/128"), "this-host"),
    (ipaddress.ip_network("10.0.0.0/8"), "private"),
    (ipaddress.ip_network("172.16.0.0/12"), "private"),
    (ipaddress.ip_network("192.168.0.0/16"), "private"),
    (ipaddress.ip_network("fc00::/7"), "private"),
    (ipaddress.ip_network("100.64.0.0/10"), "shared (carrier-grade NAT)"),
)


def reach(address: Address) -> tuple[Reach, str]:
    """Where `address` stands, and what it is (`("never", "link-local")`, `("public", "")`)."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    for network, what in NEVER:
        if address.version == network.version and address in network:
            return "never", what
    for network, what in PRIVATE:
        if address.version == network.version and address in network:
            return "private", what
    return "public", ""


def refusal(address: Address, allow_private: bool) -> str | None:
    """Why a webhook may not reach `address`, to follow "<address> is" at the end of a line
    (`a loopback address, a webhook target only with --webhook-allow-private`); None when it
    may."""
    where, what = reach(address)
    if where == "never":
        return f"a {what} address, never a webhook target"
    if where == "private" and not allow_private:
        return f"a {what} address, a webhook target only with {ALLOW_OPTION}"
    return None


def literal_address(host: str) -> Address | None:
    """`host` as the address a connection to it would reach when it is one, in any form the
    resolver reads without asking DNS (`127.0.0.1`, `127.1`, `2130706433`, `::1`); None for a
    name."""
    try:
        found = socket.getaddrinfo(host, None, flags=socket.AI_NUMERICHOST)
    except (socket.gaierror, UnicodeError, ValueError):
        return None
    return ipaddress.ip_address(found[0][4][0])
