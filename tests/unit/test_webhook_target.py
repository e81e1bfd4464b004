"""Where a webhook may be POSTed (`ipc.webhook_target`): one table of addresses and where each
stands, IPv4-mapped forms judged as the IPv4 address they reach."""

from __future__ import annotations

import ipaddress

import pytest

from ipc.webhook_target import literal_address, reach, refusal


@pytest.mark.parametrize(
    ("address", "where"),
    [
        ("169.254.169.254", "never"),  # the cloud's instance metadata
        ("169.254.0.1", "never"),
        ("::ffff:169.254.169.254", "never"),
        ("fd00:ec2::254", "never"),  # AWS's metadata over IPv6, inside fc00::/7
        ("fe80::1", "never"),
        ("127.0.0.1", "private"),
        ("127.8.9.10", "private"),
        ("::1", "private"),
        ("::ffff:127.0.0.1", "private"),
        ("0.0.0.0", "private"),  # a connection to it reaches this machine
        ("::", "private"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("172.31.255.255", "private"),
        ("192.168.1.1", "private"),
        ("fc00::1", "private"),
        ("fd12:3456::1", "private"),
        ("::ffff:10.0.0.1", "private"),
        ("172.32.0.1", "public"),
        ("93.184.215.14", "public"),
        ("2606:4700::1111", "public"),
    ],
)
def test_each_address_stands_where_its_range_says(address: str, where: str) -> None:
    assert reach(ipaddress.ip_address(address))[0] == where


def test_only_private_addresses_are_let_through_by_the_project_option() -> None:
    metadata, loopback = ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("::1")
    assert refusal(metadata, allow_private=True) == (
        "a link-local (cloud metadata) address, never a webhook target"
    )
    assert refusal(loopback, allow_private=False) == (
        "a loopback address, a webhook target only with --webhook-allow-private"
    )
    assert refusal(loopback, allow_private=True) is None
    assert refusal(ipaddress.ip_address("8.8.8.8"), allow_private=False) is None


@pytest.mark.parametrize(
    ("host", "address"),
    [
        ("127.0.0.1", "127.0.0.1"),
        ("127.1", "127.0.0.1"),  # forms a resolver reads as numbers, DNS never asked
        ("2130706433", "127.0.0.1"),
        ("0xa9.0xfe.0xa9.0xfe", "169.254.169.254"),
        ("::ffff:169.254.169.254", "::ffff:169.254.169.254"),
        ("hooks.example.com", None),
        ("localhost", None),
    ],
)
def test_a_literal_address_is_read_in_every_numeric_form(host: str, address: str | None) -> None:
    assert literal_address(host) == (None if address is None else ipaddress.ip_address(address))
