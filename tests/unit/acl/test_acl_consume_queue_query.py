"""QUERY_CONSUME_QUEUE (321) reads a queue's entries whatever the topic's permission, so with ACL
on it needs SUB on the topic, as QUERY_MESSAGE does (RocketMQ asks only a valid signature)."""

from __future__ import annotations

from orbitmq.acl.permission import SUB
from orbitmq.acl.resources import required_resources
from orbitmq.protocol.admin_headers import QueryConsumeQueueRequestHeader
from orbitmq.protocol.codes import RequestCode


def test_acl_query_consume_queue_needs_sub_on_the_topic() -> None:
    ext = QueryConsumeQueueRequestHeader("%DLQ%CG_X", 0, 0, 32).to_ext()
    assert required_resources(RequestCode.QUERY_CONSUME_QUEUE, ext, b"") == {"%DLQ%CG_X": SUB}
