"""RocketMQ's white-list address patterns (``globalWhiteRemoteAddresses``, ``whiteRemoteAddress``).

A pattern is matched against the IP address of the socket peer (no port). The forms, as in
RocketMQ's ``RemoteAddressStrategyFactory``:

=============================  ===============================================================
pattern                        matches
=============================  ===============================================================
blank or absent                nothing
``*``  ``*.*.*.*``             every address (IPv4 and IPv6)
``*:*:*:*:*:*:*:*``
``192.168.1.7``  ``::1``       that address (IPv6 in any spelling)
``192.168.1.{7,8,9}``          the listed last parts (IPv6: ``fe80::{1,2}``, hex)
``192.168.1.7,10.0.0.1``       any listed address
``192.168.1.*``  ``10.*.*.*``  one part is a wildcard; the parts after it must be ``*``
``192.168.1.1-200``            one part is an inclusive range (IPv6: hex groups,
``10.10.0-20.*``               e.g. ``fe80:0:0:0:0:0:0:1-ff``)
=============================  ===============================================================

Addresses are compared as values (``ipaddress``), not as text, so ``::ffff:10.0.0.1`` (an IPv4
client of a dual-stack socket) matches ``10.0.0.1``. One deliberate difference from RocketMQ:
a range whose later parts are not ``*`` (``10.*.0.1``) is rejected instead of being read as
``10.*.*.*``.
"""

from __future__ import annotations

import functools
import ipaddress
from dataclasses import dataclass

from orbitmq.errors import ConfigError

__all__ = ["AddressPattern", "parse_address_pattern", "peer_ip"]

_MATCH_ALL = frozenset({"*", "*.*.*.*", "*:*:*:*:*:*:*:*"})

_IP = ipaddress.IPv4Address | ipaddress.IPv6Address


@functools.lru_cache(maxsize=4096)
def peer_ip(host: str) -> _IP | None:
    """The socket peer's address as a value; IPv4-mapped IPv6 becomes IPv4; junk is None.

    Cached: every request asks for its connection's address, and parsing costs microseconds.
    """
    text = host.strip().strip("[]").split("%", 1)[0]
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


@dataclass(frozen=True, slots=True)
class AddressPattern:
    """One parsed pattern; :meth:`matches` takes the peer's IP as text."""

    text: str
    match_all: bool = False
    addresses: frozenset[_IP] = frozenset()
    # Range form: the address family (4 or 6), the exact leading parts, the ranged part's
    # bounds; parts after the ranged one are wildcards.
    family: int = 0
    prefix: tuple[int, ...] = ()
    low: int = 0
    high: int = -1

    @property
    def never(self) -> bool:
        """True for a blank pattern, which matches nothing."""
        return not (self.match_all or self.addresses or self.family)

    def matches(self, host: str) -> bool:
        """Whether the peer address ``host`` matches this pattern."""
        if self.match_all:
            return True
        if not (self.addresses or self.family):
            return False
        address = peer_ip(host)
        if address is None:
            return False
        if self.addresses:
            return address in self.addresses
        if self.family == 0 or address.version != self.family:
            return False
        parts = _parts(address)
        depth = len(self.prefix)
        return parts[:depth] == self.prefix and self.low <= parts[depth] <= self.high


def _parts(address: _IP) -> tuple[int, ...]:
    if isinstance(address, ipaddress.IPv4Address):
        return tuple(address.packed)
    packed = address.packed
    return tuple(int.from_bytes(packed[i : i + 2], "big") for i in range(0, 16, 2))


def _address(text: str, pattern: str) -> _IP:
    address = peer_ip(text)
    if address is None or text.strip() != text or not text:
        raise ConfigError(f"address pattern {pattern!r}: {text!r} is not an IP address")
    return address


def parse_address_pattern(text: str | None) -> AddressPattern:
    """Parse one white-list pattern.

    Raises:
        ConfigError: the pattern is none of the forms above; the message quotes it.
    """
    if text is None or not text.strip():
        return AddressPattern(text or "")
    pattern = text.strip()
    if pattern in _MATCH_ALL:
        return AddressPattern(pattern, match_all=True)
    if pattern.endswith("}"):
        return _braces(pattern)
    if "," in pattern:
        items = [item.strip() for item in pattern.split(",") if item.strip()]
        return AddressPattern(pattern, addresses=frozenset(_address(item, pattern) for item in items))
    if "*" in pattern or "-" in pattern:
        return _range(pattern)
    return AddressPattern(pattern, addresses=frozenset({_address(pattern, pattern)}))


def _braces(pattern: str) -> AddressPattern:
    head, brace, tail = pattern.partition("{")
    separator = ":" if ":" in pattern else "."
    if not brace or not head.endswith(separator) or "{" in tail:
        raise ConfigError(f"address pattern {pattern!r}: a '{{a,b}}' list must be the last part")
    if separator == "." and head.count(".") != 3:
        raise ConfigError(f"address pattern {pattern!r}: an IPv4 pattern has four parts")
    items = [item.strip() for item in tail[:-1].split(",") if item.strip()]
    if not items:
        raise ConfigError(f"address pattern {pattern!r}: the '{{}}' list is empty")
    addresses = frozenset(_address(head + item, pattern) for item in items)
    return AddressPattern(pattern, addresses=addresses)


def _range(pattern: str) -> AddressPattern:
    family = 6 if ":" in pattern else 4
    parts = pattern.split(":" if family == 6 else ".")
    base, part_max = (16, 0xFFFF) if family == 6 else (10, 255)
    if (family == 4 and len(parts) != 4) or (family == 6 and not 2 <= len(parts) <= 8):
        raise ConfigError(f"address pattern {pattern!r}: wrong number of parts")
    ranged = next((i for i, part in enumerate(parts) if part == "*" or "-" in part), None)
    if ranged is None or ranged == 0:
        raise ConfigError(f"address pattern {pattern!r}: the first part must be exact")
    if any(part != "*" for part in parts[ranged + 1 :]):
        raise ConfigError(f"address pattern {pattern!r}: every part after a range must be '*'")
    prefix = tuple(_number(part, base, part_max, pattern) for part in parts[:ranged])
    part = parts[ranged]
    if part == "*":
        low, high = 0, part_max
    else:
        first, _, last = part.partition("-")
        low, high = _number(first, base, part_max, pattern), _number(last, base, part_max, pattern)
        if low > high:
            raise ConfigError(f"address pattern {pattern!r}: range {part!r} runs backwards")
    return AddressPattern(pattern, family=family, prefix=prefix, low=low, high=high)


def _number(text: str, base: int, part_max: int, pattern: str) -> int:
    try:
        value = int(text.strip(), base)
    except ValueError:
        raise ConfigError(f"address pattern {pattern!r}: {text!r} is not a number") from None
    if not 0 <= value <= part_max or not text.strip():
        raise ConfigError(f"address pattern {pattern!r}: {text!r} is out of range")
    return value
