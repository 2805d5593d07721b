"""Typed command headers: lenient reading of what real clients send, strict string writing.

Method: samples captured from the C++ client (numeric values, "0"/"1" booleans, extra ACL
fields) and Java's V2 one-letter names; Hypothesis round-trips every header class, both
directly and through a whole command in each serialization.
"""

from __future__ import annotations

import dataclasses
import inspect
import struct
import typing
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orbitmq.errors import BadRequestError, RemoteProtocolError
from orbitmq.protocol import headers
from orbitmq.protocol.codes import SerializeType
from orbitmq.protocol.command import RemotingCommand, decode_command
from orbitmq.protocol.frame import FrameDecoder
from orbitmq.protocol.headers import (
    ConsumerSendMsgBackRequestHeader,
    EndTransactionRequestHeader,
    GetRouteInfoRequestHeader,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    QueryConsumerOffsetResponseHeader,
    SendMessageRequestHeader,
    SendMessageResponseHeader,
    UnregisterClientRequestHeader,
)

_settings = settings(max_examples=25, deadline=None)

HEADER_CLASSES = sorted(
    (
        cls
        for name, cls in inspect.getmembers(headers, inspect.isclass)
        if dataclasses.is_dataclass(cls) and name.endswith("Header") and cls.__module__ == headers.__name__
    ),
    key=lambda cls: cls.__name__,
)

CPP_SEND_HEADER = (
    b'{"code":10,"extFields":{"AccessKey":"","OnsChannel":"ALIYUN","Signature":"",'
    b'"batch":"1","bornTimestamp":"1795000000000","defaultTopic":"TBW102","defaultTopicQueueNums":4,'
    b'"flag":0,"producerGroup":"PG1","properties":"WAIT\\u0001true\\u0002","queueId":2,'
    b'"reconsumeTimes":"0","sysFlag":1,"topic":"TopicA","unitMode":"0"},'
    b'"flag":0,"language":"CPP","opaque":5,"remark":"","version":63}\n'
)


def test_headers_module_declares_every_brief_header() -> None:
    assert len(HEADER_CLASSES) >= 35
    names = {cls.__name__ for cls in HEADER_CLASSES}
    assert {"SendMessageRequestHeader", "RegisterBrokerRequestHeader", "GetKVConfigResponseHeader"} <= names


def test_send_message_header_decodes_cpp_request() -> None:
    command = decode_command(struct.pack(">i", len(CPP_SEND_HEADER)) + CPP_SEND_HEADER + b"body")
    header = SendMessageRequestHeader.from_ext(command.ext_fields)
    assert header == SendMessageRequestHeader(
        producer_group="PG1",
        topic="TopicA",
        queue_id=2,
        default_topic="TBW102",
        default_topic_queue_nums=4,
        sys_flag=1,
        born_timestamp=1795000000000,
        flag=0,
        properties="WAIT\x01true\x02",
        reconsume_times=0,
        unit_mode=False,
        max_reconsume_times=None,
        batch=True,
    )


def test_send_message_header_from_v2_ext_maps_letters() -> None:
    ext = {
        "a": "PG",
        "b": "T",
        "c": "TBW102",
        "d": "4",
        "e": "-1",
        "f": "0",
        "g": "17",
        "h": "3",
        "i": "KEYS\x01k",
        "j": "1",
        "k": "false",
        "l": "16",
        "m": "true",
        "n": "broker-a",
    }
    header = SendMessageRequestHeader.from_v2_ext(ext)
    assert (header.producer_group, header.topic, header.queue_id, header.born_timestamp) == (
        "PG",
        "T",
        -1,
        17,
    )
    assert (header.flag, header.reconsume_times, header.max_reconsume_times) == (3, 1, 16)
    assert header.batch and not header.unit_mode
    assert header.broker_name == "broker-a"
    assert header.to_v2_ext() == ext


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("topic", "bad/topic"),
        ("producerGroup", ""),
        ("queueId", "2147483648"),
        ("queueId", "\uff11"),  # a full-width digit: Java's parseInt refuses it
        ("queueId", "1_0"),
        ("sysFlag", "x"),
        ("properties", "k\x01" + "v" * 40_000),
    ],
)
def test_send_message_header_v2_refuses_as_v1(field: str, value: str) -> None:
    """SEND_MESSAGE_V2's letters are read in place, refused with the same code, remark and field."""
    v1 = {"producerGroup": "PG", "topic": "T", "queueId": "1", field: value}
    v2 = {headers._SEND_V1_TO_V2[key]: text for key, text in v1.items()}
    with pytest.raises(BadRequestError) as v1_refusal:
        SendMessageRequestHeader.from_ext(v1)
    with pytest.raises(BadRequestError) as v2_refusal:
        SendMessageRequestHeader.from_v2_ext(v2)
    assert (v2_refusal.value.code, v2_refusal.value.remark, v2_refusal.value.field) == (
        v1_refusal.value.code,
        v1_refusal.value.remark,
        v1_refusal.value.field,
    )


def test_send_message_header_v2_with_a_v1_name_reads_either() -> None:
    """An ext mixing letters with a V1 name reads the V1 name as the field it names."""
    header = SendMessageRequestHeader.from_v2_ext({"a": "PG", "topic": "T", "e": "+2", "g": " 17 "})
    assert (header.producer_group, header.topic, header.queue_id, header.born_timestamp) == ("PG", "T", 2, 17)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("true", True),
        ("TRUE", True),
        ("1", True),
        (" True ", True),
        ("false", False),
        ("0", False),
        ("", False),
    ],
)
def test_header_booleans_accept_client_spellings(text: str, expected: bool) -> None:
    ext = {"producerGroup": "PG", "topic": "T", "queueId": "0", "batch": text}
    assert SendMessageRequestHeader.from_ext(ext).batch is expected


def test_header_unrecognised_boolean_names_field() -> None:
    with pytest.raises(RemoteProtocolError, match="'batch'"):
        SendMessageRequestHeader.from_ext(
            {"producerGroup": "PG", "topic": "T", "queueId": "0", "batch": "yes"}
        )


def test_header_missing_required_field_names_it() -> None:
    with pytest.raises(RemoteProtocolError, match="PullMessageRequestHeader.*'queueOffset'"):
        PullMessageRequestHeader.from_ext({"consumerGroup": "G", "topic": "T", "queueId": "0"})


@pytest.mark.parametrize("text", ["x", "1.5", "12.0", "1_000", "٣", "9223372036854775808", "0x10"])
def test_header_unparsable_number_names_field(text: str) -> None:
    with pytest.raises(RemoteProtocolError, match="'queueId'"):
        PullMessageRequestHeader.from_ext(
            {"consumerGroup": "G", "topic": "T", "queueId": text, "queueOffset": "0"}
        )


def test_header_empty_optional_number_takes_default() -> None:
    header = ConsumerSendMsgBackRequestHeader.from_ext(
        {"group": "CG1", "offset": "523", "delayLevel": "", "maxReconsumeTimes": ""}
    )
    assert (header.commit_log_offset, header.delay_level, header.max_reconsume_times) == (523, 0, None)


def test_header_cpp_send_back_uses_offset_wire_name() -> None:
    header = ConsumerSendMsgBackRequestHeader.from_ext({"delayLevel": "0", "group": "CG1", "offset": "523"})
    assert header.commit_log_offset == 523
    assert header.to_ext() == {"offset": "523", "group": "CG1", "delayLevel": "0", "unitMode": "false"}


def test_header_unknown_ext_fields_are_ignored() -> None:
    ext = {"topic": "TopicA", "AccessKey": "", "OnsChannel": "ALIYUN", "Signature": "x"}
    assert GetRouteInfoRequestHeader.from_ext(ext) == GetRouteInfoRequestHeader(topic="TopicA")


def test_header_to_ext_writes_strings_and_omits_none() -> None:
    response = SendMessageResponseHeader(
        msg_id="7F00000100002A9F0000000000000000", queue_id=1, queue_offset=12
    )
    assert response.to_ext() == {
        "msgId": "7F00000100002A9F0000000000000000",
        "queueId": "1",
        "queueOffset": "12",
    }
    pull = PullMessageResponseHeader(next_begin_offset=5, min_offset=0, max_offset=9)
    assert pull.to_ext() == {
        "nextBeginOffset": "5",
        "minOffset": "0",
        "maxOffset": "9",
        "suggestWhichBrokerId": "0",
    }
    assert QueryConsumerOffsetResponseHeader(queue_offset=3).to_ext() == {"offset": "3"}


def test_header_special_wire_names() -> None:
    assert UnregisterClientRequestHeader(client_id="1-127.0.0.1@DEFAULT").to_ext() == {
        "clientID": "1-127.0.0.1@DEFAULT"
    }
    assert set(SendMessageResponseHeader("m", 0, 0, msg_region="R", trace_on="true").to_ext()) >= {
        "MSG_REGION",
        "TRACE_ON",
    }


def test_end_transaction_header_reads_cpp_from_transaction_check() -> None:
    ext = {
        "producerGroup": "PG",
        "tranStateTableOffset": "3",
        "commitLogOffset": "1024",
        "commitOrRollback": "8",
        "fromTransactionCheck": "1",
        "msgId": "ID",
    }
    header = EndTransactionRequestHeader.from_ext(ext)
    assert header.from_transaction_check is True
    assert (header.commit_log_offset, header.commit_or_rollback) == (1024, 8)


_long = st.integers(min_value=-(2**63), max_value=2**63 - 1)
_name = st.from_regex(r"[%|a-zA-Z0-9_-]{1,40}", fullmatch=True)


def _value_strategy(spec: headers.FieldSpec) -> st.SearchStrategy[Any]:
    """Values that satisfy the field's declared rule (the round trip is about legal headers)."""
    rule = spec.rule
    if spec.base is bool:
        return st.booleans()
    if spec.base is int:
        if rule is not None and rule.choices is not None:
            return st.sampled_from(rule.choices)
        low = rule.low if rule is not None and rule.low is not None else -(2**63)
        high = rule.high if rule is not None and rule.high is not None else 2**63 - 1
        return st.integers(min_value=low, max_value=high)
    if rule is not None and rule.choices is not None:
        return st.sampled_from(rule.choices)
    if rule is not None and rule.name is not None:
        return (_name | st.just("")) if rule.allow_empty else _name
    return st.text(max_size=16)


def _header_strategy(cls: type) -> st.SearchStrategy[Any]:
    fields = {}
    for spec in cls.field_specs():  # type: ignore[attr-defined]
        value = _value_strategy(spec)
        fields[spec.attr] = value if spec.required else st.none() | value
    hints = typing.get_type_hints(cls)
    for spec in cls.field_specs():  # type: ignore[attr-defined]
        if spec.required or type(None) in typing.get_args(hints[spec.attr]):
            continue
        fields[spec.attr] = _value_strategy(spec)  # not Optional: the default, never None
    return st.builds(cls, **fields)


@pytest.mark.parametrize("cls", HEADER_CLASSES, ids=lambda cls: cls.__name__)
@_settings
@given(data=st.data())
def test_header_roundtrips_through_ext(cls: type, data: st.DataObject) -> None:
    header = data.draw(_header_strategy(cls))
    ext = header.to_ext()
    assert all(isinstance(value, str) for value in ext.values())
    assert cls.from_ext(ext) == header  # type: ignore[attr-defined]


@_settings
@given(
    header=st.sampled_from(HEADER_CLASSES).flatmap(_header_strategy),
    serialize_type=st.sampled_from(list(SerializeType)),
)
def test_header_roundtrips_through_command(header: Any, serialize_type: SerializeType) -> None:
    command = RemotingCommand(code=10, ext_fields=header.to_ext(), serialize_type=serialize_type)
    (frame,) = FrameDecoder().feed(command.encode())
    assert type(header).from_ext(decode_command(frame).ext_fields) == header


@_settings
@given(
    ext=st.dictionaries(
        st.sampled_from(["consumerGroup", "topic", "queueId", "queueOffset", "sysFlag"]), st.text()
    )
)
def test_header_arbitrary_ext_raises_only_remote_protocol_error(ext: dict[str, str]) -> None:
    try:
        header = PullMessageRequestHeader.from_ext(ext)
    except RemoteProtocolError:
        return
    assert header.topic == ext["topic"]
