"""Plain values shared by every layer: messages, queues, routes. No I/O, no encoding."""

from orbitmq.model.message import (
    Message,
    MessageConst,
    MessageExt,
    MessageQueue,
    SysFlag,
)

__all__ = ["Message", "MessageConst", "MessageExt", "MessageQueue", "SysFlag"]
