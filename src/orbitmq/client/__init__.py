"""OrbitMQ's Python client: producers, consumers and an admin client over the remoting protocol.

The asyncio classes live here; :mod:`orbitmq.client.blocking` wraps them for code without an
event loop. Consumer classes are imported on first use, so the producer and admin client work
without loading the consumer machinery.
"""

from typing import Any

from orbitmq.client._send import SendResult, SendStatus
from orbitmq.client.admin import AdminClient, QueueProgress, QueueStatus
from orbitmq.client.config import ClientConfig, ProducerConfig
from orbitmq.client.producer import Producer
from orbitmq.client.transaction_producer import (
    LocalTransactionState,
    TransactionProducer,
    TransactionSendResult,
)
from orbitmq.model.message import Message, MessageExt, MessageQueue

__all__ = [
    "AdminClient",
    "ClientConfig",
    "LocalTransactionState",
    "ConsumeResult",
    "Message",
    "MessageExt",
    "MessageQueue",
    "Producer",
    "ProducerConfig",
    "PullConsumer",
    "PushConsumer",
    "QueueProgress",
    "QueueStatus",
    "SendResult",
    "SendStatus",
    "TransactionProducer",
    "TransactionSendResult",
]

_LAZY = {
    "PushConsumer": "orbitmq.client.push_consumer",
    "PullConsumer": "orbitmq.client.pull_consumer",
    "ConsumeResult": "orbitmq.client.push_consumer",
}


def __getattr__(name: str) -> Any:
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'orbitmq.client' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module_name), name)
