"""The ``apache.rocketmq.v2.MessagingService`` servicer: one method per RPC, all on grpc.aio.

Each RPC reads the caller's metadata (``proxy.core.call_meta``; CLIENT_ID_REQUIRED without a
client id), marks the client alive, passes the ACL check when ACL is on (``proxy.auth``:
UNAUTHORIZED or FORBIDDEN), and hands the request to the part that owns it:

| RPC | served by |
| --- | --- |
| QueryRoute, Heartbeat, QueryAssignment, NotifyClientTermination, Telemetry | here |
| SendMessage, EndTransaction, RecallMessage | ``proxy.producing`` |
| ReceiveMessage, AckMessage, ChangeInvisibleDuration, ForwardMessageToDeadLetterQueue | ``proxy.consuming`` |
| PullMessage, UpdateOffset, GetOffset, QueryOffset | gRPC UNIMPLEMENTED, as Apache's proxy (no SDK of this version calls them) |
| SyncLiteSubscription | NOT_IMPLEMENTED in-band (lite topics are not served) |

Errors of the RPCs served are always in-band (grpc-v5-protocol P11): the RPC finishes with gRPC OK and a
``Status`` in its response; an unexpected exception is logged and answered with
INTERNAL_SERVER_ERROR, never a gRPC error, which the SDKs would take for a broken connection.

Telemetry: the stream's reader task takes the client's commands (settings: answered at once
with the merged settings, P1; thread stack and verify results: handed to whoever asked); the
response side drains the client's outbound queue, which is also how the proxy calls the client
(transaction checks). When a client's last stream closes, the client is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, NoReturn, TypeVar

import grpc

from orbitmq.errors import BrokerResponseError, NoRouteError, RemotingError
from orbitmq.model.route import PERM_READ, PERM_WRITE
from orbitmq.proxy._pb import definition_pb2 as pb
from orbitmq.proxy._pb import service_pb2 as spb
from orbitmq.proxy._pb import service_pb2_grpc as spb_grpc
from orbitmq.proxy.auth import GrpcGuard, settings_resources
from orbitmq.proxy.codes import from_remoting, status
from orbitmq.proxy.consuming import ConsumerActivity
from orbitmq.proxy.convert import resource_name
from orbitmq.proxy.core import CallMeta, ProxyCore, call_meta
from orbitmq.proxy.producing import ProducerActivity
from orbitmq.proxy.settings import CONSUMER_TYPES, answer_settings
from orbitmq.proxy.topic_types import accepted_message_types
from orbitmq.proxy.validation import check_group, check_topic
from orbitmq.proxy.wire import MalformedRequest, refuse_malformed
from orbitmq.transport.log_limit import LogLimiter

__all__ = ["MessagingService"]

logger = logging.getLogger(__name__)

R = TypeVar("R")
LITE_SUBSCRIPTION_QUOTA = 2000
MAX_LITE_TOPIC_SIZE = 64
"""Apache's proxy defaults (liteSubscriptionQuota, maxLiteTopicSize) stated in consumer settings."""


def _permission(perm: int) -> pb.Permission:
    if perm & PERM_READ and perm & PERM_WRITE:
        return pb.READ_WRITE
    if perm & PERM_READ:
        return pb.READ
    if perm & PERM_WRITE:
        return pb.WRITE
    return pb.NONE


class MessagingService(spb_grpc.MessagingServiceServicer):
    """The servicer (see the module docstring)."""

    def __init__(
        self, core: ProxyCore, guard: GrpcGuard | None = None, log: LogLimiter | None = None
    ) -> None:
        self._core = core
        self._log = (
            log if log is not None else LogLimiter(logger, core.config.bad_request_log_interval_ms / 1000)
        )
        self.guard = guard if guard is not None else GrpcGuard(None)
        self.producer = ProducerActivity(core)
        self.consumer = ConsumerActivity(core)
        self._background: set[asyncio.Task[None]] = set()
        self._asked: dict[str, asyncio.Future[object]] = {}

    @property
    def bad_request_log(self) -> LogLimiter:
        """The rate-limited log of refused and failed requests (shared with ``proxy.wire``)."""
        return self._log

    # -- plumbing -----------------------------------------------------------------------------

    def _meta(self, context: Any) -> CallMeta | None:
        meta = call_meta(context)
        if meta is not None:
            self._core.sessions.touch(meta.client_id, self._core.clock_ms(), meta.language, meta.version)
        return meta

    async def _unary(
        self,
        context: Any,
        response_type: Callable[..., R],
        handler: Callable[[CallMeta], Awaitable[R]],
        request: Any,
    ) -> R:
        meta = self._meta(context)
        if meta is None:
            return response_type(status=status(pb.CLIENT_ID_REQUIRED, "x-mq-client-id is required"))
        refused = self.guard.refuse_request(type(request).__name__.removesuffix("Request"), meta, request)
        if refused is not None:
            return response_type(status=refused)
        try:
            return await handler(meta)
        except BrokerResponseError as exc:
            # A name server or broker refused what the client asked for: its code, one line.
            name = getattr(response_type, "__name__", "RPC")
            self._log.warning(
                f"rpc-refused:{name}:{exc.code}", "%s from client %s refused: %s", name, meta.client_id, exc
            )
            return response_type(status=status(from_remoting(exc.code), str(exc)[:512]))
        except Exception as exc:
            # Rate-limited: a request that trips a defect must not be able to flood the log.
            name = getattr(response_type, "__name__", "RPC")
            self._log.error(
                f"rpc-failed:{name}:{type(exc).__name__}",
                "%s from client %s failed",
                name,
                meta.client_id,
                exc_info=True,
            )
            return response_type(status=status(pb.INTERNAL_SERVER_ERROR, f"proxy error: {exc}"))

    def _spawn(self, job: Awaitable[None]) -> None:
        task = asyncio.ensure_future(job)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def client_gone(self, client_id: str) -> None:
        self._core.sessions.remove(client_id)
        await self.consumer.release(client_id)

    # -- routing and clients ------------------------------------------------------------------

    async def QueryRoute(self, request: spb.QueryRouteRequest, context: Any) -> spb.QueryRouteResponse:  # noqa: N802
        return await self._unary(
            context, spb.QueryRouteResponse, lambda meta: self._query_route(request), request
        )

    async def _query_route(self, request: spb.QueryRouteRequest) -> spb.QueryRouteResponse:
        invalid = check_topic(request.topic)
        if invalid is not None:
            return spb.QueryRouteResponse(status=status(invalid.code, invalid.message))
        topic = resource_name(request.topic)
        try:
            route = await self._core.gateway.route(topic)
        except (NoRouteError, RemotingError) as exc:
            return spb.QueryRouteResponse(status=status(pb.PROXY_TIMEOUT, f"name servers unreachable: {exc}"))
        if route is None:
            return spb.QueryRouteResponse(status=status(pb.TOPIC_NOT_FOUND, f"topic {topic} not found"))
        masters = {data.broker_name for data in route.broker_datas if 0 in data.broker_addrs}
        accepted = accepted_message_types(await self._core.gateway.topic_message_type(topic))
        queues = []
        for data in sorted(route.queue_datas, key=lambda q: q.broker_name):
            if data.broker_name not in masters:
                continue
            broker = pb.Broker(name=data.broker_name, id=0, endpoints=request.endpoints)
            for queue_id in range(max(data.read_queue_nums, data.write_queue_nums)):
                perm = data.perm
                if queue_id >= data.read_queue_nums:
                    perm &= ~PERM_READ
                if queue_id >= data.write_queue_nums:
                    perm &= ~PERM_WRITE
                queues.append(
                    pb.MessageQueue(
                        topic=request.topic,
                        id=queue_id,
                        permission=_permission(perm),
                        broker=broker,
                        accept_message_types=accepted,
                    )
                )
        return spb.QueryRouteResponse(status=status(pb.OK), message_queues=queues)

    async def Heartbeat(self, request: spb.HeartbeatRequest, context: Any) -> spb.HeartbeatResponse:  # noqa: N802
        async def handle(meta: CallMeta) -> spb.HeartbeatResponse:
            session = self._core.sessions.get(meta.client_id)
            if session is None or session.settings is None:
                # As Apache's proxy: a client is known by the settings of its Telemetry stream,
                # whatever client type its heartbeat names.
                return spb.HeartbeatResponse(
                    status=status(pb.UNRECOGNIZED_CLIENT_TYPE, "cannot find client settings for this client")
                )
            return spb.HeartbeatResponse(status=status(pb.OK))

        return await self._unary(context, spb.HeartbeatResponse, handle, request)

    async def QueryAssignment(  # noqa: N802
        self, request: spb.QueryAssignmentRequest, context: Any
    ) -> spb.QueryAssignmentResponse:
        return await self._unary(
            context, spb.QueryAssignmentResponse, lambda meta: self._query_assignment(request), request
        )

    async def _query_assignment(self, request: spb.QueryAssignmentRequest) -> spb.QueryAssignmentResponse:
        invalid = check_topic(request.topic) or check_group(request.group)
        if invalid is not None:
            return spb.QueryAssignmentResponse(status=status(invalid.code, invalid.message))
        gateway = self._core.gateway
        topic = resource_name(request.topic)
        route = await gateway.route(topic)
        if route is None:
            return spb.QueryAssignmentResponse(status=status(pb.TOPIC_NOT_FOUND, f"topic {topic} not found"))
        readable = gateway.master_queues(route, PERM_READ)
        if not readable:
            return spb.QueryAssignmentResponse(
                status=status(pb.FORBIDDEN, f"topic {topic} has no readable queue")
            )
        policy = await gateway.group_policy(resource_name(request.group), readable[0][0])
        if policy.fifo:
            chosen = readable
        else:
            # One entry per broker: a receive pops from every queue of that broker.
            chosen = sorted({(name, -1) for name, _ in readable})
        assignments = [
            pb.Assignment(
                message_queue=pb.MessageQueue(
                    topic=request.topic,
                    id=queue_id,
                    permission=pb.READ_WRITE,
                    broker=pb.Broker(name=name, id=0, endpoints=request.endpoints),
                )
            )
            for name, queue_id in chosen
        ]
        return spb.QueryAssignmentResponse(status=status(pb.OK), assignments=assignments)

    async def NotifyClientTermination(  # noqa: N802
        self, request: spb.NotifyClientTerminationRequest, context: Any
    ) -> spb.NotifyClientTerminationResponse:
        async def handle(meta: CallMeta) -> spb.NotifyClientTerminationResponse:
            await self.client_gone(meta.client_id)
            return spb.NotifyClientTerminationResponse(status=status(pb.OK))

        return await self._unary(context, spb.NotifyClientTerminationResponse, handle, request)

    # -- telemetry ----------------------------------------------------------------------------

    async def Telemetry(  # noqa: N802
        self, request_iterator: AsyncIterator[spb.TelemetryCommand], context: Any
    ) -> AsyncIterator[spb.TelemetryCommand]:
        meta = self._meta(context)
        if meta is None:
            yield spb.TelemetryCommand(status=status(pb.CLIENT_ID_REQUIRED, "x-mq-client-id is required"))
            return
        sessions = self._core.sessions
        session = sessions.touch(meta.client_id, self._core.clock_ms())
        outbound = sessions.open_stream(session)
        reader = asyncio.ensure_future(self._read_telemetry(meta, request_iterator, outbound))
        try:
            while True:
                command = await outbound.get()
                if command is None:
                    break
                yield command
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await reader
            current = sessions.get(meta.client_id)
            if current is session and sessions.close_stream(session, outbound):
                self._spawn(self.client_gone(meta.client_id))

    async def _read_telemetry(
        self,
        meta: CallMeta,
        request_iterator: AsyncIterator[spb.TelemetryCommand],
        outbound: asyncio.Queue[spb.TelemetryCommand | None],
    ) -> None:
        try:
            async for command in request_iterator:
                session = self._core.sessions.touch(meta.client_id, self._core.clock_ms())
                if isinstance(command, MalformedRequest):
                    remark = refuse_malformed(command, None, self._log)
                    outbound.put_nowait(spb.TelemetryCommand(status=status(pb.BAD_REQUEST, remark)))
                    continue
                kind = command.WhichOneof("command")
                if kind == "settings":
                    refused = self.guard.refusal("Telemetry", meta, settings_resources(command.settings))
                    if refused is not None:
                        outbound.put_nowait(spb.TelemetryCommand(status=refused))
                        continue
                    outbound.put_nowait(await self._settings_answer(meta, command.settings))
                elif kind == "thread_stack_trace":
                    reply = command.thread_stack_trace
                    self._answered(reply.nonce, reply.thread_stack_trace, session.client_id)
                elif kind == "verify_message_result":
                    ok = command.status.code == pb.OK if command.HasField("status") else True
                    self._answered(command.verify_message_result.nonce, ok, session.client_id)
        except Exception as exc:  # the client went away mid-stream
            logger.debug("telemetry stream of %s ended: %s", meta.client_id, exc)
        finally:
            outbound.put_nowait(None)

    async def _settings_answer(self, meta: CallMeta, settings: pb.Settings) -> spb.TelemetryCommand:
        core = self._core
        session = core.sessions.touch(meta.client_id, core.clock_ms())
        core.sessions.update_settings(session, settings)
        policy = None
        if settings.client_type in CONSUMER_TYPES and session.group:
            broker = None
            for topic in sorted(session.topics):
                broker = await core.gateway.any_broker(topic)
                if broker:
                    break
            policy = await core.gateway.group_policy(session.group, broker)
        if settings.client_type == pb.PRODUCER:
            for topic in sorted(session.topics):
                self._spawn(self._publish_as(topic))
        answer = answer_settings(settings, core.config, policy)
        if answer.HasField("subscription"):
            # Apache's proxy states its lite-topic quotas to every consumer (its defaults); a
            # client that reads them finds the same numbers here, though lite topics are not served.
            answer.subscription.lite_subscription_quota = LITE_SUBSCRIPTION_QUOTA
            answer.subscription.max_lite_topic_size = MAX_LITE_TOPIC_SIZE
        return spb.TelemetryCommand(status=status(pb.OK), settings=answer)

    async def _publish_as(self, topic: str) -> None:
        try:
            await self._core.gateway.publish_as(topic)
        except (NoRouteError, RemotingError) as exc:
            logger.info("registering as producer of %s failed: %s", topic, exc)

    # -- commands to a client ------------------------------------------------------------------

    async def thread_stack_trace(self, client_id: str, timeout_s: float = 5.0) -> str | None:
        """Ask a client for its threads' stacks (PrintThreadStackTraceCommand); None without an answer."""
        nonce = uuid.uuid4().hex
        command = spb.TelemetryCommand(
            print_thread_stack_trace_command=spb.PrintThreadStackTraceCommand(nonce=nonce)
        )
        answer = await self._ask(client_id, nonce, command, timeout_s)
        return answer if isinstance(answer, str) else None

    async def verify_message(
        self, client_id: str, message: pb.Message, timeout_s: float = 5.0
    ) -> bool | None:
        """Have a client consume ``message`` on trial (VerifyMessageCommand); None without an answer."""
        nonce = uuid.uuid4().hex
        command = spb.TelemetryCommand(
            verify_message_command=spb.VerifyMessageCommand(nonce=nonce, message=message)
        )
        answer = await self._ask(client_id, nonce, command, timeout_s)
        return answer if isinstance(answer, bool) else None

    async def _ask(
        self, client_id: str, nonce: str, command: spb.TelemetryCommand, timeout_s: float
    ) -> object:
        future: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        self._asked[nonce] = future
        try:
            if not self._core.sessions.push(client_id, command):
                return None
            return await asyncio.wait_for(future, timeout_s)
        except TimeoutError:
            return None
        finally:
            self._asked.pop(nonce, None)

    def _answered(self, nonce: str, answer: object, client_id: str) -> None:
        future = self._asked.get(nonce)
        if future is None or future.done():
            logger.info("client %s answered an unknown or late command %s", client_id, nonce)
            return
        future.set_result(answer)

    # -- producer and consumer RPCs -----------------------------------------------------------

    async def SendMessage(self, request: spb.SendMessageRequest, context: Any) -> spb.SendMessageResponse:  # noqa: N802
        return await self._unary(
            context, spb.SendMessageResponse, lambda m: self.producer.send_message(m, request), request
        )

    async def EndTransaction(  # noqa: N802
        self, request: spb.EndTransactionRequest, context: Any
    ) -> spb.EndTransactionResponse:
        return await self._unary(
            context, spb.EndTransactionResponse, lambda m: self.producer.end_transaction(m, request), request
        )

    async def RecallMessage(  # noqa: N802
        self, request: spb.RecallMessageRequest, context: Any
    ) -> spb.RecallMessageResponse:
        return await self._unary(
            context, spb.RecallMessageResponse, lambda m: self.producer.recall_message(m, request), request
        )

    async def ReceiveMessage(  # noqa: N802
        self, request: spb.ReceiveMessageRequest, context: Any
    ) -> AsyncIterator[spb.ReceiveMessageResponse]:
        meta = self._meta(context)
        if meta is None:
            yield spb.ReceiveMessageResponse(
                status=status(pb.CLIENT_ID_REQUIRED, "x-mq-client-id is required")
            )
            return
        refused = self.guard.refuse_request("ReceiveMessage", meta, request)
        if refused is not None:
            yield spb.ReceiveMessageResponse(status=refused)
            return
        started = stamped = False
        try:
            async for frame in self.consumer.receive_message(meta, request, context.time_remaining()):
                started = True
                stamped = frame.HasField("delivery_timestamp")
                yield frame
        except Exception as exc:
            logger.exception("ReceiveMessage from client %s failed", meta.client_id)
            if not started:
                yield spb.ReceiveMessageResponse(
                    status=status(pb.INTERNAL_SERVER_ERROR, f"proxy error: {exc}")
                )
        if not stamped:
            # As Apache's proxy: every receive stream ends with the delivery time frame, whatever
            # its status said.
            done = spb.ReceiveMessageResponse()
            done.delivery_timestamp.FromMilliseconds(self._core.clock_ms())
            yield done

    async def AckMessage(self, request: spb.AckMessageRequest, context: Any) -> spb.AckMessageResponse:  # noqa: N802
        return await self._unary(
            context, spb.AckMessageResponse, lambda m: self.consumer.ack_message(m, request), request
        )

    async def ChangeInvisibleDuration(  # noqa: N802
        self, request: spb.ChangeInvisibleDurationRequest, context: Any
    ) -> spb.ChangeInvisibleDurationResponse:
        async def handle(meta: CallMeta) -> spb.ChangeInvisibleDurationResponse:
            return await self.consumer.change_invisible_duration(meta, request)

        response = await self._unary(context, spb.ChangeInvisibleDurationResponse, handle, request)
        if not response.receipt_handle:
            response.receipt_handle = request.receipt_handle  # P10: never leave the client with ""
        return response

    async def ForwardMessageToDeadLetterQueue(  # noqa: N802
        self, request: spb.ForwardMessageToDeadLetterQueueRequest, context: Any
    ) -> spb.ForwardMessageToDeadLetterQueueResponse:
        return await self._unary(
            context,
            spb.ForwardMessageToDeadLetterQueueResponse,
            lambda m: self.consumer.forward_to_dead_letter_queue(m, request),
            request,
        )

    # -- not served -----------------------------------------------------------------------------
    # Offset-based consumption: Apache's proxy does not serve these RPCs and ends each call
    # with gRPC UNIMPLEMENTED; so does this one, so a client sees the same thing from both.

    @staticmethod
    async def _unimplemented(rpc: str, context: Any) -> NoReturn:
        await context.abort(
            grpc.StatusCode.UNIMPLEMENTED,
            f"Method apache.rocketmq.v2.MessagingService/{rpc} is unimplemented",
        )
        raise AssertionError("context.abort returned")

    async def PullMessage(  # noqa: N802
        self, request: spb.PullMessageRequest, context: Any
    ) -> AsyncIterator[spb.PullMessageResponse]:
        await self._unimplemented("PullMessage", context)
        yield spb.PullMessageResponse()  # pragma: no cover - makes this a stream handler

    async def UpdateOffset(self, request: spb.UpdateOffsetRequest, context: Any) -> spb.UpdateOffsetResponse:  # noqa: N802
        await self._unimplemented("UpdateOffset", context)

    async def GetOffset(self, request: spb.GetOffsetRequest, context: Any) -> spb.GetOffsetResponse:  # noqa: N802
        await self._unimplemented("GetOffset", context)

    async def QueryOffset(self, request: spb.QueryOffsetRequest, context: Any) -> spb.QueryOffsetResponse:  # noqa: N802
        await self._unimplemented("QueryOffset", context)

    async def SyncLiteSubscription(  # noqa: N802
        self, request: spb.SyncLiteSubscriptionRequest, context: Any
    ) -> spb.SyncLiteSubscriptionResponse:
        return spb.SyncLiteSubscriptionResponse(
            status=status(pb.NOT_IMPLEMENTED, "lite topics are not supported")
        )
