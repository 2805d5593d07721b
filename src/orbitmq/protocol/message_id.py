"""Message ids (remoting-protocol §4): the broker's offsetMsgId and the producer's UNIQ_KEY.

offsetMsgId (what a send response returns as ``msgId``) is uppercase hex of::

    size    field
    4 / 16  store host IPv4 / IPv6 address
    4       store port (int)
    8       commit-log offset (long)

so 32 hex digits for IPv4 and 56 for IPv6. Decoding one tells a client which broker to
ask (VIEW_MESSAGE_BY_ID) and where the record starts in that broker's commit log.

UNIQ_KEY (property ``UNIQ_KEY``, what users see as the message id) follows Java's layout::

    size    field
    4 / 16  client IPv4 / IPv6 address
    2       process id, low 16 bits
    4       a random number fixed per generator
    4       ms since the start of the current month (local time)
    2       counter, wrapping at 65536

The first three parts are rendered to hex once per generator. Keys from other clients
(the C++ client scrambles this layout) are opaque strings and never parsed.
"""

from __future__ import annotations

import datetime
import ipaddress
import itertools
import os
import random
import struct
import time
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import NamedTuple

from orbitmq.errors import LocalProtocolError, RemoteProtocolError

_PORT_AND_OFFSET = struct.Struct(">iq")
_IPV4_ID_CHARS = 32
_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")
_IPV6_ID_CHARS = 56


class OffsetMsgId(NamedTuple):
    """A decoded offsetMsgId."""

    host: str
    port: int
    commit_log_offset: int

    @property
    def addr(self) -> str:
        """``host:port`` (IPv6 hosts in brackets) for connecting to the store broker."""
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def encode_offset_msg_id(host: str, port: int, commit_log_offset: int) -> str:
    """The offsetMsgId of the record at ``commit_log_offset`` on the broker at ``host:port``.

    Raises:
        LocalProtocolError: ``host`` is not an IP address, or port/offset are out of range.
    """
    try:
        address = ipaddress.ip_address(host)
        tail = _PORT_AND_OFFSET.pack(port, commit_log_offset)
    except (ValueError, struct.error) as exc:
        raise LocalProtocolError(
            f"cannot build an offsetMsgId for {host}:{port} at commit-log offset {commit_log_offset}"
        ) from exc
    return (address.packed + tail).hex().upper()


def join_offset_msg_ids(host: str, port: int, commit_log_offsets: Sequence[int]) -> str:
    """The offsetMsgIds of records on one broker, comma-separated (a batch send's answer).

    Equal to joining :func:`encode_offset_msg_id` of each offset with ``,``, with the offsets
    packed and hex-encoded in one go rather than formatted one by one.

    Raises:
        LocalProtocolError: as :func:`encode_offset_msg_id`.
    """
    if not commit_log_offsets:
        return ""
    prefix = _offset_msg_id_prefix(host, port)
    try:
        packed = struct.pack(f">{len(commit_log_offsets)}q", *commit_log_offsets)
    except struct.error as exc:
        raise LocalProtocolError(f"cannot build offsetMsgIds for {host}:{port}: {exc}") from exc
    return prefix + packed.hex(",", 8).upper().replace(",", "," + prefix)


@lru_cache(maxsize=16)
def _offset_msg_id_prefix(host: str, port: int) -> str:
    """The store host and port part of offsetMsgIds (all but the 16 offset digits)."""
    return encode_offset_msg_id(host, port, 0)[:-16]


def decode_offset_msg_id(msg_id: str) -> OffsetMsgId:
    """Split an offsetMsgId into store host, port and commit-log offset.

    Raises:
        RemoteProtocolError: ``msg_id`` is not 32 or 56 hex digits.
    """
    if len(msg_id) not in (_IPV4_ID_CHARS, _IPV6_ID_CHARS):
        raise RemoteProtocolError(f"offsetMsgId {msg_id!r} has {len(msg_id)} characters, not 32 or 56")
    # bytes.fromhex() skips whitespace, so check the digits themselves.
    if not all(char in _HEX_DIGITS for char in msg_id):
        raise RemoteProtocolError(f"offsetMsgId {msg_id!r} is not hexadecimal")
    raw = bytes.fromhex(msg_id)
    address_len = len(raw) - _PORT_AND_OFFSET.size
    host = str(ipaddress.ip_address(raw[:address_len]))
    port, commit_log_offset = _PORT_AND_OFFSET.unpack_from(raw, address_len)
    return OffsetMsgId(host, port, commit_log_offset)


def _month_bounds_ms(now_ms: int) -> tuple[int, int]:
    """Start of the local month containing ``now_ms`` and start of the next one, in epoch ms."""
    now = datetime.datetime.fromtimestamp(now_ms / 1000).astimezone()
    start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    next_month = (start + datetime.timedelta(days=32)).replace(day=1)
    return int(start.timestamp() * 1000), int(next_month.timestamp() * 1000)


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class UniqKeyGenerator:
    """Makes UNIQ_KEY values in Java's layout; safe to share between threads.

    The counter is an ``itertools.count``, whose ``next`` is atomic under the GIL, so
    no lock is taken per key.
    """

    __slots__ = ("_prefix", "_counter", "_clock_ms", "_month")

    def __init__(
        self,
        ip: str = "127.0.0.1",
        pid: int | None = None,
        random_id: int | None = None,
        clock_ms: Callable[[], int] = _wall_clock_ms,
    ) -> None:
        """
        Args:
            ip: the client's address (IPv4 or IPv6) placed in every key.
            pid: process id; defaults to this process's.
            random_id: the 4-byte random part; defaults to a fresh random value.
            clock_ms: epoch-ms clock (tests pass a fixed one).
        """
        pid_value = os.getpid() if pid is None else pid
        random_value = random.getrandbits(32) if random_id is None else random_id
        packed = ipaddress.ip_address(ip).packed
        fixed = packed + struct.pack(">HI", pid_value & 0xFFFF, random_value & 0xFFFFFFFF)
        self._prefix = fixed.hex().upper()
        self._counter = itertools.count()
        self._clock_ms = clock_ms
        self._month = _month_bounds_ms(clock_ms())

    def next_key(self) -> str:
        """A new unique key: the fixed prefix, then ms-since-month-start and the counter."""
        return f"{self._time_head()}{next(self._counter) & 0xFFFF:04X}"

    def next_keys(self, count: int) -> list[str]:
        """``count`` new unique keys, as ``count`` calls of :meth:`next_key` in one millisecond give."""
        head = self._time_head()
        return [f"{head}{value & 0xFFFF:04X}" for value in itertools.islice(self._counter, max(count, 0))]

    def _time_head(self) -> str:
        """The fixed prefix and the milliseconds since the month began (8 hex digits)."""
        now_ms = self._clock_ms()
        month_start_ms, next_month_ms = self._month
        if not month_start_ms <= now_ms < next_month_ms:
            # Two threads may both recompute here; they store the same value.
            self._month = _month_bounds_ms(now_ms)
            month_start_ms = self._month[0]
        return f"{self._prefix}{(now_ms - month_start_ms) & 0xFFFFFFFF:08X}"
