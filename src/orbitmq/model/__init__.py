"""Plain values shared by every layer: messages, queues, routes. No I/O, no encoding."""

from orbitmq.model.heartbeat import (
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    HeartbeatData,
    MessageModel,
    ProducerData,
    SubscriptionData,
)
from orbitmq.model.message import (
    Message,
    MessageConst,
    MessageExt,
    MessageQueue,
    SysFlag,
)
from orbitmq.model.route import (
    BrokerData,
    ClusterInfo,
    DataVersion,
    QueueData,
    TopicConfig,
    TopicRouteData,
)

__all__ = [
    "BrokerData",
    "ClusterInfo",
    "ConsumeFromWhere",
    "ConsumeType",
    "ConsumerData",
    "DataVersion",
    "HeartbeatData",
    "Message",
    "MessageConst",
    "MessageExt",
    "MessageModel",
    "MessageQueue",
    "ProducerData",
    "QueueData",
    "SubscriptionData",
    "SysFlag",
    "TopicConfig",
    "TopicRouteData",
]
