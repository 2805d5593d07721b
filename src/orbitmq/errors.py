"""Every exception OrbitMQ raises, in one tree under :class:`OrbitError`.

Expected outcomes (a pull that finds nothing, an offset that moved) are status
values, not exceptions; what lives here are faults. Retry policy is data on the
class: a client retry loop reads ``retriable`` and ``refresh_route`` and never
the message text.
"""

from __future__ import annotations

import os
from typing import ClassVar


class OrbitError(Exception):
    """Root of every OrbitMQ exception."""

    retriable: ClassVar[bool] = False
    refresh_route: ClassVar[bool] = False


# -- protocol --------------------------------------------------------------------------------


class ProtocolError(OrbitError):
    """Bytes that do not follow the remoting protocol."""


class LocalProtocolError(ProtocolError):
    """We tried to encode something the protocol cannot carry (our bug or the caller's)."""


class RemoteProtocolError(ProtocolError):
    """The peer sent bytes that cannot be decoded; the connection should be closed."""


class BadRequestError(RemoteProtocolError):
    """A well-framed request whose content breaks a rule (a field out of range, a bad name).

    Unlike its parent this does not cost the connection: the server answers ``code`` (a
    RocketMQ response code, SYSTEM_ERROR unless the rule says otherwise) with ``remark``, a
    short text naming the field and never the whole offending value.
    """

    def __init__(self, remark: str, code: int = 1, field: str = "") -> None:
        super().__init__(remark)
        self.remark = remark
        self.code = code
        self.field = field


# -- store -----------------------------------------------------------------------------------


class StoreError(OrbitError):
    """A fault of the message store (not an expected outcome such as 'no message')."""


class CorruptRecordError(StoreError):
    """A record on disk fails its checks (magic code, size or body CRC)."""


class StoreFullError(StoreError):
    """The disk is too full to accept more writes."""


class StoreClosedError(StoreError):
    """The store was used after close() or before open()."""


class StoreLockedError(StoreError):
    """Another process holds the directory's lock: one server or tool per store directory."""

    def __init__(self, message: str, directory: str, pid: int | None) -> None:
        super().__init__(message)
        self.directory = directory
        self.pid = pid


# -- remoting --------------------------------------------------------------------------------


class RemotingError(OrbitError):
    """A fault of the connection to a remote server."""

    retriable = True


class ConnectError(RemotingError):
    """The address could not be connected."""

    refresh_route = True


class RequestTimeoutError(RemotingError):
    """No response arrived within the request's timeout."""


class ConnectionClosedError(RemotingError):
    """The connection closed while a request was in flight."""

    refresh_route = True


# -- broker responses ------------------------------------------------------------------------


class BrokerResponseError(OrbitError):
    """A server answered with a non-success response code."""

    code: int

    def __init__(self, code: int, remark: str | None = None) -> None:
        self.code = code
        self.remark = remark or ""
        super().__init__(f"response code {code}: {self.remark}")


class SystemError_(BrokerResponseError):
    """SYSTEM_ERROR (1)."""

    retriable = True


class SystemBusyError(BrokerResponseError):
    """SYSTEM_BUSY (2): the server is shedding load."""

    retriable = True


class RequestCodeNotSupportedError(BrokerResponseError):
    """REQUEST_CODE_NOT_SUPPORTED (3)."""


class MessageIllegalError(BrokerResponseError):
    """MESSAGE_ILLEGAL (13): the message breaks a size or naming rule."""


class ServiceNotAvailableError(BrokerResponseError):
    """SERVICE_NOT_AVAILABLE (14): the broker is shutting down or its disk is full."""

    retriable = True
    refresh_route = True


class NoPermissionError(BrokerResponseError):
    """NO_PERMISSION (16)."""

    retriable = True
    refresh_route = True


class TopicNotExistError(BrokerResponseError):
    """TOPIC_NOT_EXIST (17)."""

    retriable = True
    refresh_route = True


class QueryNotFoundError(BrokerResponseError):
    """QUERY_NOT_FOUND (22): no message (or offset, or config item) matched the query."""


class SubscriptionParseFailedError(BrokerResponseError):
    """SUBSCRIPTION_PARSE_FAILED (23): the broker could not compile a subscription expression."""


class SubscriptionGroupNotExistError(BrokerResponseError):
    """SUBSCRIPTION_GROUP_NOT_EXIST (26)."""


class ConsumerNotOnlineError(BrokerResponseError):
    """CONSUMER_NOT_ONLINE (206): the group has no online member to ask."""


_ERRORS_BY_CODE: dict[int, type[BrokerResponseError]] = {
    1: SystemError_,
    2: SystemBusyError,
    3: RequestCodeNotSupportedError,
    13: MessageIllegalError,
    14: ServiceNotAvailableError,
    16: NoPermissionError,
    17: TopicNotExistError,
    22: QueryNotFoundError,
    23: SubscriptionParseFailedError,
    26: SubscriptionGroupNotExistError,
    206: ConsumerNotOnlineError,
}


def error_for_code(code: int, remark: str | None = None) -> BrokerResponseError:
    """The exception for a response code (a plain BrokerResponseError when we have no subclass)."""
    cls = _ERRORS_BY_CODE.get(code, BrokerResponseError)
    return cls(code, remark)


# -- filters ---------------------------------------------------------------------------------


class FilterExpressionError(OrbitError):
    """A subscription expression (SQL92 or TAG) does not compile.

    ``line`` and ``column`` (1-based) point at the offending character when known (0 otherwise);
    the message names them.
    """

    def __init__(self, message: str, line: int = 0, column: int = 0) -> None:
        self.line = line
        self.column = column
        where = f" at line {line}, column {column}" if line else ""
        super().__init__(f"{message}{where}")


# -- configuration ---------------------------------------------------------------------------


class ConfigError(OrbitError):
    """A configuration file or flag is invalid; the message names the key."""


class ListenError(ConfigError):
    """A server cannot listen where its configuration says (the port is taken, the address is not local).

    ``key`` is the config key that chose the port; a command line names its own flag instead.
    """

    def __init__(self, key: str, host: str, port: int, reason: str) -> None:
        super().__init__(f"config key '{key}': cannot listen on {host}:{port}: {reason}")
        self.key = key
        self.host = host
        self.port = port
        self.reason = reason

    @classmethod
    def from_os_error(cls, key: str, host: str, port: int, exc: OSError) -> ListenError:
        """The system's reason in its own short words ("address already in use")."""
        reason = os.strerror(exc.errno).lower() if exc.errno else str(exc)
        return cls(key, host, port, reason)


# -- client ----------------------------------------------------------------------------------


class ClientError(OrbitError):
    """A client-side fault that is not a server's answer."""


class MessageValidationError(ClientError):
    """A message breaks a rule before it is sent (topic name, empty body, size); names what."""


class ClientStateError(ClientError):
    """A client object was used in the wrong state (not started, already shut down)."""


class NoRouteError(ClientError):
    """No route to any broker for a topic (unknown topic without auto-create, or no writable queue)."""

    retriable = True
    refresh_route = True
