"""Which address the broker tells the name server (and writes into every message id).

Clients connect to the address in the route the name server returns, so a broker
bound to a wildcard (``0.0.0.0``) must name an address other hosts can reach.
Like RocketMQ's ``brokerIP1`` (which defaults to the first non-loopback address
of the machine), the default is: the bind host when it is a concrete address,
else the first non-loopback IPv4 address of an interface that is up, else
127.0.0.1. ``--advertise-host`` overrides it.
"""

from __future__ import annotations

import ipaddress
import socket
from typing import Iterable

WILDCARDS = ("0.0.0.0", "", "::")


def check_advertise_host(host: str) -> str:
    """``host`` if it is an IP address (it is written into message ids as 4 or 16 bytes)."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        raise ValueError(f"advertise_host={host!r} is not an IP address (e.g. 10.0.0.5)") from None
    return host


def interface_addresses() -> list[str]:
    """IPv4 addresses of the interfaces that are up, in the order the OS lists them."""
    import psutil

    stats = psutil.net_if_stats()
    out: list[str] = []
    for name, addrs in psutil.net_if_addrs().items():
        if name in stats and not stats[name].isup:
            continue
        out.extend(a.address for a in addrs if a.family == socket.AF_INET)
    return out


def default_advertise_host(bind_host: str, addresses: Iterable[str] | None = None) -> str:
    """The bind host if concrete, else the first non-loopback address, else 127.0.0.1."""
    if bind_host not in WILDCARDS:
        return bind_host
    for addr in interface_addresses() if addresses is None else addresses:
        try:
            ip = ipaddress.ip_address(addr)
        except ValueError:
            continue
        if not (ip.is_loopback or ip.is_link_local or ip.is_unspecified):
            return addr
    return "127.0.0.1"
