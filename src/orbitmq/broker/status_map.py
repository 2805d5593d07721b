"""Store statuses -> response codes, in one place (remoting-protocol §2.4 and §2.5).

The store answers with status values (PutStatus, GetStatus); the handlers never decide a
response code from a status themselves, they ask here.
"""

from __future__ import annotations

from orbitmq.protocol.codes import ResponseCode
from orbitmq.store.message_store import GetStatus, PutStatus

_PUT_CODES: dict[PutStatus, tuple[ResponseCode, str]] = {
    PutStatus.PUT_OK: (ResponseCode.SUCCESS, ""),
    PutStatus.FLUSH_DISK_TIMEOUT: (ResponseCode.FLUSH_DISK_TIMEOUT, "flush disk timed out"),
    PutStatus.FLUSH_SLAVE_TIMEOUT: (
        ResponseCode.FLUSH_SLAVE_TIMEOUT,
        "stored, but no slave acknowledged it within slaveTimeout",
    ),
    PutStatus.SLAVE_NOT_AVAILABLE: (
        ResponseCode.SLAVE_NOT_AVAILABLE,
        "stored, but no slave is connected and close enough to acknowledge it",
    ),
    PutStatus.CREATE_MAPPED_FILE_FAILED: (
        ResponseCode.SYSTEM_ERROR,
        "create mapped file failed, server is busy or broken.",
    ),
    PutStatus.MESSAGE_ILLEGAL: (ResponseCode.MESSAGE_ILLEGAL, "the message is illegal"),
    PutStatus.PROPERTIES_SIZE_EXCEEDED: (
        ResponseCode.MESSAGE_ILLEGAL,
        "the message properties are too large",
    ),
    PutStatus.SERVICE_NOT_AVAILABLE: (
        ResponseCode.SERVICE_NOT_AVAILABLE,
        "service not available now, the store may be closed or the disk full",
    ),
    PutStatus.UNKNOWN_ERROR: (ResponseCode.SYSTEM_ERROR, "unknown error while storing the message"),
}


def put_response_code(status: PutStatus, remark: str = "") -> tuple[ResponseCode, str | None]:
    """The response code of a put and its remark (the store's when it gave one)."""
    code, default_remark = _PUT_CODES.get(
        status, (ResponseCode.SYSTEM_ERROR, f"unexpected put status {status}")
    )
    if code is ResponseCode.SUCCESS:
        return code, None
    return code, remark or default_remark


# RocketMQ's PullMessageProcessor: expected "nothing yet" is PULL_NOT_FOUND (a long-poll
# candidate), a filtered-out range is PULL_RETRY_IMMEDIATELY, an offset outside the queue is
# PULL_OFFSET_MOVED (the client jumps to nextBeginOffset).
_GET_CODES: dict[GetStatus, ResponseCode] = {
    GetStatus.FOUND: ResponseCode.SUCCESS,
    GetStatus.NO_MATCHED_MESSAGE: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetStatus.MESSAGE_WAS_REMOVING: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetStatus.OFFSET_FOUND_NULL: ResponseCode.PULL_NOT_FOUND,
    GetStatus.OFFSET_OVERFLOW_ONE: ResponseCode.PULL_NOT_FOUND,
    GetStatus.OFFSET_OVERFLOW_BADLY: ResponseCode.PULL_OFFSET_MOVED,
    GetStatus.OFFSET_TOO_SMALL: ResponseCode.PULL_OFFSET_MOVED,
}


def pull_response_code(status: GetStatus, requested_queue_offset: int) -> ResponseCode:
    """The response code of a pull.

    An unknown or empty queue is PULL_NOT_FOUND when the client asked for offset 0 (nothing
    has been written yet) and PULL_OFFSET_MOVED otherwise.
    """
    if status in (GetStatus.NO_MATCHED_LOGIC_QUEUE, GetStatus.NO_MESSAGE_IN_QUEUE):
        return ResponseCode.PULL_NOT_FOUND if requested_queue_offset == 0 else ResponseCode.PULL_OFFSET_MOVED
    return _GET_CODES.get(status, ResponseCode.SYSTEM_ERROR)


def is_long_poll_candidate(code: ResponseCode) -> bool:
    """Only "no new message yet" may be parked; every other answer goes out at once."""
    return code is ResponseCode.PULL_NOT_FOUND
