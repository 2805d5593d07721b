"""Hostile remoting frames for the fuzz benchmark and the fuzz test tier (seeded, replayable).

Two stages, so that a run of a million frames costs little to generate:

1. *Corpus* (:func:`corpus`): Hypothesis draws requests from strategies built from the
   protocol's own header models (``HeaderBase.field_specs``: every field of every request code,
   each value legal for its rule, on a boundary, or garbage), with bodies built from the body
   models (heartbeats, lock sets, batches, registrations) or random bytes, and encodes each in
   the JSON or the binary header layout. Hand-made JSON headers add what the command encoder
   cannot produce (an ``opaque`` that is not a 32-bit integer, ext values that are objects).
2. *Expansion* (:func:`frames`): a seeded ``random.Random`` turns the corpus into as many frames
   as asked: a field of a decoded corpus command replaced by a value from the boundary pool,
   bytes flipped in the header or the body, frames truncated, lengths tampered with.

Each frame comes out as a :class:`Frame`: its bytes, the server it goes to and whether the
server is expected to close the connection (the frame does not decode locally, or its length
is refused), so a sender can pipeline the answerable ones and give the others a connection
each. Only the names in :data:`TOPICS` and :data:`GROUPS` are ever used for legal names, so a
caller can keep data under any other name out of the fuzzer's reach.

Needs Hypothesis (the ``test`` extra).
"""

from __future__ import annotations

import random
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from orbitmq.protocol import acl_commands as acl
from orbitmq.protocol import admin_headers as ah
from orbitmq.protocol import headers as h
from orbitmq.protocol import pop, staging
from orbitmq.protocol.batch import encode_batch
from orbitmq.protocol.codes import FLAG_ONEWAY, RequestCode, SerializeType
from orbitmq.protocol.command import RemotingCommand, decode_command
from orbitmq.protocol.frame import MAX_FRAME_BYTES
from orbitmq.protocol.header_fields import FieldSpec
from orbitmq.protocol.properties import encode_properties

__all__ = ["BROKER", "NAMESRV", "BROKER_REQUESTS", "NAMESRV_REQUESTS", "Frame", "corpus", "frames"]

BROKER, NAMESRV = 0, 1

# Request code -> its header model (None: no header fields, the body carries the request).
BROKER_REQUESTS: dict[int, type[Any] | None] = {
    RequestCode.SEND_MESSAGE: h.SendMessageRequestHeader,
    RequestCode.SEND_MESSAGE_V2: h.SendMessageRequestHeader,
    RequestCode.SEND_BATCH_MESSAGE: h.SendMessageRequestHeader,
    RequestCode.CONSUMER_SEND_MSG_BACK: h.ConsumerSendMsgBackRequestHeader,
    RequestCode.PULL_MESSAGE: h.PullMessageRequestHeader,
    RequestCode.LITE_PULL_MESSAGE: h.PullMessageRequestHeader,
    RequestCode.QUERY_CONSUMER_OFFSET: h.QueryConsumerOffsetRequestHeader,
    RequestCode.UPDATE_CONSUMER_OFFSET: h.UpdateConsumerOffsetRequestHeader,
    RequestCode.GET_MAX_OFFSET: h.GetMaxOffsetRequestHeader,
    RequestCode.GET_MIN_OFFSET: h.GetMinOffsetRequestHeader,
    RequestCode.GET_EARLIEST_MSG_STORETIME: h.GetEarliestMsgStoretimeRequestHeader,
    RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: h.SearchOffsetRequestHeader,
    RequestCode.HEART_BEAT: None,
    RequestCode.UNREGISTER_CLIENT: h.UnregisterClientRequestHeader,
    RequestCode.GET_CONSUMER_LIST_BY_GROUP: h.GetConsumerListByGroupRequestHeader,
    RequestCode.LOCK_BATCH_MQ: None,
    RequestCode.UNLOCK_BATCH_MQ: None,
    RequestCode.UPDATE_AND_CREATE_TOPIC: h.CreateTopicRequestHeader,
    RequestCode.DELETE_TOPIC_IN_BROKER: h.DeleteTopicRequestHeader,
    RequestCode.GET_ALL_TOPIC_CONFIG: None,
    RequestCode.VIEW_MESSAGE_BY_ID: h.ViewMessageRequestHeader,
    RequestCode.QUERY_MESSAGE: h.QueryMessageRequestHeader,
    RequestCode.QUERY_CONSUME_QUEUE: ah.QueryConsumeQueueRequestHeader,
    RequestCode.END_TRANSACTION: h.EndTransactionRequestHeader,
    RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: None,
    RequestCode.GET_TOPIC_CONFIG: h.GetTopicConfigRequestHeader,
    RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG: h.GetSubscriptionGroupConfigRequestHeader,
    RequestCode.RECALL_MESSAGE: h.RecallMessageRequestHeader,
    RequestCode.POP_MESSAGE: pop.PopMessageRequestHeader,
    RequestCode.ACK_MESSAGE: pop.AckMessageRequestHeader,
    RequestCode.CHANGE_MESSAGE_INVISIBLETIME: pop.ChangeInvisibleTimeRequestHeader,
    # What a slave copies from its master, and the replication status.
    RequestCode.GET_ALL_CONSUMER_OFFSET: None,
    RequestCode.MERGE_CONSUMER_OFFSET: None,
    RequestCode.GET_ALL_DELAY_OFFSET: None,
    RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: None,
    RequestCode.GET_TIMER_CHECK_POINT: None,
    RequestCode.GET_BROKER_HA_STATUS: None,
    RequestCode.GET_BROKER_EPOCH_CACHE: None,
    # Staged writes (OrbitMQ's own codes: exactly-once writes of the Spark sink).
    RequestCode.STAGE_MESSAGES: staging.StageMessagesRequestHeader,
    RequestCode.COMMIT_STAGED: staging.CommitStagedRequestHeader,
    # Request-reply.
    RequestCode.SEND_REPLY_MESSAGE: h.SendMessageRequestHeader,
    RequestCode.SEND_REPLY_MESSAGE_V2: h.SendMessageRequestHeader,
    # Operations: stats, connections, group admin, live config, offset resets, client relays.
    RequestCode.GET_TOPIC_STATS_INFO: ah.GetTopicStatsInfoRequestHeader,
    RequestCode.GET_CONSUME_STATS: ah.GetConsumeStatsRequestHeader,
    RequestCode.GET_BROKER_CONSUME_STATS: ah.GetBrokerConsumeStatsRequestHeader,
    RequestCode.GET_CONSUMER_CONNECTION_LIST: ah.GetConsumerConnectionListRequestHeader,
    RequestCode.GET_PRODUCER_CONNECTION_LIST: ah.GetProducerConnectionListRequestHeader,
    RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: ah.QueryTopicConsumeByWhoRequestHeader,
    RequestCode.DELETE_SUBSCRIPTIONGROUP: ah.DeleteSubscriptionGroupRequestHeader,
    RequestCode.CLONE_GROUP_OFFSET: ah.CloneGroupOffsetRequestHeader,
    RequestCode.CHECK_CLIENT_CONFIG: None,
    RequestCode.VIEW_BROKER_STATS_DATA: ah.ViewBrokerStatsDataRequestHeader,
    RequestCode.GET_BROKER_RUNTIME_INFO: None,
    RequestCode.GET_BROKER_CONFIG: None,
    RequestCode.UPDATE_BROKER_CONFIG: None,
    RequestCode.GET_CONSUMER_RUNNING_INFO: h.GetConsumerRunningInfoRequestHeader,
    RequestCode.CONSUME_MESSAGE_DIRECTLY: ah.ConsumeMessageDirectlyRequestHeader,
    RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: h.ResetOffsetRequestHeader,
    # ACL admin (served whether or not ACL is on; off, each answers that ACL is off).
    RequestCode.UPDATE_AND_CREATE_ACL_CONFIG: acl.CreateAccessConfigRequestHeader,
    RequestCode.DELETE_ACL_CONFIG: acl.DeleteAccessConfigRequestHeader,
    RequestCode.GET_BROKER_CLUSTER_ACL_INFO: None,
    RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: acl.UpdateGlobalWhiteAddrsConfigRequestHeader,
    RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG: None,
}
NAMESRV_REQUESTS: dict[int, type[Any] | None] = {
    RequestCode.REGISTER_BROKER: h.RegisterBrokerRequestHeader,
    RequestCode.UNREGISTER_BROKER: h.UnregisterBrokerRequestHeader,
    RequestCode.GET_ROUTEINFO_BY_TOPIC: h.GetRouteInfoRequestHeader,
    RequestCode.GET_BROKER_CLUSTER_INFO: None,
    RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: None,
    RequestCode.DELETE_TOPIC_IN_NAMESRV: h.DeleteTopicFromNamesrvRequestHeader,
    RequestCode.QUERY_DATA_VERSION: h.QueryDataVersionRequestHeader,
    RequestCode.GET_KV_CONFIG: h.GetKVConfigRequestHeader,
    RequestCode.PUT_KV_CONFIG: ah.PutKVConfigRequestHeader,
    RequestCode.DELETE_KV_CONFIG: ah.DeleteKVConfigRequestHeader,
    RequestCode.GET_KVLIST_BY_NAMESPACE: ah.GetKVListByNamespaceRequestHeader,
}

TOPICS = [f"FuzzTopic{index}" for index in range(24)] + ["TBW102", "%RETRY%FuzzGroup0", "%DLQ%FuzzGroup1"]
GROUPS = [f"FuzzGroup{index}" for index in range(12)]
_ILLEGAL_NAMES = [
    "", " ", "../escape", "a/b", "..", ".", "x\x00y", "bad name", "é", "T" * 128, "G" * 121, "%RETRY%",
    "SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC", "rmq_sys_wheel_timer", "OFFSET_MOVED_EVENT",
]  # fmt: skip
_BOUNDARY_INTS = [
    -1, 0, 1, 2, 7, 8, 12, 16, 32, 48, 255, 1024, 1025, 2**31 - 1, 2**31, -(2**31), -(2**31) - 1,
    2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 10**30,
]  # fmt: skip
_GARBAGE_TEXT = ["", " ", "x", "1.5", "0x10", "١٢", "²", "1_0", "+5", "-0", "nan", "9" * 40, "true", "\x00"]
_PROPERTY_KEYS = [
    "TAGS", "KEYS", "DELAY", "TRAN_MSG", "PGROUP", "REAL_TOPIC", "REAL_QID", "UNIQ_KEY", "WAIT",
    "TIMER_DELIVER_MS", "TIMER_DELAY_SEC", "TIMER_DELAY_MS", "__STARTDELIVERTIME", "RETRY_TOPIC",
    "MAX_RECONSUME_TIMES", "TRAN_PREPARED_QUEUE_OFFSET", "TRANSACTION_CHECK_TIMES", "CLUSTER", "k",
]  # fmt: skip
_LONG_TEXT = "L" * 300
# Values past every limit (property string, subscription, header text); one in HUGE_EVERY
# expanded frames carries one, the biggest rarely, so a run stays quick and small.
_HUGE_SIZES = [40_000, 40_000, 70_000, 70_000, 1024 * 1024]
HUGE_EVERY = 2000


@dataclass(frozen=True, slots=True)
class Frame:
    """One frame to send: where, its request code, its bytes, and whether it costs its connection."""

    target: int
    code: int
    data: bytes
    closes: bool


# -- Hypothesis strategies -------------------------------------------------------------------------

_names_topic = st.sampled_from(TOPICS)
_names_group = st.sampled_from(GROUPS)
_illegal = st.sampled_from(_ILLEGAL_NAMES)
_garbage = st.sampled_from(_GARBAGE_TEXT) | st.text(max_size=12)
# A small alphabet of troublemakers: Hypothesis draws from it far faster than from all of Unicode.
_small_text = st.text(st.sampled_from("aZ09_-%|./ \x00\x01\x02é中\U0001f600"), max_size=24)


def _int_text(spec: FieldSpec) -> st.SearchStrategy[str]:
    rule = spec.rule
    if rule is not None and rule.choices is not None:
        legal: st.SearchStrategy[int] = st.sampled_from([int(choice) for choice in rule.choices])  # type: ignore[call-overload]
    elif spec.wire_name in (
        "queueOffset",
        "offset",
        "commitLogOffset",
        "tranStateTableOffset",
        "commitOffset",
    ):
        legal = st.integers(0, 4096)
    else:
        legal = st.integers(0, 64)
    return st.one_of(legal.map(str), legal.map(str), st.sampled_from(_BOUNDARY_INTS).map(str), _garbage)


def _str_value(spec: FieldSpec) -> st.SearchStrategy[str]:
    rule = spec.rule
    if rule is not None and rule.name == "topic":
        return st.one_of(_names_topic, _names_topic, _names_topic, _illegal, _small_text)
    if rule is not None and rule.name == "group":
        return st.one_of(_names_group, _names_group, _names_group, _illegal, _small_text)
    if rule is not None and rule.choices is not None:
        return st.sampled_from([str(choice) for choice in rule.choices]) | _garbage
    if spec.wire_name == "properties":
        return _properties
    if spec.wire_name == "subscription":
        return st.sampled_from(["*", "a || b", "TagA", "", "||", _LONG_TEXT]) | _small_text
    return st.one_of(_small_text, _small_text, st.just(_LONG_TEXT), _garbage)


_property_value = st.one_of(
    st.sampled_from(["true", "false", "1", "3", "18", "99", "0", str(2**63), "-5", "²", "x"]),
    st.integers(0, 2**45).map(str),
    st.sampled_from(TOPICS + GROUPS),
    _small_text,
)
_properties = st.one_of(
    st.dictionaries(
        st.sampled_from(_PROPERTY_KEYS),
        _property_value.filter(lambda v: "\x01" not in v and "\x02" not in v),
        max_size=6,
    ).map(encode_properties),
    _small_text,
)


def _ext(header: type[Any] | None) -> st.SearchStrategy[dict[str, str]]:
    if header is None:
        return st.fixed_dictionaries({}, optional={"unknown": _small_text})
    fields: dict[str, st.SearchStrategy[str]] = {}
    for spec in header.field_specs():
        if spec.base is bool:
            fields[spec.wire_name] = st.sampled_from(["true", "false", "1", "0", "", "yes", "TRUE"])
        elif spec.base is int:
            fields[spec.wire_name] = _int_text(spec)
        else:
            fields[spec.wire_name] = _str_value(spec)
    required = {spec.wire_name: fields[spec.wire_name] for spec in header.field_specs() if spec.required}
    optional = {name: value for name, value in fields.items() if name not in required}
    # Required fields are there, so requests get past the header to the handlers; the
    # expansion drops fields (required ones included) from some frames.
    return st.fixed_dictionaries(required, optional=optional)


def _heartbeat_body() -> st.SearchStrategy[bytes]:
    subscription = st.fixed_dictionaries(
        {"topic": _names_topic | _illegal, "subString": st.sampled_from(["*", "a||b", _LONG_TEXT])},
        optional={
            "subVersion": st.integers(-1, 2**40) | _garbage,
            "expressionType": st.sampled_from(["TAG", "SQL92", ""]),
        },
    )
    consumer = st.fixed_dictionaries(
        {"groupName": _names_group | _illegal},
        optional={
            "consumeType": st.sampled_from(["CONSUME_PASSIVELY", "CONSUME_ACTIVELY", 0, 1, 7, "x"]),
            "messageModel": st.sampled_from(["CLUSTERING", "BROADCASTING", 0, 1, 9]),
            "consumeFromWhere": st.sampled_from(["CONSUME_FROM_LAST_OFFSET", 4, 99]),
            "subscriptionDataSet": st.lists(subscription, max_size=3),
        },
    )
    body = st.fixed_dictionaries(
        {"clientID": st.sampled_from(["fuzz-client-1", "fuzz-client-2", "", "c" * 300])},
        optional={
            "producerDataSet": st.lists(
                st.fixed_dictionaries({"groupName": _names_group | _illegal}), max_size=3
            ),
            "consumerDataSet": st.lists(consumer, max_size=3),
        },
    )
    return body.map(orjson.dumps) | st.binary(max_size=32) | st.just(b"[]") | st.just(b'{"clientID": 5}')


def _lock_body() -> st.SearchStrategy[bytes]:
    queue = st.fixed_dictionaries(
        {
            "topic": _names_topic | _illegal,
            "brokerName": st.sampled_from(["broker-a", "b" * 300]),
            "queueId": st.integers(-2, 9) | st.sampled_from([2**31, -(2**63)]),
        }  # fmt: skip
    )
    body = st.fixed_dictionaries(
        {
            "consumerGroup": _names_group | _illegal,
            "clientId": st.sampled_from(["fuzz-client-1", ""]),
            "mqSet": st.lists(queue, max_size=4),
        }  # fmt: skip
    )
    return body.map(orjson.dumps) | st.binary(max_size=32) | st.just(b'{"mqSet": 3}')


def _register_body() -> st.SearchStrategy[bytes]:
    topic = st.fixed_dictionaries(
        {
            "topicName": _names_topic | _illegal,
            "readQueueNums": st.sampled_from([1, 4, 0, 5000, -1]),
            "writeQueueNums": st.sampled_from([1, 4, 2**40]),
            "perm": st.sampled_from([6, 7, 99]),
            "topicFilterType": st.sampled_from(["SINGLE_TAG", "OTHER"]),
        }  # fmt: skip
    )
    table = st.lists(topic, max_size=4).map(lambda topics: {t["topicName"]: t for t in topics})
    wrapper = table.map(
        lambda t: {
            "topicConfigSerializeWrapper": {
                "topicConfigTable": t,
                "dataVersion": {"timestamp": 1, "counter": 2},
            },
            "filterServerList": [],
        }  # fmt: skip
    )
    compressed = st.binary(max_size=64).map(lambda raw: zlib.compress(raw))
    return wrapper.map(orjson.dumps) | compressed | st.binary(max_size=48)


def _send_body() -> st.SearchStrategy[bytes]:
    batch_item = st.tuples(st.integers(0, 3), st.binary(max_size=24), st.dictionaries(
        st.sampled_from(["UNIQ_KEY", "KEYS", "DELAY", "TRAN_MSG", "TIMER_DELAY_MS", "WAIT"]),
        st.sampled_from(["1", "true", "x", "3"]), max_size=2))  # fmt: skip
    return st.one_of(
        st.binary(max_size=48),
        st.binary(max_size=48),
        st.lists(batch_item, min_size=1, max_size=4).map(encode_batch),
        st.binary(min_size=1, max_size=64).map(lambda raw: zlib.compress(raw)),
    )


def _group_config_body() -> st.SearchStrategy[bytes]:
    config = st.fixed_dictionaries(
        {"groupName": _names_group | _illegal},
        optional={
            "retryQueueNums": st.sampled_from([1, 0, -1, 5000, "x"]),
            "retryMaxTimes": st.sampled_from([16, 0, -1, 2**40]),
            "consumeEnable": st.booleans(),
            "consumeMessageOrderly": st.booleans(),
        },
    )
    return config.map(orjson.dumps) | st.binary(max_size=32) | st.just(b"[]")


_BODIES: dict[int, st.SearchStrategy[bytes]] = {
    RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: _group_config_body(),
    RequestCode.HEART_BEAT: _heartbeat_body(),
    RequestCode.LOCK_BATCH_MQ: _lock_body(),
    RequestCode.UNLOCK_BATCH_MQ: _lock_body(),
    RequestCode.REGISTER_BROKER: _register_body(),
    RequestCode.QUERY_DATA_VERSION: st.sampled_from([b'{"timestamp": 1, "counter": 1}', b"{", b"[]", b""]),
    RequestCode.SEND_MESSAGE: _send_body(),
    RequestCode.SEND_MESSAGE_V2: _send_body(),
    RequestCode.SEND_BATCH_MESSAGE: _send_body(),
    RequestCode.SEND_REPLY_MESSAGE: _send_body(),
    RequestCode.SEND_REPLY_MESSAGE_V2: _send_body(),
}
_DEFAULT_BODY = st.just(b"") | st.binary(max_size=16)
_V2_NAMES = {long_name: letter for letter, long_name in h.SEND_V2_WIRE_NAMES.items()}


def _request(target: int, code: int, header: type[Any] | None) -> st.SearchStrategy[tuple[int, bytes]]:
    # Built once per code: a strategy built inside the draw would be validated at every draw.
    ext_strategy = _ext(header)
    body_strategy = _BODIES.get(code, _DEFAULT_BODY)

    def build(draw: st.DrawFn) -> tuple[int, bytes]:
        ext = draw(ext_strategy)
        if code in (
            RequestCode.SEND_MESSAGE_V2,
            RequestCode.SEND_BATCH_MESSAGE,
            RequestCode.SEND_REPLY_MESSAGE_V2,
        ):
            ext = {_V2_NAMES.get(key, key): value for key, value in ext.items()}
        command = RemotingCommand(
            code=code,
            opaque=draw(st.integers(0, 2**31 - 1)),
            flag=draw(st.sampled_from([0, 0, 0, 0, FLAG_ONEWAY])),
            remark=draw(st.none() | _small_text),
            ext_fields=ext,
            body=draw(body_strategy),
            language=draw(st.sampled_from(["JAVA", "CPP", "PYTHON", "GO"])),
            version=draw(st.sampled_from([63, 409, 0, -1])),
            serialize_type=draw(
                st.sampled_from([SerializeType.JSON, SerializeType.JSON, SerializeType.ROCKETMQ])
            ),
        )
        if not -(2**15) <= code < 2**15:
            # The binary layout keeps the code in a short: POP's 2000xx codes travel as JSON.
            command.serialize_type = SerializeType.JSON
        return target, command.encode()

    return st.composite(lambda draw: build(draw))()


def _raw_json_header() -> st.SearchStrategy[tuple[int, bytes]]:
    """Headers the command encoder refuses to make: wrong types where numbers belong, nested ext values."""
    value = st.one_of(
        st.integers(-(2**70), 2**70), st.floats(allow_nan=False), st.text(max_size=8), st.none(), st.booleans(),
        st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    )  # fmt: skip
    header = st.fixed_dictionaries(
        {"code": st.sampled_from([10, 11, 34, 105, 106, 9999]) | value},
        optional={"opaque": value, "flag": value, "version": value, "language": value, "remark": value,
                  "extFields": st.dictionaries(st.sampled_from(["topic", "queueId", "x"]), value, max_size=3) | value},
    )  # fmt: skip

    def frame(pair: tuple[dict[str, Any], int]) -> tuple[int, bytes]:
        raw, target = pair
        try:
            encoded = orjson.dumps(raw)
        except TypeError:  # an integer beyond 64 bits: write it by hand
            encoded = (
                repr(raw)
                .replace("'", '"')
                .replace("None", "null")
                .replace("True", "true")
                .replace("False", "false")
                .encode()
            )
        return target, struct.pack(">ii", 4 + len(encoded), len(encoded)) + encoded

    return st.tuples(header, st.sampled_from([BROKER, NAMESRV])).map(frame)


def _strategies() -> list[st.SearchStrategy[tuple[int, bytes]]]:
    """One strategy per request code of each server, plus the frames no server should get."""
    options = [_request(BROKER, code, header) for code, header in BROKER_REQUESTS.items()]
    options += [_request(NAMESRV, code, header) for code, header in NAMESRV_REQUESTS.items()]
    # Codes to the wrong server, and codes nobody serves.
    options += [_request(NAMESRV, RequestCode.PULL_MESSAGE, h.PullMessageRequestHeader)]
    options += [_request(BROKER, RequestCode.REGISTER_BROKER, h.RegisterBrokerRequestHeader)]
    options += [_request(BROKER, 9999, None), _raw_json_header()]
    return options


def corpus(count: int, seed_value: int) -> list[tuple[int, bytes]]:
    """About ``count`` frames drawn by Hypothesis, reproducibly for ``seed_value``.

    Each request code gets its share of the draws (its own Hypothesis run), so every code is
    in even a small corpus.
    """
    drawn: list[tuple[int, bytes]] = []
    options = _strategies()
    share = max(count // len(options), 1)
    for index, strategy in enumerate(options):

        @seed(seed_value + index)
        @settings(
            max_examples=share,
            database=None,
            deadline=None,
            phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @given(strategy)
        def collect(example: tuple[int, bytes]) -> None:
            drawn.append(example)

        collect()
    # Interleaved, so that a prefix of the corpus already mixes every code.
    random.Random(seed_value).shuffle(drawn)
    return drawn


# -- expansion by mutation -------------------------------------------------------------------------


def _frame_of(target: int, data: bytes, max_frame_bytes: int) -> Frame:
    length = struct.unpack_from(">i", data)[0] if len(data) >= 4 else -1
    closes = not 4 <= length <= max_frame_bytes or length != len(data) - 4
    code = -1
    if not closes:
        try:
            code = decode_command(data[4:]).code
        except Exception:
            closes = True
    return Frame(target, code, data, closes)


def _mutate_field(data: bytes, rng: random.Random, huge: bool = False) -> bytes | None:
    """Re-encode a decodable frame with one ext field set to a boundary or garbage value."""
    try:
        command = decode_command(data[4:])
    except Exception:
        return None
    pool = [str(rng.choice(_BOUNDARY_INTS)), rng.choice(_GARBAGE_TEXT), rng.choice(_ILLEGAL_NAMES)]
    if huge:
        pool = [rng.choice("Zx9") * rng.choice(_HUGE_SIZES)]
    key = rng.choice(list(command.ext_fields) or ["topic"])
    if not huge and rng.random() < 0.2:
        command.ext_fields.pop(key, None)
    else:
        command.ext_fields[key] = rng.choice(pool)
    command.opaque = rng.randrange(2**31)
    try:
        return command.encode()
    except Exception:
        return None


def _mutate_bytes(data: bytes, rng: random.Random) -> bytes:
    kind = rng.randrange(6)
    if kind == 0 and len(data) > 8:  # flip bytes anywhere after the length
        mutable = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            mutable[rng.randrange(4, len(mutable))] = rng.randrange(256)
        return bytes(mutable)
    if kind == 1 and len(data) > 9:  # truncate, keep the length field honest
        cut = rng.randrange(8, len(data))
        return struct.pack(">i", cut - 4) + data[4:cut]
    if kind == 2:  # lengths no server may allocate
        return (
            struct.pack(">i", rng.choice([0x7FFFFFFF, -0x80000000, -1, 0, 3, MAX_FRAME_BYTES + 1]))
            + data[4:64]
        )
    if kind == 3 and len(data) >= 8:  # header length past the frame
        return data[:4] + struct.pack(">i", (data[4] << 24) | rng.choice([0xFFFFFF, len(data)])) + data[8:]
    if kind == 4:  # serialization type nobody speaks
        return data[:4] + bytes([rng.choice([2, 7, 255])]) + data[5:]
    # Appended garbage inside the declared length: a longer body.
    extra = rng.randbytes(rng.randint(1, 16))
    return struct.pack(">i", len(data) - 4 + len(extra)) + data[4:] + extra


def frames(
    base: list[tuple[int, bytes]], count: int, seed_value: int, max_frame_bytes: int = MAX_FRAME_BYTES
) -> Iterator[Frame]:
    """``count`` frames: the corpus itself first, then seeded mutations of it."""
    rng = random.Random(seed_value)
    produced = 0
    for target, data in base[:count]:
        yield _frame_of(target, data, max_frame_bytes)
        produced += 1
    while produced < count:
        target, data = rng.choice(base)
        roll = rng.random()
        if produced % HUGE_EVERY == 0:
            mutated = _mutate_field(data, rng, huge=True)
            data = mutated if mutated is not None else data
        elif roll < 0.45:
            mutated = _mutate_field(data, rng)
            data = mutated if mutated is not None else data
        elif roll < 0.5:
            data = _mutate_bytes(data, rng)
        elif roll < 0.55:
            target = 1 - target  # the other server's codes
        yield _frame_of(target, data, max_frame_bytes)
        produced += 1
