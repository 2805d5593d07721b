"""A consumer group's settings (RocketMQ's SubscriptionGroupConfig) and their JSON form.

The broker keeps them in ``subscriptionGroup.json``; UPDATE_AND_CREATE_SUBSCRIPTIONGROUP carries
one as its body and GET_ALL_SUBSCRIPTIONGROUP_CONFIG answers with all of them, in this form.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

DEFAULT_RETRY_MAX_TIMES = 16


@dataclass(frozen=True, slots=True)
class SubscriptionGroupConfig:
    """Settings of one consumer group (RocketMQ's SubscriptionGroupConfig)."""

    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    consume_message_orderly: bool = False  # POP/gRPC consumers get FIFO delivery per message group
    retry_queue_nums: int = 1
    retry_max_times: int = DEFAULT_RETRY_MAX_TIMES
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True

    def to_json(self) -> dict[str, Any]:
        return {
            "groupName": self.group_name,
            "consumeEnable": self.consume_enable,
            "consumeFromMinEnable": self.consume_from_min_enable,
            "consumeBroadcastEnable": self.consume_broadcast_enable,
            "consumeMessageOrderly": self.consume_message_orderly,
            "retryQueueNums": self.retry_queue_nums,
            "retryMaxTimes": self.retry_max_times,
            "brokerId": self.broker_id,
            "whichBrokerWhenConsumeSlowly": self.which_broker_when_consume_slowly,
            "notifyConsumerIdsChangedEnable": self.notify_consumer_ids_changed_enable,
            # RocketMQ 5.x's fields, at its defaults: OrbitMQ applies none of them.
            "consumeTimeoutMinute": 15,
            "groupRetryPolicy": {"type": "CUSTOMIZED"},
            "groupSysFlag": 0,
            "attributes": {},
        }

    @classmethod
    def from_json(cls, group: str, raw: dict[str, Any]) -> SubscriptionGroupConfig:
        base = cls(group)
        config = replace(
            base,
            consume_enable=bool(raw.get("consumeEnable", base.consume_enable)),
            consume_from_min_enable=bool(raw.get("consumeFromMinEnable", base.consume_from_min_enable)),
            consume_broadcast_enable=bool(raw.get("consumeBroadcastEnable", base.consume_broadcast_enable)),
            consume_message_orderly=bool(raw.get("consumeMessageOrderly", base.consume_message_orderly)),
            retry_queue_nums=int(raw.get("retryQueueNums", base.retry_queue_nums)),
            retry_max_times=int(raw.get("retryMaxTimes", base.retry_max_times)),
            broker_id=int(raw.get("brokerId", base.broker_id)),
            which_broker_when_consume_slowly=int(
                raw.get("whichBrokerWhenConsumeSlowly", base.which_broker_when_consume_slowly)
            ),
            notify_consumer_ids_changed_enable=bool(
                raw.get("notifyConsumerIdsChangedEnable", base.notify_consumer_ids_changed_enable)
            ),
        )
        if not 0 <= config.retry_queue_nums <= 1024 or not 0 <= config.retry_max_times <= (1 << 31) - 1:
            raise ValueError(
                f"retryQueueNums {config.retry_queue_nums} or retryMaxTimes {config.retry_max_times} out of range"
            )
        return config
