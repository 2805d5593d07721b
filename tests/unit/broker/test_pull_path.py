"""The pull path's common case: what one PULL_MESSAGE costs the broker, counted, not timed.

Real clients at their defaults pull 32 messages a request, so the broker's work per pull is
what their rate depends on. Method: an in-process BrokerApp whose store holds a batch (records
next to each other in the commit log) and interleaved singles; its PULL_MESSAGE handler is run
to completion directly (a pull that finds messages never waits), under an opcode counter
(``tests/support/calls.py``): the number of bytecode instructions is the same on a loaded
machine and an idle one. Beside the counts: the shortcuts answer exactly what the general
code answers (the header table against ``from_ext``, the answer's template against the
generic encoder).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import pytest_asyncio

from orbitmq.broker.clients import ClientChannel, GroupSubscription
from orbitmq.broker.handlers.pull import PullHandlers
from orbitmq.broker.handlers.pull_answer import PullAnswer
from orbitmq.errors import BadRequestError
from orbitmq.model.route import TopicConfig
from orbitmq.protocol.codes import FLAG_RESPONSE, RequestCode, ResponseCode, SerializeType
from orbitmq.protocol.command import RemotingCommand, decode_command
from orbitmq.protocol.headers import PullMessageRequestHeader
from orbitmq.store.results import PutMessageRequest, PutStatus
from orbitmq.transport.server import ReadyAnswer, RequestContext
from tests.support.calls import python_calls, python_opcodes
from tests.unit.broker._apps import start_broker_app

pytestmark = pytest.mark.asyncio(loop_scope="module")

TOPIC = "PullPath"
BATCH = 64  # messages of queue 0, sent as one batch: one run of adjacent records
GO_GROUP = "CG_GO_PULL_PATH"


class _Connection:
    id = 1


_CONTEXT = RequestContext(_Connection(), "127.0.0.1", 1, "127.0.0.1", 2)  # type: ignore[arg-type]


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def broker(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[PullHandlers]:
    app = await start_broker_app(tmp_path_factory.mktemp("pull-path"))
    try:
        state = app.state
        state.topics.put(TopicConfig(TOPIC, 2, 2))
        batch = [PutMessageRequest(TOPIC, 0, b"b" * 100, properties={"TAGS": "a"}) for _ in range(BATCH)]
        assert state.store.put_messages(batch).status is PutStatus.PUT_OK
        for index in range(2 * BATCH):  # singles alternating between queues 1 and 0
            single = PutMessageRequest(TOPIC, 1 - index % 2, b"s" * 100, properties={"TAGS": "a"})
            assert state.store.put_message(single).status is PutStatus.PUT_OK
        yield PullHandlers(state)
    finally:
        await app.shutdown()


def _pull_frame(queue_id: int, queue_offset: int, max_msg_nums: int, **ext: str) -> bytes:
    """A pull as the C++ push consumer sends it: commit offset, suspend and subscription bits."""
    fields = {
        "consumerGroup": "CG_PULL_PATH",
        "topic": TOPIC,
        "queueId": str(queue_id),
        "queueOffset": str(queue_offset),
        "maxMsgNums": str(max_msg_nums),
        "sysFlag": "7",
        "commitOffset": str(queue_offset),
        "suspendTimeoutMillis": "15000",
        "subVersion": "1795915732657",
        "subscription": "*",
        **ext,
    }
    request = RemotingCommand.request(RequestCode.PULL_MESSAGE, fields)
    request.opaque = 7
    return request.encode()[4:]


def _answer(handlers: PullHandlers, request: RemotingCommand) -> RemotingCommand:
    """Run the broker's PULL_MESSAGE handler on ``request`` to its answer (it must not wait)."""
    outcome = handlers.pull_message(_CONTEXT, request)
    if not isinstance(outcome, ReadyAnswer):
        raise AssertionError("a pull with messages to read waited")
    assert outcome.response is not None
    return outcome.response


def _work(handlers: PullHandlers, frame: bytes, count: Callable[[Callable[[], object]], int]) -> int:
    """``count`` of one pull (the request decoded beforehand): its handler and its answer's header."""
    request = decode_command(frame)

    def pull() -> None:
        answer = _answer(handlers, request)
        answer.encode_header(len(answer.body))

    pull()  # caches and lazily opened files are the first pull's, not every pull's
    return count(pull)


async def test_pull_work_does_not_grow_with_the_messages_per_pull(broker: PullHandlers) -> None:
    one = _work(broker, _pull_frame(0, 0, 1), python_opcodes)
    thirty_two = _work(broker, _pull_frame(0, 0, 32), python_opcodes)
    assert len(_answer(broker, decode_command(_pull_frame(0, 0, 32))).body) > 32 * 100
    # Checking the 31 more entries must not cost a loop turn each (about 80 opcodes apiece).
    assert thirty_two - one < 100, (one, thirty_two)
    # Records that are not neighbours in the commit log (queue 1's singles) cost a few
    # opcodes per record, not a loop turn of checks each.
    interleaved = _work(broker, _pull_frame(1, 0, 32), python_opcodes)
    assert interleaved - one < 32 * 25, (one, interleaved)


async def test_pull_python_calls_per_pull(broker: PullHandlers) -> None:
    # A repeat pull's header is checked once per request shape, and the answer's header is a
    # template: no call per field either way.
    calls = _work(broker, _pull_frame(0, 32, 32), python_calls)
    assert calls <= 60, calls  # 73 before the header table and the answer template


async def test_pull_answers_as_the_general_read(broker: PullHandlers) -> None:
    store = broker._state.store
    for queue_id, queue_offset, max_msg_nums in ((0, 0, 32), (0, 40, 32), (1, 3, 32), (0, 60, 32)):
        answer = _answer(broker, decode_command(_pull_frame(queue_id, queue_offset, max_msg_nums)))
        reference = store.get_messages(TOPIC, queue_id, queue_offset, max_msg_nums)
        assert answer.code == ResponseCode.SUCCESS
        assert answer.body == reference.body()
        assert answer.ext_fields["nextBeginOffset"] == str(reference.next_begin_offset)
        assert decode_command(answer.encode()[4:]).ext_fields == answer.ext_fields


_EXT_VARIANTS: list[dict[str, Any]] = [
    {},
    {"queueOffset": "-1"},
    {"queueOffset": " 12"},
    {"queueOffset": "+12"},
    {"queueOffset": "1_2"},
    {"queueOffset": "１２"},  # full-width digits: isdigit(), but not Java's parseLong
    {"queueOffset": ""},
    {"queueOffset": "9" * 19},
    {"queueOffset": "9" * 25},
    {"commitOffset": ""},
    {"commitOffset": "-5"},
    {"commitOffset": None},
    {"queueOffset": None},
    {"maxMsgNums": "x"},
    {"topic": "bad topic"},
]


def _outcome(parse: Callable[[dict[str, str]], PullMessageRequestHeader], ext: dict[str, str]) -> object:
    try:
        return parse(ext)
    except BadRequestError as exc:
        return (exc.code, exc.field, exc.remark)


@pytest.mark.parametrize("variant", _EXT_VARIANTS)
async def test_pull_header_shapes_parse_like_from_ext(broker: PullHandlers, variant: dict[str, Any]) -> None:
    handlers = PullHandlers(broker._state)
    base = decode_command(_pull_frame(0, 5, 32)).ext_fields
    ext = {key: value for key, value in {**base, **variant}.items() if value is not None}
    # Once with the shape unknown, once with it known from a pull with other offsets.
    assert _outcome(handlers._header, ext) == _outcome(PullMessageRequestHeader.from_ext, ext)
    _outcome(handlers._header, {**ext, "queueOffset": "3", "commitOffset": "4"})
    assert _outcome(handlers._header, ext) == _outcome(PullMessageRequestHeader.from_ext, ext)


@pytest.mark.parametrize("serialize_type", list(SerializeType))
@pytest.mark.parametrize("remark", [None, "a remark"])
async def test_pull_answer_header_is_the_generic_encoders_bytes(
    serialize_type: SerializeType, remark: str | None
) -> None:
    for numbers in ((0, 0, 0, 0, 0), (123456789012, 7, 1 << 62, 1, 3), (32, 0, 64, 0, 0)):
        next_begin, low, high, broker_id, sys_flag = numbers
        fields = {
            "code": int(ResponseCode.SUCCESS),
            "opaque": 0x7FFFFFFF,
            "flag": FLAG_RESPONSE,
            "remark": remark,
            "ext_fields": {
                "nextBeginOffset": str(next_begin),
                "minOffset": str(low),
                "maxOffset": str(high),
                "suggestWhichBrokerId": str(broker_id),
                "topicSysFlag": str(sys_flag),
                "groupSysFlag": "0",
            },
            "body": b"x" * 300,
            "language": "JAVA",
            "serialize_type": serialize_type,
        }
        answer, generic = PullAnswer(**fields), RemotingCommand(**fields)
        assert answer.encode_header() == generic.encode_header()
        assert answer.encode_header(5) == generic.encode_header(5)
        assert answer.encode() == generic.encode()


def _go_pull_frame(queue_id: int, queue_offset: int, max_msg_nums: int) -> bytes:
    """A pull as Apache's Go push consumer (rocketmq-client-go/v2) sends it at its defaults:
    commit offset and suspend bits but no subscription (the broker takes the group's from its
    heartbeat), an empty ``subscription``, ``subVersion`` 0, the broker's name, language GO."""
    fields = {
        "consumerGroup": GO_GROUP,
        "topic": TOPIC,
        "queueId": str(queue_id),
        "queueOffset": str(queue_offset),
        "maxMsgNums": str(max_msg_nums),
        "sysFlag": "3",
        "commitOffset": str(queue_offset),
        "suspendTimeoutMillis": "20000",
        "subscription": "",
        "subVersion": "0",
        "expressionType": "TAG",
        "bname": "broker-a",
    }
    request = RemotingCommand.request(RequestCode.PULL_MESSAGE, fields)
    request.opaque = 7
    request.language = "GO"
    return request.encode()[4:]


async def test_pull_go_client_shape_costs_what_a_cpp_pull_costs(broker: PullHandlers) -> None:
    # The Go client's pulls rely on the subscription its heartbeat registered.
    subscription = GroupSubscription.parse(TOPIC, "*")
    broker._state.consumers.register(
        GO_GROUP, ClientChannel(1, "go-client", "GO", 317, 0, None), [subscription]
    )
    answer = _answer(broker, decode_command(_go_pull_frame(0, 32, 32)))
    assert answer.code == ResponseCode.SUCCESS
    assert answer.body == broker._state.store.get_messages(TOPIC, 0, 32, 32).body()
    # Its header is checked once per shape and its answer written from the template, as a C++
    # pull's (see test_pull_python_calls_per_pull); the heartbeat's subscription costs a lookup.
    go = _work(broker, _go_pull_frame(0, 32, 32), python_calls)
    cpp = _work(broker, _pull_frame(0, 32, 32), python_calls)
    assert go <= 60 and go <= cpp + 2, (go, cpp)
