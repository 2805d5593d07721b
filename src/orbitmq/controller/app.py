"""The controller process: a Raft node (``consensus.py``), the request handlers, the election scan.

Requests (ha-replication.md §5.3; bodies are JSON):

=====================================  =====================================================
code                                   what
=====================================  =====================================================
BROKER_HEARTBEAT (904)                 any node records the broker's liveness, epoch and
                                       offsets; the leader answers with the group's view
                                       (master, epoch, SyncStateSet, the master's confirm
                                       offset), a follower with CONTROLLER_NOT_LEADER
CONTROLLER_REGISTER_BROKER (1003)      commit the replica's address; answers its broker id
CONTROLLER_GET_REPLICA_INFO (1004)     the leader's view of one group
CONTROLLER_ELECT_MASTER (1002)         the leader runs the election of one group now
CONTROLLER_ALTER_SYNC_STATE_SET (1001) the master's new SyncStateSet (fenced by epochs); new
                                       members must be alive
CONTROLLER_GET_METADATA_INFO (1005)    this node's Raft status (leader, term)
CONTROLLER_GET_SYNC_STATE_DATA (1006)  every group with each replica's liveness (admin)
=====================================  =====================================================

The election scan runs every ``scanNotActiveBrokerInterval`` on the leader only: a group whose
master has not heartbeated within the broker's own ``heartbeatTimeoutMills`` gets a new master
chosen by :func:`~orbitmq.controller.state.choose_master` from the live SyncStateSet members,
committed through the log. Brokers learn it from their next heartbeat's answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from pathlib import Path
from typing import Any

import orjson

from orbitmq.controller.config import ControllerConfig
from orbitmq.controller.consensus import ConsensusError, RaftLog
from orbitmq.controller.liveness import Heartbeat, Liveness
from orbitmq.controller.state import NO_MASTER, BrokerGroup, Outcome, choose_master
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.transport.server import Handler, RemotingServer, RequestContext

__all__ = ["ControllerApp", "ControllerHandlers"]

logger = logging.getLogger(__name__)

SHUTDOWN_GRACE_S = 2.0


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


def _int_field(request: RemotingCommand, name: str, default: int | None = None) -> int:
    text = request.ext_fields.get(name)
    if text is None or text == "":
        if default is None:
            raise _BadRequest(f"header field {name!r} is missing")
        return default
    try:
        return int(text)
    except ValueError:
        raise _BadRequest(f"header field {name!r}: {text!r} is not an integer") from None


def _str_field(request: RemotingCommand, name: str) -> str:
    text = request.ext_fields.get(name)
    if not text:
        raise _BadRequest(f"header field {name!r} is missing")
    return text


class _BadRequest(Exception):
    pass


class ControllerHandlers:
    """Request handlers over one Raft node and this node's liveness view."""

    def __init__(self, raft: RaftLog, config: ControllerConfig) -> None:
        self.raft = raft
        self.config = config
        self.liveness = Liveness()
        self._was_leader = False
        self._election_lock = asyncio.Lock()

    def table(self) -> dict[int, Handler]:
        return {
            RequestCode.BROKER_HEARTBEAT: self._guard(self.heartbeat),
            RequestCode.CONTROLLER_REGISTER_BROKER: self._guard(self.register_broker),
            RequestCode.CONTROLLER_GET_REPLICA_INFO: self._guard(self.get_replica_info),
            RequestCode.CONTROLLER_ELECT_MASTER: self._guard(self.elect_master),
            RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET: self._guard(self.alter_sync_state_set),
            RequestCode.CONTROLLER_GET_METADATA_INFO: self._guard(self.get_metadata_info),
            RequestCode.CONTROLLER_GET_SYNC_STATE_DATA: self._guard(self.get_sync_state_data),
        }

    def _guard(self, handler: Handler) -> Handler:
        async def guarded(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
            try:
                return await handler(ctx, request)
            except _BadRequest as exc:
                return request.response(ResponseCode.CONTROLLER_INVALID_REQUEST, str(exc))
            except ConsensusError as exc:
                return request.response(ResponseCode.CONTROLLER_NOT_LEADER, f"not committed: {exc}")

        return guarded

    # -- views ---------------------------------------------------------------------------------

    def _group(self, broker_name: str) -> BrokerGroup | None:
        with RaftLog.lock:
            group = self.raft.state.group(broker_name)
            return None if group is None else _copy(group)

    def _view(self, group: BrokerGroup) -> dict[str, Any]:
        view = group.view()
        master = self.liveness.get(group.broker_name, group.master_id)
        view["masterConfirmOffset"] = master.confirm_offset if master is not None else -1
        return view

    def _answer(self, request: RemotingCommand, outcome: Outcome) -> RemotingCommand:
        code = ResponseCode.SUCCESS if outcome.code == 0 else outcome.code
        body = orjson.dumps(outcome.group) if outcome.group is not None else b""
        return request.response(code, outcome.remark or None, {"brokerId": str(outcome.broker_id)}, body)

    def _not_leader(self, request: RemotingCommand) -> RemotingCommand:
        return request.response(
            ResponseCode.CONTROLLER_NOT_LEADER,
            f"this controller is not the leader (last known leader {self.raft.leader_address or 'none'})",
            {"leaderRaftAddress": self.raft.leader_address},
        )

    # -- handlers ------------------------------------------------------------------------------

    async def heartbeat(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        broker_name = _str_field(request, "brokerName")
        broker_id = _int_field(request, "brokerId")
        self.liveness.beat(
            Heartbeat(
                broker_name,
                broker_id,
                request.ext_fields.get("brokerAddr", ""),
                _int_field(request, "epoch", 0),
                _int_field(request, "maxOffset", 0),
                _int_field(request, "confirmOffset", 0),
                _int_field(request, "heartbeatTimeoutMills", 10_000),
                _int_field(request, "electionPriority", 0),
                monotonic_ms(),
            )
        )
        if request.is_oneway:
            return None
        if not self.raft.is_leader:
            return self._not_leader(request)
        group = self._group(broker_name)
        if group is None:
            return request.response(
                ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST, f"no broker group {broker_name!r}"
            )
        return request.response(ResponseCode.SUCCESS, None, {}, orjson.dumps(self._view(group)))

    async def register_broker(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        command = {
            "type": "register",
            "clusterName": _str_field(request, "clusterName"),
            "brokerName": _str_field(request, "brokerName"),
            "brokerId": _int_field(request, "brokerId", -1),
            "brokerAddress": _str_field(request, "brokerAddress"),
            "haAddress": request.ext_fields.get("haAddress", ""),
        }
        outcome = await self.raft.propose(command)
        if outcome.code == 0:
            logger.info(
                "broker %s of %s registered at %s",
                outcome.broker_id,
                command["brokerName"],
                command["brokerAddress"],
            )
        return self._answer(request, outcome)

    async def get_replica_info(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        if not self.raft.is_leader:
            return self._not_leader(request)
        broker_name = _str_field(request, "brokerName")
        group = self._group(broker_name)
        if group is None:
            return request.response(
                ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST, f"no broker group {broker_name!r}"
            )
        return request.response(ResponseCode.SUCCESS, None, {}, orjson.dumps(self._view(group)))

    async def elect_master(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        if not self.raft.is_leader:
            return self._not_leader(request)
        broker_name = _str_field(request, "brokerName")
        outcome = await self.elect(broker_name)
        if outcome is None:
            group = self._group(broker_name)
            if group is None:
                return request.response(
                    ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST, f"no broker group {broker_name!r}"
                )
            return request.response(
                ResponseCode.SUCCESS,
                "the master is alive",
                {"brokerId": str(group.master_id)},
                orjson.dumps(self._view(group)),
            )
        return self._answer(request, outcome)

    async def alter_sync_state_set(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        if not self.raft.is_leader:
            return self._not_leader(request)
        broker_name = _str_field(request, "brokerName")
        try:
            members = [int(member) for member in orjson.loads(request.body)["syncStateSet"]]
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise _BadRequest(f'body must be {{"syncStateSet": [ids]}}: {exc}') from None
        group = self._group(broker_name)
        now = monotonic_ms()
        if group is not None:
            joining = set(members) - group.sync_state_set
            dead = [member for member in joining if not self.liveness.is_alive(broker_name, member, now)]
            if dead:
                return request.response(
                    ResponseCode.CONTROLLER_INVALID_REPLICAS, f"brokers {sorted(dead)} are not alive"
                )
        command = {
            "type": "alter_sss",
            "brokerName": broker_name,
            "masterBrokerId": _int_field(request, "masterBrokerId"),
            "masterEpoch": _int_field(request, "masterEpoch"),
            "syncStateSetEpoch": _int_field(request, "syncStateSetEpoch"),
            "syncStateSet": members,
        }
        outcome = await self.raft.propose(command)
        if outcome.code == 0 and outcome.group is not None:
            logger.info(
                "SyncStateSet of %s is now %s (epoch %s)",
                broker_name,
                outcome.group["syncStateSet"],
                outcome.group["syncStateSetEpoch"],
            )
        return self._answer(request, outcome)

    async def get_metadata_info(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        status = self.raft.status()
        status["group"] = self.config.group
        status["peers"] = self.config.peers
        status["selfId"] = self.config.self_id
        return request.response(ResponseCode.SUCCESS, None, {}, orjson.dumps(status))

    async def get_sync_state_data(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        now = monotonic_ms()
        with RaftLog.lock:
            groups = [_copy(group) for group in self.raft.state.groups.values()]
        views = []
        for group in sorted(groups, key=lambda g: g.broker_name):
            view = self._view(group)
            replicas = []
            for broker_id, address in sorted(group.replicas.items()):
                beat = self.liveness.get(group.broker_name, broker_id)
                replicas.append(
                    {
                        "brokerId": broker_id,
                        "address": address,
                        "alive": self.liveness.is_alive(group.broker_name, broker_id, now),
                        "epoch": beat.epoch if beat is not None else -1,
                        "maxOffset": beat.max_offset if beat is not None else -1,
                        "confirmOffset": beat.confirm_offset if beat is not None else -1,
                    }
                )
            view["replicaStates"] = replicas
            views.append(view)
        body = {"controller": self.raft.status(), "groups": views}
        return request.response(ResponseCode.SUCCESS, None, {}, orjson.dumps(body))

    # -- elections -----------------------------------------------------------------------------

    async def elect(self, broker_name: str) -> Outcome | None:
        """Elect a master of ``broker_name`` if it needs one; None when its master is alive."""
        async with self._election_lock:
            group = self._group(broker_name)
            if group is None:
                return None
            now = monotonic_ms()
            choice = choose_master(
                group,
                self.liveness.live_candidates(broker_name, now),
                self.config.enable_elect_unclean_master,
            )
            if choice is None:
                return None
            if choice == NO_MASTER and group.master_id == NO_MASTER:
                return None
            command = {
                "type": "elect",
                "brokerName": broker_name,
                "brokerId": choice,
                "expectedMasterEpoch": group.master_epoch,
            }
            outcome = await self.raft.propose(command)
            if outcome.code == 0 and outcome.group is not None:
                logger.warning(
                    "broker %d elected master of %s at epoch %d (previous master %d)",
                    choice,
                    broker_name,
                    outcome.group["masterEpoch"],
                    group.master_id,
                )
            elif choice == NO_MASTER:
                logger.error(
                    "master %d of %s is gone and no SyncStateSet member %s is alive: the group has no master",
                    group.master_id,
                    broker_name,
                    sorted(group.sync_state_set),
                )
            return outcome

    async def scan_once(self) -> None:
        """On the leader: elect a master for every group that needs one."""
        if not self.raft.is_leader:
            self._was_leader = False
            return
        if not self._was_leader:
            self._was_leader = True
            self.liveness.reset(monotonic_ms())
            logger.info(
                "this controller (%s) is now the leader, term %d", self.raft.self_address, self.raft.term
            )
            return
        with RaftLog.lock:
            names = list(self.raft.state.groups)
        for name in names:
            try:
                await self.elect(name)
            except ConsensusError as exc:
                logger.warning("election of a master for %s not committed: %s", name, exc)


def _copy(group: BrokerGroup) -> BrokerGroup:
    return BrokerGroup(
        group.cluster_name,
        group.broker_name,
        dict(group.replicas),
        dict(group.ha_addresses),
        group.next_broker_id,
        group.master_id,
        group.master_epoch,
        set(group.sync_state_set),
        group.sync_state_set_epoch,
    )


class ControllerApp:
    """One controller: ``await startup()``, serve, ``await shutdown()``."""

    def __init__(self, config: ControllerConfig) -> None:
        self.config = config
        self.raft: RaftLog | None = None
        self.handlers: ControllerHandlers | None = None
        self._server: RemotingServer | None = None
        self._scan_task: asyncio.Task[None] | None = None

    @property
    def port(self) -> int:
        return self._server.port if self._server is not None else self.config.listen_port

    @property
    def address(self) -> str:
        host = self.config.bind_address
        if host in ("0.0.0.0", "", "::"):
            host = "127.0.0.1"
        return f"{host}:{self.port}"

    def handler_table(self) -> dict[int, Handler]:
        """Start the Raft node and return the handlers (a name server embeds them in its server)."""
        config = self.config
        self.raft = RaftLog(
            config.self_raft_address,
            config.other_raft_addresses,
            Path(config.store_path),
            (config.election_timeout_min_ms, config.election_timeout_max_ms),
        )
        self.handlers = ControllerHandlers(self.raft, config)
        return self.handlers.table()

    async def start_scan(self) -> None:
        self._scan_task = asyncio.get_running_loop().create_task(self._scan(), name="controller-scan")

    async def startup(self) -> None:
        self._server = RemotingServer(self.config.bind_address, self.config.listen_port, self.handler_table())
        await self._server.start()
        await self.start_scan()
        logger.info(
            "controller %s listening on %s, Raft %s, peers %s",
            self.config.self_id,
            self.address,
            self.config.self_raft_address,
            self.config.peers,
        )

    async def stop_scan(self) -> None:
        if self._scan_task is not None:
            self._scan_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._scan_task
            self._scan_task = None
        if self.raft is not None:
            await asyncio.to_thread(self.raft.close)

    async def shutdown(self) -> None:
        if self._server is not None:
            await self._server.stop(SHUTDOWN_GRACE_S)
        await self.stop_scan()
        logger.info("controller %s stopped", self.config.self_id)

    async def _scan(self) -> None:
        assert self.handlers is not None
        interval_s = self.config.scan_not_active_broker_interval_ms / 1000
        while True:
            await asyncio.sleep(interval_s)
            try:
                await self.handlers.scan_once()
            except Exception:
                logger.exception("controller scan failed")
