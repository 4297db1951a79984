"""The host address a client announces (its id, its message ids), chosen like Java's.

RemotingUtil.getLocalAddress walks the interfaces, skips bridges and loopback
addresses, and prefers IPv4: the first address not in 127.0/192.168, else the
last IPv4 address seen, else the first IPv6 one. With no interface at all it
falls back to 127.0.0.1 (Java would ask the resolver for the host name).
"""

from __future__ import annotations

import ipaddress
import os
import socket
from functools import lru_cache

import psutil


def _is_bridge(name: str) -> bool:
    # Java's isBridge: a Linux bridge has /sys/class/net/<if>/bridge.
    return os.path.exists(f"/sys/class/net/{name}/bridge")


def choose_address(candidates: list[str]) -> str:
    """Java's preference among non-loopback addresses, in interface order."""
    v4 = [a for a in candidates if ipaddress.ip_address(a).version == 4]
    v6 = [a for a in candidates if ipaddress.ip_address(a).version == 6]
    for addr in v4:
        if not (addr.startswith("127.0") or addr.startswith("192.168")):
            return addr
    if v4:
        return v4[-1]
    if v6:
        return v6[0]
    return "127.0.0.1"


@lru_cache(maxsize=1)
def local_ip() -> str:
    candidates: list[str] = []
    try:
        interfaces = psutil.net_if_addrs()
    except OSError:
        return "127.0.0.1"
    for name, addrs in interfaces.items():
        if _is_bridge(name):
            continue
        for snic in addrs:
            if snic.family not in (socket.AF_INET, socket.AF_INET6):
                continue
            addr = snic.address.split("%", 1)[0]  # drop an IPv6 zone (fe80::1%eth0)
            try:
                if ipaddress.ip_address(addr).is_loopback:
                    continue
            except ValueError:
                continue
            candidates.append(addr)
    return choose_address(candidates)
