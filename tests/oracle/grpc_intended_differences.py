"""The reviewed list of differences between Apache RocketMQ's 5.x gRPC proxy and OrbitMQ's.

The gRPC counterpart of tests/oracle/intended_differences.py, with the same two kinds of entry
(``known_defect=False``: OrbitMQ answers differently on purpose; ``known_defect=True``: a
difference still open, listed with what is missing). Patterns are fnmatch patterns over
(scenario, recorded step, view path); see tests/oracle/grpc_harness.py for the paths.

The reference is Apache RocketMQ's proxy 5.5.0 in LOCAL mode (tests/oracle/grpc_java/pom.xml),
its broker with autoCreateTopicEnable, autoCreateSubscriptionGroup and recallMessageEnable on.
"""

from __future__ import annotations

from tests.oracle.harness import Allowed

_AUTO_TOPIC = (
    "OrbitMQ's proxy routes a topic it does not know through TBW102 when the name servers have "
    "it (autoCreateTopicEnable), as 4.x producers do, so a 5.x client's first send creates the "
    "topic (proxy/gateway.py); Apache's proxy answers TOPIC_NOT_FOUND whatever the broker's "
    "autoCreateTopicEnable says"
)
_BAD_HANDLE = (
    "A receipt handle that does not parse gets INVALID_RECEIPT_HANDLE naming what is wrong; "
    "Apache fails through an uncaught IllegalArgumentException from ReceiptHandle.decode "
    "(INTERNAL_SERVER_ERROR with a stack line). The SDKs give up on both"
)

INTENDED: list[Allowed] = [
    Allowed("query_route", "unknown topic", "*", _AUTO_TOPIC),
    Allowed("query_assignment", "unknown topic", "*", _AUTO_TOPIC),
    Allowed("send_bad_topic", "unknown topic", "*", _AUTO_TOPIC),
    Allowed(
        "telemetry_settings",
        "consumer settings of an unknown group",
        "*",
        "OrbitMQ creates a consumer group on first use, as its broker does with "
        "autoCreateSubscriptionGroup; Apache's proxy ends the Telemetry stream with gRPC "
        "INVALID_ARGUMENT for a group its broker does not have yet",
    ),
    Allowed("receive_and_ack", "ack bad handle", "*status.code=", _BAD_HANDLE),
    Allowed("receive_and_ack", "change invisible duration bad handle", "status.code=", _BAD_HANDLE),
    Allowed("forward_to_dead_letter_queue", "forward bad handle", "status.code=", _BAD_HANDLE),
    Allowed(
        "*",
        "change invisible duration*",
        "receipt_handle",
        "A failed ChangeInvisibleDuration echoes the request's receipt handle (grpc-v5-protocol "
        "P10): SDKs that store the answer's handle must never be left with an empty one; Apache "
        "leaves it out",
    ),
    Allowed(
        "receive_bad_requests",
        "unknown topic[[]0[]]",
        "status.code=",
        "Receiving from a topic that does not exist gets TOPIC_NOT_FOUND; Apache's LOCAL-mode "
        "proxy fails through a NullPointerException in LocalTopicRouteService "
        "(INTERNAL_SERVER_ERROR)",
    ),
    Allowed(
        "send_transaction",
        "bad transaction id",
        "status.code=",
        "An EndTransaction whose transaction id does not parse gets INVALID_TRANSACTION_ID; Apache "
        "answers INTERNAL_SERVER_ERROR ('cannot found transaction data'). OrbitMQ's transaction "
        "ids carry what END_TRANSACTION needs, so there is no table to miss",
    ),
    Allowed(
        "ack_and_end_edge_cases",
        "ack without entries",
        "status.code=",
        "An AckMessage without entries gets BAD_REQUEST; Apache answers INTERNAL_SERVER_ERROR "
        "('ack message result is empty')",
    ),
    Allowed(
        "ack_and_end_edge_cases",
        "rollback",
        "status.code=",
        "After an EndTransaction with no resolution (OK on both), a rollback still lands: "
        "OrbitMQ's transaction ids carry what END_TRANSACTION needs. Apache's proxy drops its "
        "transaction data at the first EndTransaction and answers INTERNAL_SERVER_ERROR ('cannot "
        "found transaction data'); the broker's transaction check resolves the half message then",
    ),
    Allowed(
        "send_delay",
        "recall bad handle",
        "status.code=",
        "A recall handle that does not decode gets BAD_REQUEST; Apache wraps the same refusal "
        "('recall handle is invalid') as INTERNAL_SERVER_ERROR",
    ),
    Allowed(
        "send_normal",
        "two messages",
        "entries*",
        "A SendMessage with several messages gets one entry per message (its id and offset); "
        "Apache sends them as one MessageBatch and answers one entry for the batch. The SDKs "
        "send one message per request",
    ),
    Allowed(
        "receive_fifo",
        "receive[[]*[]]",
        "message.user_properties=",
        "A FIFO message's group is delivered in system_properties.message_group only; Apache's "
        "proxy also leaks the broker's __SHARDINGKEY property into user_properties",
    ),
    Allowed(
        "receive_typed",
        "committed transactional message[[]*[]]",
        "message.user_properties=",
        "A committed transactional message's user properties are the producer's; Apache's proxy "
        "also leaks the broker's __transactionId__ property into them",
    ),
    Allowed(
        "offsets_and_pull",
        "sync lite subscription",
        "status.code=",
        "OrbitMQ does not serve lite topics and answers NOT_IMPLEMENTED; Apache 5.5 serves them",
    ),
]

KNOWN_DEFECTS: list[Allowed] = []

ALLOWED: list[Allowed] = INTENDED + KNOWN_DEFECTS
