"""White-list address patterns: each RocketMQ form, IPv6 spellings, and rejected patterns."""

from __future__ import annotations

import pytest

from orbitmq.acl.address import parse_address_pattern
from orbitmq.errors import ConfigError


@pytest.mark.parametrize(
    ("pattern", "host", "expected"),
    [
        ("*", "10.1.2.3", True),
        ("*.*.*.*", "::1", True),
        ("*:*:*:*:*:*:*:*", "192.168.0.1", True),
        ("", "127.0.0.1", False),
        ("192.168.1.7", "192.168.1.7", True),
        ("192.168.1.7", "192.168.1.8", False),
        ("192.168.1.{7,8,9}", "192.168.1.8", True),
        ("192.168.1.{7,8,9}", "192.168.1.10", False),
        ("192.168.1.7,10.0.0.1", "10.0.0.1", True),
        ("192.168.1.7,10.0.0.1", "10.0.0.2", False),
        ("192.168.1.*", "192.168.1.250", True),
        ("192.168.1.*", "192.168.2.1", False),
        ("10.*.*.*", "10.200.3.4", True),
        ("10.*.*.*", "11.0.0.1", False),
        ("192.168.1.1-200", "192.168.1.200", True),
        ("192.168.1.1-200", "192.168.1.201", False),
        ("10.10.0-20.*", "10.10.20.99", True),
        ("10.10.0-20.*", "10.10.21.0", False),
        ("127.0.0.1", "::ffff:127.0.0.1", True),
        ("::1", "0:0:0:0:0:0:0:1", True),
        ("fe80:0:0:0:0:0:0:1-ff", "fe80::ff", True),
        ("fe80:0:0:0:0:0:0:1-ff", "fe80::100", False),
        ("fe80::{1,2}", "fe80::2", True),
        ("fe80:0:0:0:*", "fe80::abcd", True),
        ("fe80:0:0:0:*", "fe81::1", False),
        ("10.*.*.*", "fe80::1", False),
        ("10.0.0.1", "not-an-address", False),
    ],
)
def test_address_pattern_matches(pattern: str, host: str, expected: bool) -> None:
    assert parse_address_pattern(pattern).matches(host) is expected


@pytest.mark.parametrize(
    "pattern",
    [
        "10.1.2",
        "10.*.0.1",
        "*.1.2.3",
        "10.1.2.300",
        "10.1.2.9-3",
        "10.1.{1,2}.3",
        "10.1.2.{}",
        "example.com",
        "1.2.3.4,x",
    ],
)
def test_address_pattern_rejects_malformed(pattern: str) -> None:
    with pytest.raises(ConfigError, match="address pattern"):
        parse_address_pattern(pattern)
