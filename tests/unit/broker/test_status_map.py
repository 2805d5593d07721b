"""status_map: every store status maps to the response code RocketMQ answers with."""

from __future__ import annotations

import pytest

from orbitmq.broker.status_map import is_long_poll_candidate, pull_response_code, put_response_code
from orbitmq.protocol.codes import ResponseCode
from orbitmq.store.message_store import GetStatus, PutStatus


@pytest.mark.parametrize(
    ("status", "code"),
    [
        (PutStatus.PUT_OK, ResponseCode.SUCCESS),
        (PutStatus.FLUSH_DISK_TIMEOUT, ResponseCode.FLUSH_DISK_TIMEOUT),
        (PutStatus.CREATE_MAPPED_FILE_FAILED, ResponseCode.SYSTEM_ERROR),
        (PutStatus.MESSAGE_ILLEGAL, ResponseCode.MESSAGE_ILLEGAL),
        (PutStatus.PROPERTIES_SIZE_EXCEEDED, ResponseCode.MESSAGE_ILLEGAL),
        (PutStatus.SERVICE_NOT_AVAILABLE, ResponseCode.SERVICE_NOT_AVAILABLE),
        (PutStatus.UNKNOWN_ERROR, ResponseCode.SYSTEM_ERROR),
    ],
)
def test_status_map_put_codes(status: PutStatus, code: ResponseCode) -> None:
    assert put_response_code(status)[0] is code


def test_status_map_every_put_status_is_mapped() -> None:
    for status in PutStatus:
        code, remark = put_response_code(status)
        assert "unexpected" not in (remark or "")
        assert (remark is None) == (code is ResponseCode.SUCCESS)


def test_status_map_put_keeps_store_remark() -> None:
    assert (
        put_response_code(PutStatus.MESSAGE_ILLEGAL, "body of 5 MiB to topic T")[1]
        == "body of 5 MiB to topic T"
    )


@pytest.mark.parametrize(
    ("status", "code"),
    [
        (GetStatus.FOUND, ResponseCode.SUCCESS),
        (GetStatus.NO_MATCHED_MESSAGE, ResponseCode.PULL_RETRY_IMMEDIATELY),
        (GetStatus.MESSAGE_WAS_REMOVING, ResponseCode.PULL_RETRY_IMMEDIATELY),
        (GetStatus.OFFSET_FOUND_NULL, ResponseCode.PULL_NOT_FOUND),
        (GetStatus.OFFSET_OVERFLOW_ONE, ResponseCode.PULL_NOT_FOUND),
        (GetStatus.OFFSET_OVERFLOW_BADLY, ResponseCode.PULL_OFFSET_MOVED),
        (GetStatus.OFFSET_TOO_SMALL, ResponseCode.PULL_OFFSET_MOVED),
    ],
)
def test_status_map_pull_codes(status: GetStatus, code: ResponseCode) -> None:
    assert pull_response_code(status, 5) is code


@pytest.mark.parametrize("status", [GetStatus.NO_MATCHED_LOGIC_QUEUE, GetStatus.NO_MESSAGE_IN_QUEUE])
def test_status_map_empty_queue_depends_on_requested_offset(status: GetStatus) -> None:
    assert pull_response_code(status, 0) is ResponseCode.PULL_NOT_FOUND
    assert pull_response_code(status, 3) is ResponseCode.PULL_OFFSET_MOVED


def test_status_map_only_not_found_is_parked() -> None:
    assert is_long_poll_candidate(ResponseCode.PULL_NOT_FOUND)
    assert not is_long_poll_candidate(ResponseCode.PULL_RETRY_IMMEDIATELY)
    assert not is_long_poll_candidate(ResponseCode.SUCCESS)
