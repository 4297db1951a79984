"""White-listed client addresses (``whiteRemoteAddress``, ``globalWhiteRemoteAddresses``).

The forms a ``plain_acl.yml`` may use, with 4.9.8's meaning:

* empty or missing: matches nothing (the account must sign);
* ``*``, ``*.*.*.*`` or ``*:*:*:*:*:*:*:*``: matches every client;
* one address, ``192.168.0.1`` or an IPv6 address;
* a list, ``192.168.0.1,192.168.0.2``, or a last-part set, ``192.168.0.{1,2,3}``;
* an IPv4 range in one part, ``192.168.0.*``, ``192.168.1-10.*`` or ``192.168.0.1-100``:
  the parts before it must equal the client's, that part must be in the range,
  and the parts after it are not looked at.

A malformed pattern is refused when the file is read, with the pattern named;
IPv6 ranges are refused too (the embedded broker does not implement them).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from rmqrun.errors import RmqrunError


class AddressPatternError(RmqrunError, ValueError):
    """A white-address pattern that cannot be understood."""


def _normal_ip(text: str) -> str | None:
    """The canonical form of an IP address, or None if ``text`` is not one."""
    try:
        return ipaddress.ip_address(text.strip().strip("[]")).exploded.upper()
    except ValueError:
        return None


@dataclass(frozen=True)
class AddressRule:
    """One compiled pattern; :meth:`matches` takes the client's IP (no port)."""

    pattern: str
    everyone: bool = False
    exact: frozenset[str] = frozenset()
    range_head: tuple[int, ...] = ()
    range_low: int = 0
    range_high: int = -1

    def matches(self, client_ip: str) -> bool:
        if self.everyone:
            return True
        if self.exact:
            ip = _normal_ip(client_ip)
            return ip is not None and ip in self.exact
        if self.range_high >= 0:
            parts = _ipv4_parts(client_ip)
            if parts is None:
                return False
            n = len(self.range_head)
            return parts[:n] == self.range_head and self.range_low <= parts[n] <= self.range_high
        return False


def _ipv4_parts(text: str) -> tuple[int, ...] | None:
    try:
        return tuple(int(p) for p in ipaddress.IPv4Address(text.strip()).exploded.split("."))
    except ValueError:
        return None


def compile_rule(pattern: object) -> AddressRule:
    """Compile one pattern (a YAML value: None, a string, or a number-like scalar)."""
    text = "" if pattern is None else str(pattern).strip()
    if not text:
        return AddressRule(text)  # matches nothing
    if text in ("*", "*.*.*.*", "*:*:*:*:*:*:*:*"):
        return AddressRule(text, everyone=True)
    if text.endswith("}"):
        head, sep, tail = text.rpartition("{")
        if not sep or not head or head[-1] not in ".:":
            raise AddressPatternError(f"white address {text!r}: a set must be the last part, like 192.168.0.{{1,2}}")
        return _exact(text, [head + item.strip() for item in tail[:-1].split(",") if item.strip()])
    if "," in text:
        return _exact(text, [item.strip() for item in text.split(",") if item.strip()])
    if "*" in text or "-" in text:
        return _range(text)
    return _exact(text, [text])


def _exact(pattern: str, items: list[str]) -> AddressRule:
    normal = []
    for item in items:
        ip = _normal_ip(item)
        if ip is None:
            raise AddressPatternError(f"white address {pattern!r}: {item!r} is not an IP address")
        normal.append(ip)
    if not normal:
        raise AddressPatternError(f"white address {pattern!r} lists no address")
    return AddressRule(pattern, exact=frozenset(normal))


def _range(pattern: str) -> AddressRule:
    if ":" in pattern:
        raise AddressPatternError(f"white address {pattern!r}: IPv6 ranges are not supported by the embedded broker; "
                                  "list the addresses instead")
    parts = [p.strip() for p in pattern.split(".")]
    if len(parts) != 4:
        raise AddressPatternError(f"white address {pattern!r}: an IPv4 range has four parts, like 192.168.0.*")
    head: list[int] = []
    for index, part in enumerate(parts):
        bounds = _part_range(pattern, part)
        if bounds is None:
            head.append(_byte(pattern, part))
            continue
        if index == 0:
            raise AddressPatternError(f"white address {pattern!r}: the first part cannot be a range")
        return AddressRule(pattern, range_head=tuple(head), range_low=bounds[0], range_high=bounds[1])
    # only patterns holding '*' or '-' get here, and such a part is a range or a bad number
    raise AddressPatternError(f"white address {pattern!r}: no part is a range ('*' or 'a-b')")  # pragma: no cover


def _part_range(pattern: str, part: str) -> tuple[int, int] | None:
    if part == "*":
        return 0, 255
    if "-" in part:
        low_text, _, high_text = part.partition("-")
        low, high = _byte(pattern, low_text), _byte(pattern, high_text)
        if low > high:
            raise AddressPatternError(f"white address {pattern!r}: range {part!r} runs backwards")
        return low, high
    return None


def _byte(pattern: str, text: str) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise AddressPatternError(f"white address {pattern!r}: {text!r} is not a number from 0 to 255") from None
    if not 0 <= value <= 255:
        raise AddressPatternError(f"white address {pattern!r}: {value} is not from 0 to 255")
    return value
