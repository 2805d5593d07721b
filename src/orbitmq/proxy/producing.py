"""SendMessage, EndTransaction, RecallMessage and the broker's transaction checks.

Send: each message is checked (``proxy.validation``; its type against its topic's,
``proxy.topic_types``), mapped onto remoting properties
(``proxy.convert``), given a queue (a FIFO message by its group's hash, so one group always
lands on one queue; others round robin) and sent with SEND_MESSAGE_V2 under producer group =
topic. The entry echoes the client's message id, the queue offset, and:

- for a transactional message, ``transaction_id`` = ``<broker addr> <commit-log offset> <half
  queue offset>``: what END_TRANSACTION needs, so EndTransaction and a server check's answer
  can be relayed without any state in the proxy;
- for a timed message, ``recall_handle`` = RocketMQ's ``v1 <topic> <broker> <due ms> <id>``,
  base64url (RecallMessage cancels the message before it is due).

Orphan recovery: the broker's CHECK_TRANSACTION_STATE reaches the proxy (``proxy.gateway``);
the proxy writes RecoverOrphanedTransactionCommand on a Telemetry stream of the client that
sent the half message, else of any live producer of the topic; the client's answer comes back
as EndTransaction with source SOURCE_SERVER_CHECK. With no live producer the broker asks again
at its next check round.
"""

from __future__ import annotations

import gzip
import logging
import zlib

from orbitmq.broker.validation import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX
from orbitmq.errors import LocalProtocolError, NoRouteError, RemoteProtocolError, RemotingError
from orbitmq.model.message import MessageConst, MessageExt, SysFlag
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.headers import (
    CheckTransactionStateRequestHeader,
    EndTransactionRequestHeader,
    SendMessageRequestHeader,
    SendMessageResponseHeader,
)
from orbitmq.protocol.message_id import decode_offset_msg_id
from orbitmq.protocol.properties import encode_properties
from orbitmq.protocol.recall import RecallHandle
from orbitmq.proxy._pb import definition_pb2 as pb
from orbitmq.proxy._pb import service_pb2 as spb
from orbitmq.proxy.codes import from_remoting, status
from orbitmq.proxy.convert import SendSpec, resource_name, stored_to_grpc
from orbitmq.proxy.core import CallMeta, ProxyCore
from orbitmq.proxy.gateway import DEFAULT_TOPIC_QUEUE_NUMS
from orbitmq.proxy.topic_types import check_topic_message_type
from orbitmq.proxy.validation import Invalid, check_message, check_topic

__all__ = ["ProducerActivity", "decode_transaction_id", "encode_transaction_id"]

logger = logging.getLogger(__name__)

_RESOLUTIONS = {
    pb.COMMIT: SysFlag.TRANSACTION_COMMIT_TYPE,
    pb.ROLLBACK: SysFlag.TRANSACTION_ROLLBACK_TYPE,
}

_SENT = (pb.OK, pb.MASTER_PERSISTENCE_TIMEOUT, pb.SLAVE_PERSISTENCE_TIMEOUT, pb.HA_NOT_AVAILABLE)
"""Entry codes of a message the broker stored (the last three: stored, not yet replicated/flushed)."""


def encode_transaction_id(broker_addr: str, commit_log_offset: int, queue_offset: int) -> str:
    return f"{broker_addr} {commit_log_offset} {queue_offset}"


def decode_transaction_id(text: str) -> tuple[str, int, int] | None:
    parts = text.split(" ")
    if len(parts) != 3 or not parts[0]:
        return None
    try:
        return parts[0], int(parts[1]), int(parts[2])
    except ValueError:
        return None


class ProducerActivity:
    """The producer RPCs of one proxy."""

    def __init__(self, core: ProxyCore) -> None:
        self._core = core

    async def send_message(self, meta: CallMeta, request: spb.SendMessageRequest) -> spb.SendMessageResponse:
        if not request.messages:
            # Apache's proxy's code for it (its validation reads an empty list as a corrupt request).
            return spb.SendMessageResponse(status=status(pb.MESSAGE_CORRUPTED, "no message to send"))
        entries = [await self._send_one(meta, message) for message in request.messages]
        failed = [entry for entry in entries if entry.status.code not in _SENT]
        if len(failed) == len(entries):
            # As Apache's proxy: a request none of whose messages was sent fails as a whole,
            # with the first refusal's status and no entries.
            return spb.SendMessageResponse(status=failed[0].status)
        codes = {entry.status.code for entry in entries}
        if len(codes) == 1:
            top = entries[0].status
        else:
            top = status(pb.MULTIPLE_RESULTS, "the messages had different outcomes")
        return spb.SendMessageResponse(status=top, entries=entries)

    async def _send_one(self, meta: CallMeta, message: pb.Message) -> spb.SendResultEntry:
        core = self._core
        system = message.system_properties
        invalid = check_message(message, core.config, core.clock_ms())
        if invalid is not None:
            return spb.SendResultEntry(
                status=status(invalid.code, invalid.message), message_id=system.message_id
            )
        try:
            body = _identity_body(message)
        except (OSError, zlib.error, EOFError) as exc:
            return spb.SendResultEntry(
                status=status(pb.MESSAGE_CORRUPTED, f"message body does not decompress: {exc}"),
                message_id=system.message_id,
            )
        spec = SendSpec(message, body)
        if not system.born_host:
            spec.properties[MessageConst.BORN_HOST] = meta.peer_host
        session = core.sessions.get(meta.client_id)
        if session is not None:
            session.topics.add(spec.topic)
        group = system.message_group if system.HasField("message_group") else None
        try:
            refused = await self._check_topic_type(spec)
            if refused is not None:
                return spb.SendResultEntry(
                    status=status(refused.code, refused.message), message_id=system.message_id
                )
            queue = await core.gateway.pick_send_queue(spec.topic, group)
            if queue is None:
                return spb.SendResultEntry(
                    status=status(pb.TOPIC_NOT_FOUND, f"topic {spec.topic} has no writable queue"),
                    message_id=system.message_id,
                )
            try:
                request = _send_request(spec, queue[1])
            except LocalProtocolError as exc:
                # A property value the remoting encoding cannot carry (a separator character).
                return spb.SendResultEntry(
                    status=status(pb.BAD_REQUEST, str(exc)), message_id=system.message_id
                )
            transactional = system.message_type == pb.TRANSACTION
            if transactional:
                await core.gateway.publish_as(spec.topic)
                core.remember_half(system.message_id, meta.client_id)
            response = await core.gateway.invoke(queue[0], request)
        except (NoRouteError, RemotingError) as exc:
            return spb.SendResultEntry(
                status=status(pb.PROXY_TIMEOUT, str(exc)), message_id=system.message_id
            )
        return self._entry(response, spec, system, queue[0], transactional)

    async def _check_topic_type(self, spec: SendSpec) -> Invalid | None:
        """Apache's topic message type check (``proxy.topic_types``), when on."""
        if not self._core.config.enable_topic_message_type_check:
            return None
        if spec.topic.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX)):
            return None
        topic_type = await self._core.gateway.topic_message_type(spec.topic)
        return check_topic_message_type(topic_type, spec.properties)

    def _entry(
        self,
        response: RemotingCommand,
        spec: SendSpec,
        system: pb.SystemProperties,
        broker_name: str,
        transactional: bool,
    ) -> spb.SendResultEntry:
        if response.code not in (ResponseCode.SUCCESS, ResponseCode.FLUSH_DISK_TIMEOUT):
            return spb.SendResultEntry(
                status=status(from_remoting(response.code), response.remark or "send failed"),
                message_id=system.message_id,
            )
        header = SendMessageResponseHeader.from_ext(response.ext_fields)
        entry = spb.SendResultEntry(
            status=status(pb.OK if response.code == ResponseCode.SUCCESS else pb.MASTER_PERSISTENCE_TIMEOUT),
            message_id=system.message_id,
            offset=header.queue_offset,
        )
        if not transactional:
            # RocketMQ's broker answers every send with a transactionId (the message's unique
            # id); Apache's proxy passes it on, and so does this one.
            entry.transaction_id = header.transaction_id or system.message_id
        else:
            try:
                offset_id = decode_offset_msg_id(header.msg_id.split(",")[0])
            except RemoteProtocolError as exc:
                entry.status.CopyFrom(status(pb.INTERNAL_SERVER_ERROR, f"broker answered a bad msgId: {exc}"))
                return entry
            entry.transaction_id = encode_transaction_id(
                offset_id.addr, offset_id.commit_log_offset, header.queue_offset
            )
        due = spec.properties.get(MessageConst.TIMER_DELIVER_MS)
        if due is not None:
            entry.recall_handle = RecallHandle(spec.topic, broker_name, int(due), system.message_id).encode()
        return entry

    async def end_transaction(
        self, meta: CallMeta, request: spb.EndTransactionRequest
    ) -> spb.EndTransactionResponse:
        topic = resource_name(request.topic)
        invalid = check_topic(request.topic)
        if invalid is not None:
            return spb.EndTransactionResponse(status=status(invalid.code, invalid.message))
        decoded = decode_transaction_id(request.transaction_id)
        if decoded is None:
            return spb.EndTransactionResponse(
                status=status(
                    pb.INVALID_TRANSACTION_ID, f"transaction id {request.transaction_id!r} is not ours"
                )
            )
        decision = _RESOLUTIONS.get(request.resolution)
        if decision is None:
            # Still unknown: the broker keeps the half message and checks again later.
            return spb.EndTransactionResponse(status=status(pb.OK))
        addr, commit_log_offset, queue_offset = decoded
        header = EndTransactionRequestHeader(
            producer_group=topic,
            tran_state_table_offset=queue_offset,
            commit_log_offset=commit_log_offset,
            commit_or_rollback=decision,
            msg_id=request.message_id,
            from_transaction_check=request.source == pb.SOURCE_SERVER_CHECK,
            transaction_id=request.message_id,
        )
        command = RemotingCommand.request(RequestCode.END_TRANSACTION, header.to_ext())
        try:
            response = await self._core.gateway.invoke_addr(addr, command)
        except RemotingError as exc:
            return spb.EndTransactionResponse(status=status(pb.PROXY_TIMEOUT, str(exc)))
        if response.code != ResponseCode.SUCCESS:
            return spb.EndTransactionResponse(
                status=status(from_remoting(response.code), response.remark or "end transaction failed")
            )
        self._core.half_owners.pop(request.message_id, None)
        return spb.EndTransactionResponse(status=status(pb.OK))

    async def recall_message(
        self, meta: CallMeta, request: spb.RecallMessageRequest
    ) -> spb.RecallMessageResponse:
        topic = resource_name(request.topic)
        invalid = check_topic(request.topic)
        if invalid is not None:
            return spb.RecallMessageResponse(status=status(invalid.code, invalid.message))
        try:
            handle = RecallHandle.decode(request.recall_handle)
        except RemoteProtocolError as exc:
            return spb.RecallMessageResponse(status=status(pb.BAD_REQUEST, str(exc)))
        header = {"producerGroup": topic, "topic": topic, "recallHandle": request.recall_handle}
        command = RemotingCommand.request(RequestCode.RECALL_MESSAGE, header)
        try:
            response = await self._core.gateway.invoke(handle.broker_name, command)
        except (NoRouteError, RemotingError) as exc:
            return spb.RecallMessageResponse(status=status(pb.PROXY_TIMEOUT, str(exc)))
        if response.code != ResponseCode.SUCCESS:
            return spb.RecallMessageResponse(
                status=status(from_remoting(response.code), response.remark or "recall failed")
            )
        return spb.RecallMessageResponse(
            status=status(pb.OK), message_id=response.ext_fields.get("msgId", handle.message_id)
        )

    # -- transaction checks -------------------------------------------------------------------

    async def on_check(
        self, broker_addr: str, header: CheckTransactionStateRequestHeader, message: MessageExt
    ) -> None:
        """A broker asks about an undecided half message: ask its producer over Telemetry."""
        core = self._core
        topic = message.properties.get(MessageConst.REAL_TOPIC, message.topic)
        message.topic = topic
        message_id = message.uniq_key or header.msg_id or ""
        owner = core.half_owners.get(message_id)
        candidates = [owner] if owner else []
        candidates += [session.client_id for session in core.sessions.producers_of(topic)]
        command = spb.TelemetryCommand(
            recover_orphaned_transaction_command=spb.RecoverOrphanedTransactionCommand(
                message=stored_to_grpc(message),
                transaction_id=encode_transaction_id(
                    broker_addr, header.commit_log_offset, header.tran_state_table_offset
                ),
            )
        )
        for client_id in candidates:
            if core.sessions.push(client_id, command):
                logger.info("transaction %s of %s: check sent to client %s", message_id, topic, client_id)
                return
        logger.info("transaction %s of %s: no live producer to check it", message_id, topic)


def _send_request(spec: SendSpec, queue_id: int) -> RemotingCommand:
    header = SendMessageRequestHeader(
        producer_group=spec.topic,
        topic=spec.topic,
        queue_id=queue_id,
        default_topic_queue_nums=DEFAULT_TOPIC_QUEUE_NUMS,
        sys_flag=spec.sys_flag,
        born_timestamp=spec.born_timestamp_ms,
        properties=encode_properties(spec.properties),
    )
    return RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, header.to_v2_ext(), spec.body)


def _identity_body(message: pb.Message) -> bytes:
    if message.system_properties.body_encoding == pb.GZIP:
        data = message.body
        return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else zlib.decompress(data)
    return bytes(message.body)
