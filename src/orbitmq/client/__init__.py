"""OrbitMQ's Python client: producers, consumers and an admin client over the remoting protocol.

The asyncio classes live here; :mod:`orbitmq.client.blocking` wraps them for code without an
event loop.
"""

from orbitmq.client._reply import create_reply_message
from orbitmq.client._send import SendResult, SendStatus
from orbitmq.client.admin import AdminClient, MemberStatus, QueueProgress, QueueStatus
from orbitmq.client.config import ClientConfig, ProducerConfig
from orbitmq.client.producer import Producer
from orbitmq.client.pull_consumer import PullConsumer
from orbitmq.client.push_consumer import ConsumeResult, PushConsumer
from orbitmq.client.selector import MessageSelector
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
    "MessageSelector",
    "Producer",
    "ProducerConfig",
    "PullConsumer",
    "PushConsumer",
    "MemberStatus",
    "QueueProgress",
    "QueueStatus",
    "SendResult",
    "SendStatus",
    "TransactionProducer",
    "TransactionSendResult",
    "create_reply_message",
]
