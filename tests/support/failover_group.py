"""A broker group in controller mode as real processes: three controllers, a name server, brokers.

Every broker has fixed ports chosen free at start (listenPort, haListenPort), so a restarted
broker comes back at the address the controllers know. Timings are shortened through the
documented keys (docs/replication.md "Automatic failover"): heartbeats every 200 ms, a master
deposed after 2 s of silence (its lease: 1.5 s), SyncStateSet checked every 500 ms and shrunk
after 5 s behind; an HA link silent for 2 s is dropped. The caller kills every process (``FailoverGroup.kill_all``) in a ``finally``.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.transport.connection import RemotingClient
from tests.support.controllers import start_controllers, sync_state_data, wait_leader
from tests.support.processes import ServerProcess, create_topic, free_port, start_broker, start_namesrv

FAILOVER_CONF: dict[str, object] = {
    "enableControllerMode": True,
    "allAckInSyncStateSet": True,
    "controllerHeartBeatTimeoutMills": 2000,
    "brokerHeartbeatInterval": 200,
    "haMaxTimeSlaveNotCatchup": 5000,
    "checkSyncStateSetPeriod": 500,
    "slaveTimeout": 3000,
    "registerNameServerPeriod": 1000,
    "haSendHeartbeatInterval": 500,
    "haHousekeepingInterval": 2000,
    "haReconnectInterval": 200,
    "slaveSyncInterval": 1000,
    "mapedFileSizeCommitLog": 4 * 1024 * 1024,
}


@dataclass
class FailoverGroup:
    tmp_path: Path
    controllers: list[ServerProcess]
    namesrv: ServerProcess
    brokers: list[ServerProcess] = field(default_factory=list)

    @property
    def namesrv_addr(self) -> str:
        return self.namesrv.addr

    @property
    def controller_addrs(self) -> str:
        return ";".join(proc.addr for proc in self.controllers)

    def live_controllers(self) -> list[ServerProcess]:
        return [proc for proc in self.controllers if proc.proc is not None and proc.proc.poll() is None]

    def view(self) -> dict[str, Any]:
        """The controller leader's view of broker-a."""
        leader = wait_leader(self.live_controllers())
        data = sync_state_data(leader.addr)
        (group,) = [g for g in data["groups"] if g["brokerName"] == "broker-a"]
        result: dict[str, Any] = group
        return result

    def broker_of(self, broker_address: str) -> ServerProcess:
        return next(proc for proc in self.brokers if proc.addr == broker_address)

    def master(self, timeout_s: float = 20.0, not_epoch_below: int = 1) -> tuple[ServerProcess, int]:
        """The broker the controller names master, once it leads (answers as master)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                view = self.view()
            except (AssertionError, OSError, ValueError):
                time.sleep(0.1)
                continue
            if view["masterBrokerId"] > 0 and view["masterEpoch"] >= not_epoch_below:
                proc = self.broker_of(view["masterAddress"])
                status = broker_status(proc.addr)
                if (
                    status is not None
                    and status["role"] != "SLAVE"
                    and status["masterEpoch"] == view["masterEpoch"]
                ):
                    return proc, int(view["masterEpoch"])
            time.sleep(0.1)
        raise AssertionError(f"no master led broker-a within {timeout_s} s: {self.logs()}")

    def wait_full_sync_state_set(self, timeout_s: float = 20.0) -> None:
        """Until every broker is in the SyncStateSet (a fault before that may leave no candidate)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                if len(self.view()["syncStateSet"]) == len(self.brokers):
                    return
            except (AssertionError, OSError, ValueError):
                pass
            time.sleep(0.1)
        raise AssertionError(f"the SyncStateSet never held all {len(self.brokers)} brokers: {self.logs()}")

    def logs(self) -> str:
        return "\n".join(
            f"--- {proc.name}\n{proc.log()[-4000:]}" for proc in [*self.brokers, *self.controllers]
        )

    def kill_all(self) -> None:
        for proc in [*self.brokers, self.namesrv, *self.controllers]:
            proc.kill()


def start_failover_group(
    tmp_path: Path, brokers: int = 3, topic: str = "", queues: int = 4, **conf: object
) -> FailoverGroup:
    controllers = start_controllers(tmp_path)
    group = FailoverGroup(tmp_path, controllers, controllers[0])
    try:
        group.namesrv = start_namesrv(tmp_path)
        wait_leader(controllers)
        for index in range(brokers):
            proc = start_broker(
                tmp_path / f"broker-{index}",
                group.namesrv.addr,
                name="broker-a",
                haListenPort=free_port(),
                controllerAddr=group.controller_addrs,
                **{**FAILOVER_CONF, **conf},
            )
            proc.name = f"broker-{index}"
            group.brokers.append(proc)
            if topic:
                create_topic(proc.addr, topic, queues)
    except BaseException:
        group.kill_all()
        raise
    return group


async def fetch_broker_status(addr: str) -> dict[str, Any] | None:
    client = RemotingClient(connect_timeout_ms=500)
    try:
        request = RemotingCommand.request(RequestCode.GET_BROKER_HA_STATUS, {})
        response = await client.invoke(addr, request, 1000)
    except Exception:
        return None
    finally:
        await client.close()
    if response.code != ResponseCode.SUCCESS:
        return None
    status: dict[str, Any] = orjson.loads(response.body).get("controllerMode")
    return status


def broker_status(addr: str) -> dict[str, Any] | None:
    """A controller-mode broker's own view (role, epoch, SyncStateSet, epoch entries)."""
    return asyncio.run(fetch_broker_status(addr))
