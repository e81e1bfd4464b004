"""`run --metrics-address HOST:PORT`, read once where the settings are checked and again where
the server binds."""

from __future__ import annotations


class AddressError(ValueError):
    """`--metrics-address` does not parse; the message says what is expected."""


def parse_address(text: str) -> tuple[str, int]:
    """`HOST:PORT` (`127.0.0.1:9464`, `[::1]:9464`, `0.0.0.0:0`) as a host and a port."""
    host, sep, port = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise AddressError(f"{text!r} is not HOST:PORT (such as 127.0.0.1:9464; port 0 picks one)")
    return host, int(port)
