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
