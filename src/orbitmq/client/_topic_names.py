"""Which topics users made, and which permissions a topic may have: pure rules of the admin client.

A RocketMQ broker creates topics for itself: retry (``%RETRY%<group>``) and dead-letter
(``%DLQ%<group>``) topics, ``rmq_sys_*`` and the transaction topics, TBW102 (the auto-create
template), SCHEDULE_TOPIC_XXXX, SELF_TEST_TOPIC, OFFSET_MOVED_EVENT, and three named after its
cluster and itself: ``<cluster>``, ``<cluster>_REPLY_TOPIC`` and ``<broker name>``. Tools that
report on "every topic" mean the others.
"""

from __future__ import annotations

from orbitmq.errors import ClientError
from orbitmq.model.route import PERM_INHERIT, PERM_READ, PERM_WRITE, ClusterInfo

__all__ = ["check_topic_perm", "is_internal_topic"]

# Topics a broker creates for itself, besides the ones named after its cluster and itself.
_INTERNAL_TOPICS = frozenset(
    {
        "TBW102",
        "SCHEDULE_TOPIC_XXXX",
        "SELF_TEST_TOPIC",
        "OFFSET_MOVED_EVENT",
        "BenchmarkTest",
        "TRANS_CHECK_MAX_TIME_TOPIC",
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "RMQ_SYS_TRANS_OP_HALF_TOPIC",
        "RMQ_SYS_TRACE_TOPIC",
    }
)
_INTERNAL_TOPIC_PREFIXES = ("%RETRY%", "%DLQ%", "rmq_sys_", "RMQ_SYS_")
_PERM_BITS = PERM_READ | PERM_WRITE | PERM_INHERIT


def check_topic_perm(topic: str, perm: int) -> None:
    """Refuse a topic permission no RocketMQ client can use.

    Raises:
        ClientError: ``perm`` has bits other than read (4), write (2) and inherit (1), or
            neither read nor write (the topic would accept nothing and deliver nothing).
    """
    if perm & ~_PERM_BITS or not perm & (PERM_READ | PERM_WRITE):
        raise ClientError(
            f"perm {perm} is not a valid permission for topic {topic}: use 2 (write only), "
            "4 (read only) or 6 (read and write)"
        )


def is_internal_topic(topic: str, cluster_info: ClusterInfo) -> bool:
    """Is ``topic`` one a broker of ``cluster_info`` created for itself (see the module docstring)?"""
    if topic in _INTERNAL_TOPICS or topic.startswith(_INTERNAL_TOPIC_PREFIXES):
        return True
    if topic in cluster_info.broker_addr_table or topic in cluster_info.cluster_addr_table:
        return True
    return topic.endswith("_REPLY_TOPIC") and topic[: -len("_REPLY_TOPIC")] in cluster_info.cluster_addr_table
