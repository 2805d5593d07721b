"""The one reviewed list of differences between Apache RocketMQ's broker and OrbitMQ's.

Every difference the oracle tier finds must match an entry here, or the tier fails. Each entry
says why. Patterns are fnmatch patterns over (scenario, recorded step, view path); see
tests/oracle/harness.py for the paths.

Two kinds:

- intended (``known_defect=False``): OrbitMQ answers differently on purpose;
- ``known_defect=True``: a difference OrbitMQ should not have, still open. It is listed so the
  tier stays green while it is open, never because it is wanted; each names what is missing.

The reference is Apache RocketMQ 5.5.0 (tests/oracle/java/pom.xml).
"""

from __future__ import annotations

from tests.oracle.harness import Allowed

_V498 = "OrbitMQ keeps RocketMQ 4.9.8's behaviour here, which 4.x clients and tools rely on; 5.x changed it"

INTENDED: list[Allowed] = [
    Allowed(
        "bad_headers",
        "query offset without group",
        "code",
        "A request missing a required header field gets SYSTEM_ERROR with one line naming the "
        "field; Apache reads the missing group as null and answers QUERY_NOT_FOUND",
    ),
    Allowed(
        "heartbeat_and_consumer_list",
        "heartbeat",
        "ext.IS_SU*",
        "OrbitMQ does not serve heartbeat V2 (fingerprinted heartbeats without subscriptions), "
        "so it does not advertise IS_SUPPORT_HEART_BEAT_V2 / IS_SUB_CHANGE; 5.x clients then "
        "keep sending full heartbeats, their documented fallback",
    ),
    Allowed(
        "send_refused",
        "empty body",
        "*",
        "Apache 5.5 fails an empty body through an uncaught NullPointerException (SYSTEM_ERROR "
        "with a stack line); RocketMQ's own clients never send one (Validators refuses it). "
        "OrbitMQ stores it, as 4.9.8 did",
    ),
    Allowed(
        "send_batch",
        "pull",
        "msg[[]*[]].properties",
        "OrbitMQ stamps CLUSTER, MSG_REGION and TRACE_ON on every stored message, batched or "
        "not; Apache stores a batch's inner messages with their own properties only. Consumers "
        "read these as optional",
    ),
    Allowed(
        "*",
        "*",
        "body.*enableActingMaster",
        "OrbitMQ has no acting master; the 5.x client reads an absent enableActingMaster as false, "
        "and 4.x clients do not know the field",
    ),
    Allowed(
        "route_info",
        "route",
        "body.orderTopicConf",
        "orderTopicConf: null where Apache leaves the key out; every client reads both as no "
        "order configuration (the golden route body in tests/unit/protocol pins null)",
    ),
    Allowed(
        "pop_and_ack",
        "ack with an empty handle",
        "code",
        "A malformed receipt handle gets MESSAGE_ILLEGAL naming what is wrong; Apache fails "
        "through an uncaught IllegalArgumentException (SYSTEM_ERROR)",
    ),
    Allowed(
        "acl_admin_with_acl_off",
        "*",
        "code",
        "Apache 5.5 no longer serves ACL 1.0's admin codes (50-54; its auth 2.0 replaced them) and "
        "answers REQUEST_CODE_NOT_SUPPORTED; OrbitMQ serves them for 4.x mqadmin and, with "
        "aclEnable=false, answers that ACL is off",
    ),
    Allowed(
        "orbitmq_only_codes",
        "*",
        "code",
        "STAGE_MESSAGES / COMMIT_STAGED / MERGE_CONSUMER_OFFSET are OrbitMQ's own request codes "
        "(40001-40003); Apache answers REQUEST_CODE_NOT_SUPPORTED",
    ),
    Allowed(
        "namesrv_config",
        "update a key not implemented",
        "code",
        "The name server refuses a config key it does not implement (INVALID_PARAMETER naming it, "
        "namesrv/admin_handlers.py), so an operator learns the setting had no effect; Apache's sets "
        "the field, or ignores a key it does not have",
    ),
    Allowed(
        "update_broker_config",
        "not properties",
        "code",
        "A body that is not UTF-8 properties text is refused with one line naming why; Apache "
        "ignores what it cannot parse and answers SUCCESS",
    ),
    *(
        Allowed(
            scenario,
            step,
            "code",
            _V498 + ": a queueId out of range (send, pull) and an illegal or system topic name (send, "
            "UPDATE_AND_CREATE_TOPIC) answer SYSTEM_ERROR (1), which 4.x clients retry on another "
            "broker; 5.x answers INVALID_PARAMETER (29)",
        )
        for scenario, step in [
            ("send_refused", "queue out of range"),
            ("send_refused", "illegal topic name"),
            ("pull_offsets", "queue out of range"),
            ("topic_config", "illegal name"),
            ("topic_config", "create TBW102 again"),
        ]
    ),
    Allowed(
        "delete_topic",
        "max offset after delete",
        "ext.offset=",
        "A deleted topic's queues keep counting from where they were (store/consume_queue.py "
        "delete_topic): a re-created topic's messages never share queue offsets with the deleted "
        "ones still in the commit log, so recovery and committed offsets cannot mix them up. "
        "Apache restarts them at 0",
    ),
    Allowed("consumer_offsets", "update", "code", _V498 + ": a commit for a group not yet known is kept"),
    Allowed(
        "consumer_offsets",
        "query *",
        "*",
        _V498 + ": with no committed offset and the queue's first message never swapped out, "
        "the answer is offset 0 (5.x answers QUERY_NOT_FOUND for an empty queue)",
    ),
]

# None open: each one found so far is fixed, with the scenario that found it passing.
KNOWN_DEFECTS: list[Allowed] = []

ALLOWED: list[Allowed] = INTENDED + KNOWN_DEFECTS
