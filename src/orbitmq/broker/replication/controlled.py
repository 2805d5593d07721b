"""Controller mode on the broker (RocketMQ 5's ReplicasManager): role, epoch, lease, SyncStateSet.

Theory of operation (ha-replication.md §5.4-§5.9).

*Start fenced.* A broker in controller mode starts refusing puts and unregistered with the
name servers. It registers with the controllers (CONTROLLER_REGISTER_BROKER) and keeps the
broker id it is given in ``<storePathRootDir>/brokerIdentity``, so a restart keeps its id.

*Heartbeat.* Every ``brokerHeartbeatInterval`` it sends BROKER_HEARTBEAT to every controller
at once, with its last epoch, max offset and confirm offset. Every controller records its
liveness; the leader answers with the group's state. That answer drives everything here:

- *it names this broker master at a higher epoch*: :meth:`_lead`. Stop copying, append
  ``(epoch, max offset)`` to the epoch file (``epochs.py``), accept puts, register with the
  name servers as brokerId 0.
- *it names another master*: :meth:`_follow`. Refuse puts, close the HA port's links, ask the
  master for its epoch entries (GET_BROKER_EPOCH_CACHE, answered only once it leads at that
  epoch), cut this log back to the consistent point (``MessageStore.truncate_to``: zeroed and
  fsynced before a byte is copied), adopt the master's entries, copy from it, register as the
  controller-given id.
- *it names no master*: a master steps down (stops taking writes); the leader's scan elects.

*Lease (fencing).* A master takes a write only while the leader has confirmed it as master
within ``master_lease_ms`` (¾ of ``controllerHeartBeatTimeoutMills``), counted from when the
confirming heartbeat was *sent*. The controller elects another master only after a whole
timeout without heartbeats, so a master paused (SIGSTOP) past that has lost its lease before
anyone else can be elected, and when it wakes it refuses writes and acknowledgements alike
until its next heartbeat tells it to follow the new master.

*SyncStateSet (master).* With ``allAckInSyncStateSet=true`` a send is acknowledged once every
member has it (``SlaveLinks.required``) and reads stop at the confirm offset, the lowest
member's ack (``MessageStore.read_limit``). Every ``checkSyncStateSetPeriod`` the master
drops members not caught up for ``haMaxTimeSlaveNotCatchup`` and adds slaves that reached the
confirm offset in this epoch (CONTROLLER_ALTER_SYNC_STATE_SET). Growing is applied locally
before it is proposed, shrinking only after it is committed: the set the controller elects
from is always one whose every member has every acknowledged message. Slaves stop reads at
the master's confirm offset as the leader last heard it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson

from orbitmq.broker._tasks import cancel_and_wait
from orbitmq.broker.config import BrokerConfig, BrokerRole
from orbitmq.broker.replication.epochs import EpochFile, consistent_point
from orbitmq.broker.replication.service import ReplicationService
from orbitmq.errors import OrbitError
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.store.message_store import MessageStore
from orbitmq.transport.connection import RemotingClient

__all__ = ["ReplicasManager"]

logger = logging.getLogger(__name__)

IDENTITY_FILE = "brokerIdentity"
NO_MASTER = -1


def _now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class ReplicasManager:
    """One broker's side of controller mode (see the module docstring)."""

    def __init__(
        self,
        config: BrokerConfig,
        store: MessageStore,
        replication: ReplicationService,
        broker_addr: str,
        write_file: Callable[[Path, bytes], None],
        on_role: Callable[[BrokerRole, int], Awaitable[None]],
    ) -> None:
        self._config = config
        self._store = store
        self._replication = replication
        self._broker_addr = broker_addr
        self._write_file = write_file
        self._on_role = on_role
        root = Path(store.config.store_path_root_dir)
        self._identity_path = root / IDENTITY_FILE
        self.epochs = EpochFile(root, write_file)
        self.broker_id = NO_MASTER
        self.role: BrokerRole | None = None  # None: fenced, no role yet
        self.master_id = NO_MASTER
        self.master_epoch = 0  # the epoch of the mastership this broker leads or follows
        self.sync_state_set: frozenset[int] = frozenset()
        self.sync_state_set_epoch = 0
        self.master_confirm_offset = -1  # as the leader last heard it (slaves' read limit)
        self._lease_until_ms = 0
        self._led_since_ms = 0
        self._leader_addr: str | None = None
        self._last_sss_check_ms = 0
        self._caught_up_ms: dict[int, int] = {}  # SyncStateSet member -> last time caught up (wall ms)
        self._client = RemotingClient(connect_timeout_ms=max(config.broker_heartbeat_interval_ms, 200))
        self._task: asyncio.Task[None] | None = None
        self._changing = asyncio.Lock()
        self.role_changes = 0
        replication.master.on_ack.append(self._update_read_limit)

    # -- lifecycle -------------------------------------------------------------------------------

    async def start(self) -> None:
        self.epochs.load()
        self.broker_id = self._load_identity()
        self._store.refuse_puts(f"the broker[{self._config.broker_name}] has no role yet (controller mode)")
        if self._config.all_ack_in_sync_state_set:
            self._store.read_limit = 0
        self._task = asyncio.create_task(self._run(), name="controller-heartbeat")

    async def stop(self) -> None:
        await cancel_and_wait([self._task])
        self._task = None
        await self._client.close()

    def _load_identity(self) -> int:
        try:
            text = self._identity_path.read_text().strip()
        except FileNotFoundError:
            return NO_MASTER
        try:
            return int(text.rsplit("#", 1)[-1])
        except ValueError:
            logger.error(
                "%s holds %r, not cluster#brokerName#brokerId: asking for a new id", self._identity_path, text
            )
            return NO_MASTER

    # -- what the send path asks -----------------------------------------------------------------

    @property
    def is_master(self) -> bool:
        return self.role is not None and self.role is not BrokerRole.SLAVE

    def write_refusal(self) -> tuple[int, str] | None:
        """Why this broker may not take (or acknowledge) a write now; None when it may."""
        if not self.is_master:
            return ResponseCode.SERVICE_NOT_AVAILABLE, (
                f"service not available now: the broker[{self._config.broker_name}] is not master "
                f"(controller mode, brokerId {self.broker_id})"
            )
        if _now_ms() >= self._lease_until_ms:
            return ResponseCode.SERVICE_NOT_AVAILABLE, (
                f"service not available now: the broker[{self._config.broker_name}] lost its master lease "
                f"(no word from the controller leader for {self._config.master_lease_ms} ms)"
            )
        if len(self.sync_state_set) < self._config.min_in_sync_replicas:
            return ResponseCode.SYSTEM_ERROR, (
                f"in-sync replicas not enough: SyncStateSet {sorted(self.sync_state_set)} is smaller than "
                f"minInSyncReplicas {self._config.min_in_sync_replicas}"
            )
        return None

    def confirm_offset(self) -> int:
        """The end of the bytes every SyncStateSet member holds (a master's); else the log's end."""
        max_offset = self._store.max_commit_log_offset
        if not self.is_master:
            return min(max_offset, max(self.master_confirm_offset, 0))
        if not self._config.all_ack_in_sync_state_set:
            return max_offset
        return min(max_offset, max(self._replication.master.links.acked_offset(), 0))

    def _update_read_limit(self) -> None:
        if self._config.all_ack_in_sync_state_set:
            self._store.read_limit = self.confirm_offset()

    def epoch_cache(self) -> dict[str, Any]:
        """GET_BROKER_EPOCH_CACHE: this broker's epoch entries, max offset and the epoch it leads."""
        return {
            "brokerId": self.broker_id,
            "masterEpoch": self.master_epoch if self.is_master else -1,
            "epochEntries": [list(entry) for entry in self.epochs.entries],
            "maxOffset": self._store.max_commit_log_offset,
        }

    # -- the heartbeat loop ----------------------------------------------------------------------

    async def _run(self) -> None:
        interval_s = self._config.broker_heartbeat_interval_ms / 1000
        while True:
            started = time.monotonic()
            try:
                await self._tick()
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("controller heartbeat round failed")
            await asyncio.sleep(max(interval_s - (time.monotonic() - started), 0.01))

    async def _tick(self) -> None:
        if self.broker_id < 0 and not await self._register():
            return
        sent_ms = _now_ms()
        view = await self._heartbeat_all()
        if view is None:
            return
        async with self._changing:
            await self._apply(view, sent_ms)
        if self.is_master:
            await self._check_sync_state_set()
        self._update_read_limit()

    async def _invoke(
        self, addr: str, code: int, ext: dict[str, str], body: bytes = b""
    ) -> RemotingCommand | None:
        try:
            return await self._client.invoke(
                addr, RemotingCommand.request(code, ext, body), self._config.broker_heartbeat_interval_ms
            )
        except OrbitError as exc:
            logger.debug("%s to controller %s failed: %s", RequestCode(code).name, addr, exc)
            return None

    async def _register(self) -> bool:
        ext = {
            "clusterName": self._config.broker_cluster_name,
            "brokerName": self._config.broker_name,
            "brokerId": str(self.broker_id),
            "brokerAddress": self._broker_addr,
            "haAddress": self._replication.ha_address,
        }
        for addr in self._ordered_controllers():
            response = await self._invoke(addr, RequestCode.CONTROLLER_REGISTER_BROKER, ext)
            if response is None or response.code != ResponseCode.SUCCESS:
                continue
            broker_id = int(response.ext_fields.get("brokerId", "-1"))
            if broker_id <= 0:
                continue
            self._write_file(
                self._identity_path,
                f"{self._config.broker_cluster_name}#{self._config.broker_name}#{broker_id}".encode(),
            )
            logger.info("registered with controller %s as broker id %d", addr, broker_id)
            self.broker_id = broker_id
            return True
        logger.warning(
            "no controller of %s accepted the registration", ",".join(self._config.controller_addr)
        )
        return False

    def _ordered_controllers(self) -> list[str]:
        addrs = list(self._config.controller_addr)
        if self._leader_addr in addrs:
            addrs.remove(self._leader_addr)
            addrs.insert(0, self._leader_addr)
        return addrs

    async def _heartbeat_all(self) -> dict[str, Any] | None:
        ext = {
            "clusterName": self._config.broker_cluster_name,
            "brokerAddr": self._broker_addr,
            "brokerName": self._config.broker_name,
            "brokerId": str(self.broker_id),
            "epoch": str(self.epochs.last_epoch),
            "maxOffset": str(self._store.max_commit_log_offset),
            "confirmOffset": str(self.confirm_offset()),
            "heartbeatTimeoutMills": str(self._config.controller_heartbeat_timeout_ms),
            "electionPriority": str(self._config.broker_election_priority),
        }
        addrs = list(self._config.controller_addr)
        answers = await asyncio.gather(
            *(self._invoke(addr, RequestCode.BROKER_HEARTBEAT, ext) for addr in addrs)
        )
        best: dict[str, Any] | None = None
        for addr, response in zip(addrs, answers, strict=True):
            if response is None:
                continue
            if response.code == ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST:
                self.broker_id = NO_MASTER  # the controllers lost this group: register again
                continue
            if response.code != ResponseCode.SUCCESS or not response.body:
                continue
            view: dict[str, Any] = orjson.loads(response.body)
            # Two nodes may both believe they lead for a moment: the higher epoch is the newer.
            if best is None or (view["masterEpoch"], view["syncStateSetEpoch"]) > (
                best["masterEpoch"],
                best["syncStateSetEpoch"],
            ):
                best = view
                self._leader_addr = addr
        return best

    # -- role changes ----------------------------------------------------------------------------

    async def _apply(self, view: dict[str, Any], sent_ms: int) -> None:
        epoch = int(view["masterEpoch"])
        if epoch < self.master_epoch:
            return  # a stale leader's answer
        master_id = int(view["masterBrokerId"])
        members = frozenset(int(member) for member in view["syncStateSet"])
        if master_id == self.broker_id:
            if not (self.is_master and self.master_epoch == epoch):
                await self._lead(epoch)
            self._lease_until_ms = sent_ms + self._config.master_lease_ms
            self._set_sync_state_set(members, int(view["syncStateSetEpoch"]))
            return
        self.master_confirm_offset = int(view.get("masterConfirmOffset", -1))
        if master_id == NO_MASTER:
            if self.is_master or self.role is None:
                await self._step_down(epoch)
            return
        if self.role is not BrokerRole.SLAVE or self.master_id != master_id or self.master_epoch != epoch:
            await self._follow(master_id, epoch, str(view["masterAddress"]), str(view["masterHaAddress"]))

    def _set_sync_state_set(self, members: frozenset[int], epoch: int) -> None:
        if epoch < self.sync_state_set_epoch:
            return
        self.sync_state_set, self.sync_state_set_epoch = members, epoch
        if self._config.all_ack_in_sync_state_set and self.is_master:
            self._replication.master.links.required = frozenset(members - {self.broker_id})
            self._replication.master.release()

    async def _lead(self, epoch: int) -> None:
        store = self._store
        store.refuse_puts(f"the broker[{self._config.broker_name}] is becoming master")
        self._replication.master.links.required = None
        await self._replication.unfollow()
        start = store.max_commit_log_offset
        self.epochs.append(epoch, start)
        role = (
            BrokerRole.SYNC_MASTER
            if self._config.all_ack_in_sync_state_set or self._config.in_sync_replicas > 1
            else BrokerRole.ASYNC_MASTER
        )
        if not self._config.all_ack_in_sync_state_set and self._config.in_sync_replicas > 1:
            self._replication.master.links.acks_needed = self._config.in_sync_replicas - 1
        await self._replication.lead(role)
        self.role, self.master_id, self.master_epoch = role, self.broker_id, epoch
        self.sync_state_set, self.sync_state_set_epoch = frozenset({self.broker_id}), 0
        if self._config.all_ack_in_sync_state_set:
            self._replication.master.links.required = frozenset()
        self._led_since_ms = _now_ms()
        self._caught_up_ms = {}
        self.role_changes += 1
        store.refuse_puts(None)
        logger.warning(
            "broker %d of %s is master now, epoch %d from offset %d",
            self.broker_id,
            self._config.broker_name,
            epoch,
            start,
        )
        await self._on_role(role, 0)

    async def _step_down(self, epoch: int) -> None:
        self._store.refuse_puts(f"the broker[{self._config.broker_name}] has no master (controller mode)")
        self._replication.master.close_links()
        await self._replication.unfollow()
        was_master = self.is_master
        self.role, self.master_id, self.master_epoch = BrokerRole.SLAVE, NO_MASTER, epoch
        if was_master:
            self.role_changes += 1
            logger.warning(
                "broker %d of %s stepped down: the group has no master",
                self.broker_id,
                self._config.broker_name,
            )
            await self._on_role(BrokerRole.SLAVE, self.broker_id)

    async def _follow(self, master_id: int, epoch: int, master_addr: str, master_ha: str) -> None:
        store = self._store
        store.refuse_puts(
            f"the broker[{self._config.broker_name}] is a slave (brokerId {self.broker_id}); "
            f"its master is {master_addr}"
        )
        was_role = self.role
        self._replication.master.links.required = None
        self._replication.master.close_links()
        await self._replication.unfollow()
        self.role = BrokerRole.SLAVE
        if was_role is not BrokerRole.SLAVE:
            await self._on_role(BrokerRole.SLAVE, self.broker_id)
        cache = await self._epoch_cache_of(master_addr)
        if cache is None or int(cache.get("masterEpoch", -1)) != epoch:
            logger.info(
                "master %s does not lead epoch %d yet; following it at the next heartbeat", master_addr, epoch
            )
            self.master_id = NO_MASTER  # retried next round
            return
        master_entries = [(int(e), int(s)) for e, s in cache["epochEntries"]]
        local_max = store.max_commit_log_offset
        point = consistent_point(self.epochs.entries, local_max, master_entries, int(cache["maxOffset"]))
        if point is None:
            logger.error(
                "this log shares no epoch with master %s (local %s, master %s): it cannot follow it. "
                "Stop this broker, empty its store directory and start it again",
                master_addr,
                self.epochs.entries,
                master_entries,
            )
            self.master_id = NO_MASTER
            return
        if point < local_max:
            logger.warning(
                "log diverged from master %s at offset %d (local end %d): truncating the unconfirmed tail",
                master_addr,
                point,
                local_max,
            )
            await asyncio.to_thread(store.truncate_to, point)
        self.epochs.replace(master_entries)
        await self._replication.follow(self.broker_id, master_ha, master_addr)
        self.master_id, self.master_epoch = master_id, epoch
        self.role_changes += 1
        logger.warning(
            "broker %d of %s follows master %d (%s) at epoch %d from offset %d",
            self.broker_id,
            self._config.broker_name,
            master_id,
            master_addr,
            epoch,
            store.max_commit_log_offset,
        )

    async def _epoch_cache_of(self, master_addr: str) -> dict[str, Any] | None:
        try:
            response = await self._client.invoke(
                master_addr,
                RemotingCommand.request(RequestCode.GET_BROKER_EPOCH_CACHE, {}),
                self._config.broker_heartbeat_interval_ms,
            )
        except OrbitError as exc:
            logger.info("epoch entries of master %s unavailable: %s", master_addr, exc)
            return None
        if response.code != ResponseCode.SUCCESS:
            return None
        cache: dict[str, Any] = orjson.loads(response.body)
        return cache

    # -- SyncStateSet upkeep (master) ------------------------------------------------------------

    async def _check_sync_state_set(self) -> None:
        now = _now_ms()
        if now - self._last_sss_check_ms < self._config.check_sync_state_set_period_ms:
            return
        self._last_sss_check_ms = now
        links = self._replication.master.links
        wall = time.time_ns() // 1_000_000
        current = set(self.sync_state_set)
        behind_ms = self._config.ha_max_time_slave_not_catchup_ms
        for member in current - {self.broker_id}:
            # Remembered across reconnects: a link that blips does not reset the clock.
            seen = max(links.caught_up_ms_of(member), self._caught_up_ms.get(member, 0))
            self._caught_up_ms[member] = seen
        dropped = {
            member
            for member in current - {self.broker_id}
            if now - self._led_since_ms > behind_ms and wall - self._caught_up_ms[member] > behind_ms
        }
        epoch_start = self.epochs.entries[-1][1] if self.epochs.entries else 0
        period_ms = self._config.check_sync_state_set_period_ms
        joining = {
            link.broker_id
            for link in links
            if link.usable
            and link.broker_id > 0
            and link.broker_id not in current
            and link.ack_offset >= epoch_start
            and wall - link.caught_up_ms <= period_ms
        }
        if joining and self._config.all_ack_in_sync_state_set:
            joining = await self._catch_up(joining, current)
        if not dropped and not joining:
            return
        proposed = (current - dropped) | joining
        response = await self._alter(proposed)
        if response is not None and response.code == ResponseCode.SUCCESS:
            view = orjson.loads(response.body)
            logger.warning(
                "SyncStateSet of %s: %s -> %s (dropped %s, added %s)",
                self._config.broker_name,
                sorted(current),
                view["syncStateSet"],
                sorted(dropped),
                sorted(joining),
            )
            self._set_sync_state_set(frozenset(view["syncStateSet"]), int(view["syncStateSetEpoch"]))
        else:
            remark = response.remark if response is not None else "no controller answered"
            logger.info("SyncStateSet change %s -> %s refused: %s", sorted(current), sorted(proposed), remark)
            self._set_sync_state_set(self.sync_state_set, self.sync_state_set_epoch)

    async def _catch_up(self, joining: set[int], current: set[int]) -> set[int]:
        """Require ``joining``'s acks from now on, then keep those that hold everything before.

        Every send acknowledged before this moment ends at or below the log's end now; a slave
        that reaches it holds them all, and every later send waits for it. Only then may the
        controller count it in the SyncStateSet (and elect it).
        """
        links = self._replication.master.links
        links.required = frozenset((current | joining) - {self.broker_id})
        target = self._store.max_commit_log_offset
        deadline = _now_ms() + self._config.check_sync_state_set_period_ms
        while _now_ms() < deadline:
            if all(links.ack_of(member) >= target for member in joining):
                break
            await asyncio.sleep(0.01)
        reached = {member for member in joining if links.ack_of(member) >= target}
        links.required = frozenset((current | reached) - {self.broker_id})
        self._replication.master.release()
        return reached

    async def _alter(self, members: set[int]) -> RemotingCommand | None:
        ext = {
            "brokerName": self._config.broker_name,
            "masterBrokerId": str(self.broker_id),
            "masterEpoch": str(self.master_epoch),
            "syncStateSetEpoch": str(self.sync_state_set_epoch),
        }
        body = orjson.dumps({"syncStateSet": sorted(members)})
        for addr in self._ordered_controllers():
            response = await self._invoke(addr, RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET, ext, body)
            if response is not None and response.code != ResponseCode.CONTROLLER_NOT_LEADER:
                return response
        return None

    def status(self) -> dict[str, Any]:
        return {
            "brokerId": self.broker_id,
            "role": self.role.value if self.role is not None else "NONE",
            "masterBrokerId": self.master_id,
            "masterEpoch": self.master_epoch,
            "syncStateSet": sorted(self.sync_state_set),
            "syncStateSetEpoch": self.sync_state_set_epoch,
            "confirmOffset": self.confirm_offset(),
            "leaseRemainingMs": max(self._lease_until_ms - _now_ms(), 0) if self.is_master else 0,
            "epochEntries": [list(entry) for entry in self.epochs.entries],
        }
