"""offsetMsgId encode/decode and the UNIQ_KEY generator.

Method: known ids from remoting-protocol §4.2, Hypothesis round-trips over IPv4 and IPv6,
malformed ids, and the generator's layout, counter, month rollover and thread safety.
"""

from __future__ import annotations

import datetime
import ipaddress
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orbitmq.errors import LocalProtocolError, RemoteProtocolError
from orbitmq.model.message import MessageExt
from orbitmq.protocol.message_id import (
    OffsetMsgId,
    UniqKeyGenerator,
    decode_offset_msg_id,
    encode_offset_msg_id,
    join_offset_msg_ids,
)

_settings = settings(max_examples=80, deadline=None)


def test_offset_msg_id_known_ipv4_value() -> None:
    assert encode_offset_msg_id("127.0.0.1", 10911, 0) == "7F00000100002A9F0000000000000000"
    assert encode_offset_msg_id("10.0.0.1", 10911, 523) == "0A00000100002A9F000000000000020B"


def test_offset_msg_id_matches_message_ext_property() -> None:
    message = MessageExt(topic="T", store_host=("192.168.1.20", 10911), commit_log_offset=1 << 40)
    assert encode_offset_msg_id("192.168.1.20", 10911, 1 << 40) == message.offset_msg_id


def test_offset_msg_id_decodes_lowercase() -> None:
    decoded = decode_offset_msg_id("7f00000100002a9f000000000000020b")
    assert decoded == OffsetMsgId("127.0.0.1", 10911, 523)
    assert decoded.addr == "127.0.0.1:10911"


def test_offset_msg_id_ipv6_is_56_digits_with_bracketed_addr() -> None:
    msg_id = encode_offset_msg_id("::1", 10911, 7)
    assert len(msg_id) == 56
    decoded = decode_offset_msg_id(msg_id)
    assert decoded == OffsetMsgId("::1", 10911, 7)
    assert decoded.addr == "[::1]:10911"


@pytest.mark.parametrize(
    "msg_id",
    ["", "ABC", "7F00000100002A9F000000000000020", "Z" * 32, "0" * 40, "7F 000001 00002A9F0000000000002B"],
)
def test_offset_msg_id_malformed_raises_naming_id(msg_id: str) -> None:
    with pytest.raises(RemoteProtocolError, match="offsetMsgId"):
        decode_offset_msg_id(msg_id)


@pytest.mark.parametrize(
    ("host", "port", "offset"), [("broker-a", 1, 0), ("1.2.3.4", 1 << 31, 0), ("1.2.3.4", 1, -(1 << 64))]
)
def test_offset_msg_id_encode_refuses_bad_input(host: str, port: int, offset: int) -> None:
    with pytest.raises(LocalProtocolError):
        encode_offset_msg_id(host, port, offset)


_hosts = st.ip_addresses().map(str)


@_settings
@given(host=_hosts, port=st.integers(0, 65535), commit_log_offset=st.integers(0, 2**63 - 1))
def test_offset_msg_id_roundtrips(host: str, port: int, commit_log_offset: int) -> None:
    msg_id = encode_offset_msg_id(host, port, commit_log_offset)
    assert msg_id == msg_id.upper()
    decoded = decode_offset_msg_id(msg_id)
    assert ipaddress.ip_address(decoded.host) == ipaddress.ip_address(host)
    assert (decoded.port, decoded.commit_log_offset) == (port, commit_log_offset)


@_settings
@given(text=st.text(max_size=60) | st.text(alphabet="0123456789ABCDEFabcdef xZ", min_size=30, max_size=58))
def test_offset_msg_id_arbitrary_text_raises_only_remote_protocol_error(text: str) -> None:
    try:
        decoded = decode_offset_msg_id(text)
    except RemoteProtocolError:
        return
    assert len(text) in (32, 56)
    assert decoded.commit_log_offset == int(text[-16:], 16) - ((1 << 64) if int(text[-16], 16) >= 8 else 0)


def _month_start_ms(epoch_ms: int) -> int:
    now = datetime.datetime.fromtimestamp(epoch_ms / 1000).astimezone()
    start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    return int(start.timestamp() * 1000)


def test_uniq_key_layout_follows_java() -> None:
    now_ms = 1_795_000_000_123
    generator = UniqKeyGenerator("10.1.2.3", pid=0x12345, random_id=0xCAFEBABE, clock_ms=lambda: now_ms)
    first, second = generator.next_key(), generator.next_key()
    elapsed = now_ms - _month_start_ms(now_ms)
    assert first == f"0A0102032345CAFEBABE{elapsed:08X}0000"
    assert second == first[:-4] + "0001"
    assert len(first) == 32


def test_uniq_keys_in_bulk_are_what_one_key_at_a_time_gives() -> None:
    now_ms = 1_795_000_000_123
    one = UniqKeyGenerator("10.1.2.3", pid=0x12345, random_id=0xCAFEBABE, clock_ms=lambda: now_ms)
    bulk = UniqKeyGenerator("10.1.2.3", pid=0x12345, random_id=0xCAFEBABE, clock_ms=lambda: now_ms)
    expected = [one.next_key() for _ in range(70_000)]
    got = bulk.next_keys(3) + bulk.next_keys(0) + [bulk.next_key()] + bulk.next_keys(69_996)
    assert got == expected  # the counter is shared and wraps at 16 bits in both
    assert bulk.next_keys(-1) == [] and bulk.next_key() == one.next_key()


def test_uniq_key_ipv6_prefix_is_longer() -> None:
    key = UniqKeyGenerator("::1", pid=1, random_id=1, clock_ms=lambda: 1_795_000_000_000).next_key()
    assert len(key) == 56
    assert key.startswith("0" * 30 + "01" + "0001" + "00000001")


def test_uniq_key_counter_wraps_at_16_bits() -> None:
    generator = UniqKeyGenerator(pid=1, random_id=1, clock_ms=lambda: 1_795_000_000_000)
    keys = [generator.next_key() for _ in range(65537)]
    assert keys[65535].endswith("FFFF")
    assert keys[65536].endswith("0000")


def test_uniq_key_rolls_over_to_next_month() -> None:
    clock = [int(datetime.datetime(2026, 1, 31, 23, 0).astimezone().timestamp() * 1000)]
    generator = UniqKeyGenerator(pid=1, random_id=1, clock_ms=lambda: clock[0])
    before = int(generator.next_key()[20:28], 16)
    clock[0] = int(datetime.datetime(2026, 2, 1, 0, 0, 5).astimezone().timestamp() * 1000)
    after = int(generator.next_key()[20:28], 16)
    assert before == 30 * 86_400_000 + 23 * 3_600_000
    assert after == 5_000


def test_uniq_key_unique_across_threads() -> None:
    generator = UniqKeyGenerator(pid=1, random_id=1, clock_ms=lambda: 1_795_000_000_000)
    results: list[list[str]] = [[] for _ in range(4)]

    def work(slot: list[str]) -> None:
        slot.extend(generator.next_key() for _ in range(5000))

    threads = [threading.Thread(target=work, args=(slot,)) for slot in results]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    keys = [key for slot in results for key in slot]
    assert len(set(keys)) == 20000


def test_uniq_key_defaults_use_real_clock_and_pid() -> None:
    generator = UniqKeyGenerator()
    key_a, key_b = generator.next_key(), generator.next_key()
    assert key_a != key_b
    assert key_a[:20] == key_b[:20]
    assert key_a.startswith("7F000001")


@_settings
@given(
    st.sampled_from(["127.0.0.1", "10.1.2.3", "::1", "fe80::1:2"]),
    st.integers(0, 65535),
    st.lists(st.integers(0, 2**63 - 1), max_size=20),
)
def test_offset_msg_ids_joined_equal_each_encoded(host: str, port: int, offsets: list[int]) -> None:
    expected = ",".join(encode_offset_msg_id(host, port, offset) for offset in offsets)
    assert join_offset_msg_ids(host, port, offsets) == expected


def test_offset_msg_ids_joined_refuse_an_offset_out_of_range() -> None:
    with pytest.raises(LocalProtocolError):
        join_offset_msg_ids("127.0.0.1", 10911, [0, 2**63])
