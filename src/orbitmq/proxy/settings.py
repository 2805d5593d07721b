"""The settings answer of the Telemetry stream: the client's own settings with the server's merged on top (pure).

Every SDK needs this answer (grpc-v5-protocol §10 P1-P5): push consumers refuse to start
without it, Node hangs, and Java times out its route lookup. What the server adds:

- producers: ``backoff_policy`` (3 attempts, exponential 10 ms .. 1 s, x2; Java refuses any
  other strategy for producers) and ``publishing.max_body_size`` (> 0, or every send fails on
  the client) with ``validate_message_type``;
- consumers: ``subscription.receive_batch_size`` (32), ``long_polling_timeout`` (the proxy's
  maximum), ``fifo`` (the group's ``consumeMessageOrderly``) and ``backoff_policy`` with the
  group's ``max_attempts`` (``retryMaxTimes + 1``) and RocketMQ's retry delays as
  ``customized_backoff`` (the nack delays a push consumer uses);
- everyone: ``metric.on = false`` (no OTLP collector here).
"""

from __future__ import annotations

from dataclasses import dataclass

from orbitmq.proxy._pb import definition_pb2 as pb
from orbitmq.proxy.config import ProxyConfig

__all__ = ["CONSUMER_TYPES", "GroupPolicy", "RETRY_DELAYS_MS", "answer_settings"]

RETRY_DELAYS_MS = (
    1_000, 5_000, 10_000, 30_000, 60_000, 120_000, 180_000, 240_000, 300_000,
    360_000, 420_000, 480_000, 540_000, 600_000, 1_200_000, 1_800_000, 3_600_000, 7_200_000,
)  # fmt: skip
"""RocketMQ's default retry delays (its delay levels 1s .. 2h), the nack delay per attempt."""

RECEIVE_BATCH_SIZE = 32
PRODUCER_MAX_ATTEMPTS = 3

CONSUMER_TYPES = frozenset(
    {pb.PUSH_CONSUMER, pb.SIMPLE_CONSUMER, pb.PULL_CONSUMER, pb.LITE_PUSH_CONSUMER, pb.LITE_SIMPLE_CONSUMER}
)


@dataclass(frozen=True, slots=True)
class GroupPolicy:
    """What a consumer group's broker-side config says about delivery."""

    fifo: bool = False
    max_attempts: int = 17


def answer_settings(client: pb.Settings, config: ProxyConfig, group: GroupPolicy | None) -> pb.Settings:
    """The settings to send back for ``client`` (see the module docstring)."""
    settings = pb.Settings()
    settings.CopyFrom(client)
    settings.metric.CopyFrom(pb.Metric(on=False))
    if client.client_type == pb.PRODUCER:
        backoff = settings.backoff_policy
        backoff.Clear()
        backoff.max_attempts = PRODUCER_MAX_ATTEMPTS
        backoff.exponential_backoff.initial.FromMilliseconds(10)
        backoff.exponential_backoff.max.FromMilliseconds(1_000)
        backoff.exponential_backoff.multiplier = 2.0
        settings.publishing.max_body_size = config.max_message_size_bytes
        settings.publishing.validate_message_type = config.enable_topic_message_type_check
    elif client.client_type in CONSUMER_TYPES:
        policy = group or GroupPolicy()
        subscription = settings.subscription
        subscription.receive_batch_size = RECEIVE_BATCH_SIZE
        if client.client_type != pb.SIMPLE_CONSUMER or not subscription.HasField("long_polling_timeout"):
            subscription.long_polling_timeout.FromMilliseconds(config.max_long_polling_ms)
        subscription.fifo = policy.fifo
        backoff = settings.backoff_policy
        backoff.Clear()
        backoff.max_attempts = policy.max_attempts
        for delay_ms in RETRY_DELAYS_MS:
            backoff.customized_backoff.next.add().FromMilliseconds(delay_ms)
    return settings
