"""Remoting response codes -> gRPC ``Code``, in one place, and the in-band status helper.

The SDKs expect every RPC to finish with gRPC OK and the outcome in a ``Status`` inside the
response (grpc-v5-protocol §4.3, P11); a code of 0 counts as an illegal response. The proxy
turns each broker answer into such a status here.
"""

from __future__ import annotations

from orbitmq.protocol.codes import ResponseCode
from orbitmq.proxy._pb import definition_pb2 as pb

__all__ = ["from_remoting", "status"]

_CODES: dict[int, pb.Code] = {
    ResponseCode.SUCCESS: pb.OK,
    ResponseCode.SYSTEM_ERROR: pb.INTERNAL_SERVER_ERROR,
    ResponseCode.SYSTEM_BUSY: pb.TOO_MANY_REQUESTS,
    ResponseCode.REQUEST_CODE_NOT_SUPPORTED: pb.NOT_IMPLEMENTED,
    ResponseCode.FLUSH_DISK_TIMEOUT: pb.MASTER_PERSISTENCE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: pb.HA_NOT_AVAILABLE,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: pb.SLAVE_PERSISTENCE_TIMEOUT,
    ResponseCode.MESSAGE_ILLEGAL: pb.BAD_REQUEST,
    ResponseCode.SERVICE_NOT_AVAILABLE: pb.INTERNAL_SERVER_ERROR,
    ResponseCode.VERSION_NOT_SUPPORTED: pb.VERSION_UNSUPPORTED,
    ResponseCode.NO_PERMISSION: pb.FORBIDDEN,
    ResponseCode.TOPIC_NOT_EXIST: pb.TOPIC_NOT_FOUND,
    ResponseCode.PULL_NOT_FOUND: pb.MESSAGE_NOT_FOUND,
    ResponseCode.POLLING_TIMEOUT: pb.MESSAGE_NOT_FOUND,
    ResponseCode.POLLING_FULL: pb.TOO_MANY_REQUESTS,
    ResponseCode.SUBSCRIPTION_PARSE_FAILED: pb.ILLEGAL_FILTER_EXPRESSION,
    ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST: pb.CONSUMER_GROUP_NOT_FOUND,
    ResponseCode.NO_MESSAGE: pb.INVALID_RECEIPT_HANDLE,
    ResponseCode.INVALID_PARAMETER: pb.BAD_REQUEST,
    ResponseCode.ILLEGAL_OPERATION: pb.BAD_REQUEST,
    ResponseCode.FLOW_CONTROL: pb.TOO_MANY_REQUESTS,
}


def from_remoting(code: int) -> pb.Code:
    """The gRPC Code for a broker's response code (INTERNAL_SERVER_ERROR for the unexpected)."""
    return _CODES.get(code, pb.INTERNAL_SERVER_ERROR)


def status(code: pb.Code, message: str = "OK") -> pb.Status:
    """An in-band status (never code 0)."""
    return pb.Status(code=code if code else pb.INTERNAL_SERVER_ERROR, message=message)
