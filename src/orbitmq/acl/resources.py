"""Which resources a request touches and which permission each needs, from its ext fields.

RocketMQ's ``PlainAccessResource.parse`` (5.3, ACL 1.0), request code by request code. A group
is named by its retry topic ``%RETRY%<group>``; that prefix is how the check tells group
permissions (``groupPerms``, ``defaultGroupPerm``) from topic permissions.

====  ===========================  ==========================================================
code  request                      needs
====  ===========================  ==========================================================
10    SEND_MESSAGE                 ``topic`` PUB; a ``%RETRY%`` topic: that group SUB
310   SEND_MESSAGE_V2              ``b`` (topic) PUB; a ``%RETRY%`` topic: that group SUB
320   SEND_BATCH_MESSAGE           as 310
36    CONSUMER_SEND_MSG_BACK       group ``group`` SUB
11    PULL_MESSAGE                 ``topic`` SUB, group ``consumerGroup`` SUB
361   LITE_PULL_MESSAGE            as 11 (RocketMQ 5's lite pull consumer)
12    QUERY_MESSAGE                ``topic`` SUB
321   QUERY_CONSUME_QUEUE          ``topic`` SUB (OrbitMQ: RocketMQ asks a signature only)
34    HEART_BEAT                   per consumer in the body: its group SUB, each topic SUB
35    UNREGISTER_CLIENT            group ``consumerGroup`` SUB
38    GET_CONSUMER_LIST_BY_GROUP   group ``consumerGroup`` SUB
15    UPDATE_CONSUMER_OFFSET       group ``consumerGroup`` SUB, ``topic`` SUB
200050 POP_MESSAGE                 ``topic`` SUB, group ``consumerGroup`` SUB
200051 ACK_MESSAGE                 as POP_MESSAGE
200053 CHANGE_MESSAGE_INVISIBLETIME as POP_MESSAGE
370   RECALL_MESSAGE               ``topic`` PUB
40001 STAGE_MESSAGES               ``topic`` PUB, as a send (OrbitMQ's own code)
admin 17 25 200 207 215 513,       ``admin: true`` (:data:`ADMIN_CODES`)
      50 51 52 53 54 40003
other everything else              a valid signature only
====  ===========================  ==========================================================

STAGE_MESSAGES stores messages that a later COMMIT_STAGED (40002) writes into their topic, so
staging is checked as sending to that topic is; the commit needs a valid signature only: it
writes nothing but records staged under that check, and its key is the writer's own.

The POP codes and RECALL_MESSAGE are absent from 4.9's table; they need what RocketMQ 5's
authorization asks of them: a POP consumer reads like a pull consumer (the topic's SUB and its
group's SUB, also to acknowledge or hide a message again), and recalling a timed message is the
producer's act, so it needs PUB on the topic. An ACK of a message popped from a retry topic names
``%RETRY%...`` as its topic, which resolves through the group permissions, as a send-back does.

OrbitMQ is stricter than RocketMQ in four places, each closing a hole RocketMQ leaves open to
any account with a valid signature:

- LOCK_BATCH_MQ (41) and UNLOCK_BATCH_MQ (42) need SUB on the body's ``consumerGroup``, so an
  account cannot take an orderly consumer's queue lock in a group it has no right to.
- INVOKE_BROKER_TO_RESET_OFFSET (222) needs what UPDATE_CONSUMER_OFFSET needs: SUB on the
  group and the topic.
- QUERY_CONSUME_QUEUE (321) needs SUB on its topic, as QUERY_MESSAGE does: it lists a queue's
  entries whatever the topic's permission (how tools read a write-only ``%DLQ%`` topic).
- UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53) and GET_BROKER_CLUSTER_ACL_CONFIG (54) are admin codes
  (RocketMQ 5.3 lists 50-52 only, so any account could rewrite the global white list).

The name server's codes are in :data:`NAMESRV_ADMIN_CODES` (see ``acl.validator``).
"""

from __future__ import annotations

from collections.abc import Mapping

from orbitmq.acl.permission import PUB, SUB
from orbitmq.errors import ProtocolError
from orbitmq.protocol.bodies import decode_heartbeat, decode_lock_batch_request

__all__ = [
    "ADMIN_CODES",
    "NAMESRV_ADMIN_CODES",
    "RETRY_PREFIX",
    "TRACE_TOPIC",
    "ResourceError",
    "required_resources",
    "retry_topic",
]

RETRY_PREFIX = "%RETRY%"
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"

ADMIN_CODES = frozenset(
    {
        17,  # UPDATE_AND_CREATE_TOPIC
        25,  # UPDATE_BROKER_CONFIG
        200,  # UPDATE_AND_CREATE_SUBSCRIPTIONGROUP
        207,  # DELETE_SUBSCRIPTIONGROUP
        215,  # DELETE_TOPIC_IN_BROKER
        513,  # UPDATE_AND_CREATE_STATIC_TOPIC
        50,  # UPDATE_AND_CREATE_ACL_CONFIG
        51,  # DELETE_ACL_CONFIG
        52,  # GET_BROKER_CLUSTER_ACL_INFO
        53,  # UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (OrbitMQ: admin too)
        54,  # GET_BROKER_CLUSTER_ACL_CONFIG (OrbitMQ: admin too)
        40003,  # MERGE_CONSUMER_OFFSET (OrbitMQ's own: a slave's offsets into its master)
    }
)
"""Broker request codes only an ``admin: true`` account may send."""

NAMESRV_ADMIN_CODES = frozenset(
    {
        100,  # PUT_KV_CONFIG
        102,  # DELETE_KV_CONFIG
        103,  # REGISTER_BROKER
        104,  # UNREGISTER_BROKER
        205,  # WIPE_WRITE_PERM_OF_BROKER
        216,  # DELETE_TOPIC_IN_NAMESRV
        318,  # UPDATE_NAMESRV_CONFIG
        322,  # QUERY_DATA_VERSION (a broker's liveness check-in)
        327,  # ADD_WRITE_PERM_OF_BROKER
    }
)
"""Name-server request codes that need an admin signature there (an OrbitMQ extension)."""


class ResourceError(ProtocolError):
    """The request names its resources in a way that cannot be read (a broken heartbeat body)."""


def retry_topic(group: str) -> str:
    return RETRY_PREFIX + group


def required_resources(code: int, ext: Mapping[str, str], body: bytes) -> dict[str, int]:
    """Resource -> needed permission bit for one broker request (empty: signature only).

    Raises:
        ResourceError: the body that names the resources (heartbeat, lock) does not decode.
    """
    # Sends come first and build their answer directly: they are most of the traffic.
    if code == 310 or code == 320 or code == 10:
        topic = ext.get("topic" if code == 10 else "b")
        if topic is None:
            return {}
        return {topic: SUB if topic.startswith(RETRY_PREFIX) else PUB}
    needed: dict[str, int] = {}
    if code == 36:
        _need_group(needed, ext.get("group"))
    elif code == 11 or code == 361:
        _need(needed, ext.get("topic"), SUB)
        _need_group(needed, ext.get("consumerGroup"))
    elif code == 12 or code == 321:
        _need(needed, ext.get("topic"), SUB)
    elif code == 34:
        try:
            heartbeat = decode_heartbeat(body)
        except ProtocolError as exc:
            raise ResourceError(f"heartbeat body: {exc}") from None
        for consumer in heartbeat.consumer_data_set:
            _need_group(needed, consumer.group_name)
            for subscription in consumer.subscription_data_set:
                _need(needed, subscription.topic, SUB)
    elif code in (35, 38):
        _need_group(needed, ext.get("consumerGroup"))
    elif code == 15:
        _need_group(needed, ext.get("consumerGroup"))
        _need(needed, ext.get("topic"), SUB)
    elif code in (200050, 200051, 200053):  # POP_MESSAGE, ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME
        _need(needed, ext.get("topic"), SUB)
        _need_group(needed, ext.get("consumerGroup"))
    elif code == 370:  # RECALL_MESSAGE
        _need(needed, ext.get("topic"), PUB)
    elif code == 40001:  # STAGE_MESSAGES: what a send to the topic needs
        topic = ext.get("topic")
        _need(needed, topic, SUB if topic is not None and topic.startswith(RETRY_PREFIX) else PUB)
    elif code in (41, 42):
        try:
            lock = decode_lock_batch_request(body)
        except ProtocolError as exc:
            raise ResourceError(f"lock request body: {exc}") from None
        _need_group(needed, lock.consumer_group)
    elif code == 222:
        _need_group(needed, ext.get("group"))
        _need(needed, ext.get("topic"), SUB)
    return needed


def _need(needed: dict[str, int], resource: str | None, permission: int) -> None:
    if resource is not None:
        needed[resource] = permission


def _need_group(needed: dict[str, int], group: str | None) -> None:
    if group is not None:
        needed[retry_topic(group)] = SUB
