"""A master and its slave, both with ACL: the slave's metadata copy signs its requests.

The slave asks its master for topics, offsets and groups with ordinary remoting requests,
which the master's ACL checks like any client's. Both brokers sign their own requests with
``innerClientAuthenticationCredentials``; a topic created on the master (by an admin account)
must reach the slave's ``topics.json``.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import orjson
import pytest

from orbitmq.client import AdminClient
from tests.support.processes import free_port, start_broker, start_namesrv

pytestmark = pytest.mark.integration

ACCOUNTS = """accounts:
  - accessKey: adminuser
    secretKey: adminsecret
    admin: true
  - accessKey: brokerinner
    secretKey: brokerinnersecret
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
"""
INNER = '{"accessKey": "brokerinner", "secretKey": "brokerinnersecret"}'


def test_acl_slave_copies_metadata_from_an_acl_master(tmp_path: Path) -> None:
    accounts = tmp_path / "plain_acl.yml"
    accounts.write_text(ACCOUNTS)
    acl = {
        "aclEnable": True,
        "aclFile": str(accounts),
        "innerClientAuthenticationCredentials": INNER,
        "bindAddress": "127.0.0.1",
        "registerNameServerPeriod": 1000,
        "slaveSyncInterval": 1000,
        "haSendHeartbeatInterval": 500,
        "haReconnectInterval": 300,
    }
    namesrv = start_namesrv(tmp_path)
    procs = [namesrv]
    try:
        master = start_broker(
            tmp_path / "master", namesrv.addr, brokerRole="ASYNC_MASTER", haListenPort=free_port(), **acl
        )
        procs.append(master)
        slave = start_broker(
            tmp_path / "slave", namesrv.addr, brokerRole="SLAVE", brokerId=1, haListenPort=free_port(), **acl
        )
        procs.append(slave)

        async def create() -> None:
            async with AdminClient(namesrv.addr, access_key="adminuser", secret_key="adminsecret") as admin:
                for _ in range(200):
                    if (await admin.cluster_info()).broker_addr_table:
                        break
                    await asyncio.sleep(0.05)
                await admin.create_topic("AclHaTopic", 2)

        asyncio.run(create())
        topics_file = slave.workdir / "store" / "config" / "topics.json"
        deadline = time.monotonic() + 10
        while True:
            if topics_file.exists() and "AclHaTopic" in orjson.loads(topics_file.read_bytes()).get(
                "topicConfigTable", {}
            ):
                break
            assert time.monotonic() < deadline, "the slave did not copy the topic within 10 s"
            time.sleep(0.1)
        assert "refused request code" not in master.log_path.read_text()
    finally:
        for proc in reversed(procs):
            proc.kill()
