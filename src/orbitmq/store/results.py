"""Result and request types of the message store: what a put takes and what puts and reads answer.

Importers may keep using ``orbitmq.store.message_store``, which re-exports every name here.
"""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass, field
from enum import Enum


class PutStatus(Enum):
    """Outcome of a put."""

    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"  # set by the broker when flush_future gives False
    CREATE_MAPPED_FILE_FAILED = "CREATE_MAPPED_FILE_FAILED"  # a new segment could not be created
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"  # body, topic or batch breaks a size or naming rule
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"  # property string over 32767 bytes
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"  # the store is not open, or refuses puts (a slave)
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"  # set by the broker: no slave acknowledged in time
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"  # set by the broker: no usable slave to wait for
    UNKNOWN_ERROR = "UNKNOWN_ERROR"


@dataclass(slots=True)
class PutMessageRequest:
    """One message as the broker hands it to the store (RocketMQ's MessageExtBrokerInner)."""

    topic: str
    queue_id: int
    body: bytes
    flag: int = 0
    properties: dict[str, str] = field(default_factory=dict)
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: tuple[str, int] = ("127.0.0.1", 0)
    store_host: tuple[str, int] = ("127.0.0.1", 0)
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    tags_code: int | None = None  # None: from properties["TAGS"] (delivery time for SCHEDULE_TOPIC_XXXX)
    # The property string as stored (UTF-8), when the caller already holds exactly
    # encode_properties(properties); None: the store encodes ``properties``. Whoever changes
    # ``properties`` after setting it sets it back to None.
    encoded_properties: bytes | None = None


@dataclass(slots=True)
class PutResult:
    """Outcome of a put; offsets are those of the first (or only) message."""

    status: PutStatus
    commit_log_offsets: list[int]
    queue_offset: int
    store_timestamp: int
    wrote_bytes: int
    flush_future: Future[bool] | None
    remark: str = ""


class GetStatus(Enum):
    """Outcome of :meth:`MessageStore.get_messages` (remoting-protocol §2.5)."""

    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"  # entries scanned, none passed the tag filter
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"  # entries point below the commit-log minimum
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"  # the entries could not be read
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"  # queue_offset > max
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"  # queue_offset == max: nothing new yet
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"  # queue_offset < min
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"  # the queue does not exist
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"  # the queue exists but is empty


@dataclass(slots=True)
class GetResult:
    """Raw stored records of one queue, in queue order.

    ``buffers`` holds one record each, or (a read with ``whole_runs``) slices of which each
    holds one record or a run of records adjacent in the commit log; ``queue_offsets`` and
    ``commit_log_offsets`` always hold one entry per record.
    """

    status: GetStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    buffers: list[bytes | memoryview] = field(default_factory=list)
    queue_offsets: list[int] = field(default_factory=list)
    commit_log_offsets: list[int] = field(default_factory=list)
    gated: bool = False  # stopped at the store's read limit (a confirm offset) with nothing found

    @property
    def message_count(self) -> int:
        return len(self.queue_offsets)

    @property
    def total_bytes(self) -> int:
        return sum(len(buffer) for buffer in self.buffers)

    def body(self) -> bytes:
        """The records concatenated: a PULL_MESSAGE response body."""
        return b"".join(self.buffers)


class AppendStatus(Enum):
    """Outcome of :meth:`MessageStore.append_commit_log` (a slave's replicated append)."""

    APPENDED = "APPENDED"  # the whole records at the start were appended (maybe none yet)
    NOT_AT_END = "NOT_AT_END"  # the bytes do not start at the log's end: nothing appended
    CORRUPT = "CORRUPT"  # the whole records before a bad one were appended, the rest never can be
    DISK_FULL = "DISK_FULL"  # no room on the disk: nothing appended, the same bytes may come again


@dataclass(frozen=True, slots=True)
class AppendResult:
    """What a replicated append did: ``appended_bytes`` from the start of the bytes given."""

    status: AppendStatus
    appended_bytes: int = 0
    remark: str = ""


def failed_put(status: PutStatus, remark: str) -> PutResult:
    """A PutResult for a refused put: no offsets, no flush future."""
    return PutResult(status, [], 0, 0, 0, None, remark)
