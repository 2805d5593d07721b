"""Signatures against golden requests recorded from the real C++ client (``rocketmq==0.4.4``).

``tests/fixtures/acl/cpp_signed_requests.jsonl`` holds raw frames the C++ client sent with
``set_session_credentials("rocketmq2", "12345678", "ALIYUN")`` (recorded by
``tests/support/record_signed_requests.py``): sends with non-ASCII properties and bodies, a batch,
pull, offset, heartbeat and route requests. Their JSON headers carry some ext values as JSON
numbers, so the decode path is covered too.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orbitmq.acl import signature
from orbitmq.acl.signature import compute_signature, sign_request, signature_content
from orbitmq.protocol.command import RemotingCommand, decode_command

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "acl" / "cpp_signed_requests.jsonl"
SECRET = "12345678"


def cpp_requests() -> list[RemotingCommand]:
    lines = FIXTURE.read_text().splitlines()
    return [decode_command(bytes.fromhex(json.loads(line)["frame_hex"])) for line in lines if line]


def test_signature_matches_java_acl_signer_vector() -> None:
    # RocketMQ's AclSignerTest: calSignature("RocketMQ", "12345678").
    assert compute_signature(b"RocketMQ", "12345678") == "IUc8rrO/0gDch8CjObLQsW2rsiA="


def test_signature_fixture_covers_bodies_batches_and_numeric_ext_values() -> None:
    requests = cpp_requests()
    codes = [request.code for request in requests]
    assert {10, 11, 15, 34, 105} <= set(codes)
    assert any(request.body for request in requests if request.code == 34)
    assert {request.ext_fields.get("batch") for request in requests if request.code == 10} == {"0", "1"}
    assert all(request.version == 63 and request.language == "CPP" for request in requests)


@pytest.mark.parametrize("request_index", range(9))
def test_signature_of_cpp_request_recomputes_exactly(request_index: int) -> None:
    request = cpp_requests()[request_index]
    content = signature_content(request.ext_fields, request.body, request.version)
    assert compute_signature(content, SECRET) == request.ext_fields["Signature"]
    assert compute_signature(content, SECRET + "x") != request.ext_fields["Signature"]


def test_signature_from_sign_request_equals_cpp_signature() -> None:
    for request in cpp_requests():
        ext = {
            key: value for key, value in request.ext_fields.items() if key not in ("Signature", "AccessKey")
        }
        sign_request(ext, request.body, request.version, "rocketmq2", SECRET)
        assert ext["AccessKey"] == "rocketmq2"
        assert ext["Signature"] == request.ext_fields["Signature"], request.code


def test_signature_content_is_sorted_values_then_body() -> None:
    ext = {"b": "2", "a": "1", "Signature": "ignored", "AccessKey": "ak12345"}
    assert signature_content(ext, b"BODY", 409) == b"ak123451" + b"2" + b"BODY"
    assert signature_content(ext, b"", 409) == b"ak1234512"
    assert signature_content({"k": "h\u00e9"}, b"", 409) == "h\u00e9".encode()


def test_signature_content_drops_unique_key_query_only_for_old_clients() -> None:
    ext = {"topic": "T", "_UNIQUE_KEY_QUERY": "true"}
    assert signature_content(ext, b"", 399) == b"T"
    assert signature_content(ext, b"", 400) == b"trueT"  # "_" sorts before "t"


def _plain_fields_text(ext: dict[str, str], version: int) -> bytes:
    """The definition, written out: every field but Signature (and _UNIQUE_KEY_QUERY up to
    V4_9_3), sorted by key, values only."""
    skip = {"Signature"} | ({"_UNIQUE_KEY_QUERY"} if version <= 399 else set())
    return "".join(value for key, value in sorted(ext.items()) if key not in skip).encode("utf-8")


_KEYS = st.sampled_from(
    ["Signature", "_UNIQUE_KEY_QUERY", "AccessKey", "topic", "a", "b", "queueId", "\u00e9"]
)


@settings(max_examples=300, deadline=None)
@given(
    items=st.lists(st.tuples(st.one_of(_KEYS, st.text(max_size=4)), st.text(max_size=6)), max_size=10),
    version=st.sampled_from([63, 399, 400, 409]),
)
def test_signature_content_follows_the_definition_in_any_key_order(
    items: list[tuple[str, str]], version: int
) -> None:
    # The sorted order is remembered per key order; every arrival order and repeat must still
    # give the definition's text, the remembered order included.
    ext = dict(items)
    for asked in (version, 399, 400, version):
        expected = _plain_fields_text(ext, asked)
        assert signature_content(ext, b"", asked) == expected
        assert signature_content(dict(reversed(list(ext.items()))), b"", asked) == expected


def test_signature_order_cache_is_bounded_and_starts_over_when_full() -> None:
    for number in range(signature._ORDERS_MAX + 5):
        ext = {f"k{number}": "x", "topic": "T"}
        assert signature_content(ext, b"", 409) == (b"xT" if f"k{number}" < "topic" else b"Tx")
    assert 0 < len(signature._ORDERS) <= signature._ORDERS_MAX
    assert signature_content({"topic": "T", "a": "1"}, b"B", 409) == b"1TB"
