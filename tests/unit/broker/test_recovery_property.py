"""Property: every record the broker accepts passes recovery's own check, and restarts keep it.

Method: an in-process broker (its send handler driven directly, so the born host can be any
IPv4 or IPv6 address and the store host either form). Hypothesis draws sends over every field
of the send header (ranges, boundaries, the V1, V2 and batch layouts), property sets (tags,
keys, delay levels, timer times, transaction markers, arbitrary keys and values) and sysFlag
bit combinations (compression, transaction types, the IPv6 host bits a client should not set).
For every send answered SUCCESS, each record its msgId names must pass ``check_record`` (the
test recovery applies to every record it walks) with its full length. Then the broker stops
cleanly and starts again, and a copy of the store taken while it runs (a crash: the page cache
survives, nothing else runs) is opened: every accepted record reads back byte for byte from both.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orbitmq.broker.app import BrokerApp
from orbitmq.broker.handlers.send import SendHandlers
from orbitmq.errors import BadRequestError, BrokerResponseError
from orbitmq.model.message import SysFlag
from orbitmq.protocol.batch import encode_batch
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.headers import SEND_V2_WIRE_NAMES, SendMessageRequestHeader
from orbitmq.protocol.message_id import decode_offset_msg_id
from orbitmq.protocol.properties import encode_properties
from orbitmq.store.commit_log import RecordCheck, check_record
from orbitmq.store.config import StoreConfig
from orbitmq.store.message_store import MessageStore
from orbitmq.transport.server import RequestContext
from tests.support.crash_copy import copy_as_crashed
from tests.unit.broker._apps import start_broker_app

_HOSTS = ["127.0.0.1", "10.1.2.3", "::1", "2001:db8::7", "::ffff:192.0.2.1", "fe80::1"]
_STORE_HOSTS = ["127.0.0.1", "2001:db8::1"]
_BOUNDARIES = st.sampled_from([2**31 - 1, 2**31, -(2**31), -(2**31) - 1, 2**63 - 1, -(2**63)])
_INT32 = st.integers(-(2**31), 2**31 - 1)
_SYS_FLAGS = st.builds(
    lambda compressed, tx, born6, store6, extra: compressed | tx | born6 | store6 | extra,
    st.sampled_from([0, SysFlag.COMPRESSED]),
    st.sampled_from([0, 0x4, 0x8, 0xC]),
    st.sampled_from([0, SysFlag.BORNHOST_V6]),
    st.sampled_from([0, SysFlag.STOREHOST_V6]),
    st.sampled_from([0, 0x2, 0x40, 0x80, 0x100, 0x300, 2**30]),
)
_PROPERTY_VALUES = st.one_of(
    st.sampled_from(["1", "3", "18", "99", "0", "true", "false", "TagA", "k1 k2", "²", str(2**63)]),
    st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), max_size=12),
)
_PROPERTIES = st.dictionaries(
    st.sampled_from(
        [
            "TAGS",
            "KEYS",
            "UNIQ_KEY",
            "DELAY",
            "TRAN_MSG",
            "PGROUP",
            "TIMER_DELAY_MS",
            "TIMER_DELIVER_MS",
            "__STARTDELIVERTIME",
            "WAIT",
            "MAX_RECONSUME_TIMES",
            "CUSTOM",
            "é",
        ]  # fmt: skip
    ),
    _PROPERTY_VALUES,
    max_size=6,
)


@st.composite
def _send(draw: st.DrawFn) -> tuple[RemotingCommand, str]:
    code = draw(
        st.sampled_from(
            [RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE]
        )
    )
    batch = code == RequestCode.SEND_BATCH_MESSAGE or draw(st.booleans())
    header = SendMessageRequestHeader(
        producer_group="PG_PROPERTY",
        topic=draw(st.sampled_from(["PropTopicA", "PropTopicB"] + ([] if batch else ["%RETRY%PropGroup"]))),
        queue_id=draw(st.sampled_from([-1, 0, 0, 1, 7])),
        default_topic_queue_nums=8,
        sys_flag=draw(_SYS_FLAGS),
        born_timestamp=draw(st.integers(-(2**63), 2**63 - 1)),
        flag=draw(_INT32),
        properties=encode_properties(draw(_PROPERTIES)),
        reconsume_times=draw(st.integers(0, 40)),
        max_reconsume_times=draw(st.none() | st.integers(-1, 20)),
        batch=batch,
    )
    ext = header.to_ext()
    # Out-of-range values go in as text, past what the typed header could hold.
    for key in draw(
        st.sampled_from([(), (), (), ("flag",), ("sysFlag",), ("reconsumeTimes",), ("queueId",)])
    ):
        ext[key] = str(draw(_BOUNDARIES))
    if code != RequestCode.SEND_MESSAGE:
        letters = {long_name: letter for letter, long_name in SEND_V2_WIRE_NAMES.items()}
        ext = {letters.get(key, key): value for key, value in ext.items()}
    if batch:
        items = draw(st.lists(st.tuples(_INT32, st.binary(max_size=64), _PROPERTIES), min_size=1, max_size=4))
        try:
            body = encode_batch(items)
        except Exception:  # a flag the batch layout cannot carry: the client would not send it
            body = encode_batch([(0, b"b", {})])
    else:
        body = draw(st.binary(max_size=256))
    return RemotingCommand.request(code, ext, body), draw(st.sampled_from(_HOSTS))


def _record_ok(record: bytes, offset: int) -> bool:
    found, size, _ = check_record(record, 0, offset, len(record), verify_crc=True)
    return found is RecordCheck.MESSAGE and size == len(record)


def test_recovery_keeps_every_record_the_broker_accepts(tmp_path: Path) -> None:
    loop = asyncio.new_event_loop()
    app: BrokerApp = loop.run_until_complete(start_broker_app(tmp_path, timerWheelEnable="true"))
    accepted: dict[int, bytes] = {}
    refused_codes: set[int] = set()
    try:
        send = SendHandlers(app.state)

        @settings(max_examples=300, deadline=None, database=None, suppress_health_check=list(HealthCheck))
        @given(_send(), st.sampled_from(_STORE_HOSTS))
        def put(case: tuple[RemotingCommand, str], store_host: str) -> None:
            request, peer_host = case
            app.state.store_host = (store_host, app.port)
            ctx = RequestContext(None, peer_host, 4242, "127.0.0.1", app.port)  # type: ignore[arg-type]
            try:
                response = loop.run_until_complete(send.send_message(ctx, request))
            except (BrokerResponseError, BadRequestError) as exc:  # refused: the transport answers it
                refused_codes.add(exc.code)
                return
            if response.code != ResponseCode.SUCCESS:
                refused_codes.add(response.code)
                return
            for msg_id in response.ext_fields["msgId"].split(","):
                offset = decode_offset_msg_id(msg_id).commit_log_offset
                record = app.state.store.read_message(offset)
                assert record is not None and _record_ok(record, offset), (request.ext_fields, msg_id)
                accepted[offset] = bytes(record)

        put()
        assert len(accepted) >= 50, (len(accepted), refused_codes)
        # A crash: the copy holds what the page cache held, and no clean shutdown ran.
        crashed_root = tmp_path / "crashed"
        copy_as_crashed(app.store_config.store_path_root_dir, crashed_root)
        loop.run_until_complete(app.shutdown())
        restarted = loop.run_until_complete(start_broker_app(tmp_path, timerWheelEnable="true"))
        try:
            for offset, record in accepted.items():
                assert restarted.state.store.read_message(offset) == record, offset
        finally:
            loop.run_until_complete(restarted.shutdown())
        crashed = MessageStore(
            StoreConfig(store_path_root_dir=crashed_root, commit_log_segment_bytes=1 << 20)
        )
        crashed.open()
        try:
            assert crashed.recovery_report is not None and not crashed.recovery_report.clean_shutdown
            for offset, record in accepted.items():
                assert crashed.read_message(offset) == record, offset
        finally:
            crashed.close()
    finally:
        loop.close()
