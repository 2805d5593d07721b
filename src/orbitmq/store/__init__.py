"""The message store: CommitLog, ConsumeQueues, index, flush and recovery, over one directory.

Synchronous and thread-safe; it never imports asyncio or sockets. The broker uses
:class:`MessageStore` and the types re-exported here.
"""

from orbitmq.store.config import FlushDiskType, StoreConfig
from orbitmq.store.message_store import (
    GetResult,
    GetStatus,
    MessageStore,
    PutMessageRequest,
    PutResult,
    PutStatus,
)

__all__ = [
    "FlushDiskType",
    "GetResult",
    "GetStatus",
    "MessageStore",
    "PutMessageRequest",
    "PutResult",
    "PutStatus",
    "StoreConfig",
]
